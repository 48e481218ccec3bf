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

from hypothesis import strategies as st

from rag_position.testing.scripted import HashScorer, ScriptedScorer

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
