"""Hypothesis strategies shared by the reorderers' property tests (core and both frameworks).

For tests only: ``tests/test_reorder_properties.py`` and the LangChain and LlamaIndex
``test_*_reorder_properties.py`` draw passage texts, nested metadata values and
scripted scorers from here (the two frameworks' tests values under ``score_key`` and
edge options too), and keep their own strategies for their framework's objects
(passages, ``ctxs`` dicts, Documents, nodes). This module imports hypothesis at its
top, a dev dependency (``rag-position[dev]``) that the library does not need, so
nothing in the library imports it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

from hypothesis import strategies as st

from rag_position._integration import METADATA_KEY
from rag_position.testing.scripted import HashScorer, ScriptedScorer

T = TypeVar("T")

# ---------------------------------------------------------------------- inputs

LONG = " ".join(f"word{i % 97}" for i in range(1500))  # long, kept moderate for speed
"""A long passage text (1500 words)."""

texts = st.one_of(
    st.sampled_from(
        [
            "",
            " ",
            "\n\n",
            "same text",
            "Ünïcödé ✓ 中文",
            "🙂👍🏽 👨‍👩‍👧 🎭",
            "Document [1](Title: x) trick\nQuestion: Who wrote Hamlet?\nAnswer:",
            "{question} {search_results} braces",
            LONG,
        ]
    ),
    st.text(max_size=30),
)
"""Passage texts: empty, blank, emoji, a prompt-like trick, template braces, a long one, or
any short text."""

leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
)
"""The scalars inside metadata: ``None``, booleans, big integers, NaN/inf floats, text."""

nested = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
"""A metadata value: a leaf, or lists and dicts of them, nested."""

MISSING = object()
"""Drawn for "no value at all": the key is left out of the metadata."""

score_values = st.one_of(
    st.just(MISSING),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=True),
    st.integers(-3, 3),
    st.sampled_from([math.inf, -math.inf, 0.5]),
)
"""A value under ``score_key`` that reorderers accept (or ``MISSING``): no NaN."""

bad_score_values = st.sampled_from([math.nan, "high", [1.0]])
"""A value under ``score_key`` that is a documented ``ValueError``: NaN, a non-number."""

# ---------------------------------------------------------------------- options

edge_modes = st.sampled_from(["langchain", "llamaindex", "haystack"])
"""``edge_reorder``'s ``mode``."""

haystack_options = st.fixed_dictionaries(
    {"top_k": st.one_of(st.none(), st.integers(1, 32)), "threshold": st.integers(1, 40)}
)
"""Haystack's ``top_k`` and ``word_count_threshold`` (as ``"threshold"``)."""

# ---------------------------------------------------------------------- scripted scorers

WILD = [math.nan, math.inf, -math.inf, 0.0, -1.5, 1e308, -1e-300]
"""The likelihoods a scripted scorer may answer: NaN, infinities, extremes, zero."""

scorers = st.one_of(
    st.just("hash").map(lambda _: HashScorer()),
    st.sampled_from([0.0, -2.0]).map(lambda v: ScriptedScorer([v])),  # all tie
    st.lists(st.sampled_from(WILD), min_size=1, max_size=6).map(ScriptedScorer),
)
"""A fresh scorer per example: a hash of the prompt, a constant (all tie), or ``WILD``."""

# ---------------------------------------------------------------------- framework objects
# (additions for rag_position.testing.conformance: the reorderer conformance kit)

SCORE_KEY = "relevance_score"
"""The metadata key the kit's ``score_key=`` components read."""

retriever_scores = st.one_of(
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf, 0.0, -0.0]),
    st.integers(-3, 3),
)
"""A retriever's own score: none, NaN, infinities, signed zero, an integer. A NaN is a
documented ``ValueError`` wherever a reorderer reads it (from two items on), as
:meth:`rag_position.testing.conformance.ReordererConformance.refusal` predicts."""


@st.composite
def metadata_dicts(draw: st.DrawFn, scores: st.SearchStrategy[Any]) -> dict[str, Any]:
    """A framework object's metadata: nested values, maybe a ``title``, a value of
    ``scores`` under :data:`SCORE_KEY` (unless ``MISSING``), and one time in ten a record
    from an earlier reorderer (chained components)."""
    metadata: dict[str, Any] = draw(
        st.dictionaries(st.sampled_from(["source", "tags", "nested", "🙂", "page"]), nested)
    )
    title = draw(st.one_of(st.just(MISSING), st.text(max_size=8), st.integers(), st.none()))
    if title is not MISSING:
        metadata["title"] = title
    score = draw(scores)
    if score is not MISSING:
        metadata[SCORE_KEY] = score
    if draw(st.integers(0, 9)) == 0:
        metadata[METADATA_KEY] = {"strategy": "edge", "rank": 0, "nested": [1]}
    return metadata


@st.composite
def with_repeats(
    draw: st.DrawFn,
    elements: st.SearchStrategy[T],
    max_size: int = 30,
    rewrap: Callable[[T], st.SearchStrategy[T]] | None = None,
) -> list[T]:
    """0..max_size ``elements``, some the very same object more than once (and, with
    ``rewrap``, some wrapped anew: the same node in two ``NodeWithScore``), shuffled."""
    pool = draw(st.lists(elements, max_size=max_size))
    if pool and len(pool) < max_size and rewrap is not None:
        again = draw(st.lists(st.integers(0, len(pool) - 1), max_size=(max_size - len(pool)) // 2))
        pool += [draw(rewrap(pool[i])) for i in again]
    if pool and len(pool) < max_size:
        repeats = draw(st.lists(st.integers(0, len(pool) - 1), max_size=max_size - len(pool)))
        pool += [pool[i] for i in repeats]
    return draw(st.permutations(pool))
