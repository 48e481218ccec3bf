"""Edge placement ("Lost in the Middle", Liu et al., TACL 2024): relevant passages to both ends.

The frameworks' remedy for the U-shaped accuracy curve: alternate the most
relevant passages to the start and the end, the least relevant in the middle. No
query and no model: each mode reproduces one framework's output exactly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, TypeVar

from rag_position.cost import Cost
from rag_position.passages import Passage, as_passage
from rag_position.strategies._base import (
    OrderingResult,
    check_count,
    check_passages,
    given_scores,
    own_score,
    refuse_nan,
    reordered,
    unchanged,
)
from rag_position.strategies._options import opt

T = TypeVar("T")
EdgeMode = Literal["langchain", "llamaindex", "haystack"]


def edge_reorder(
    passages: Sequence[T],
    *,
    scores: Sequence[float | None] | None = None,
    mode: Annotated[
        EdgeMode,
        opt("Whose rule: LangChain's or LlamaIndex's LongContextReorder, or Haystack's."),
    ] = "langchain",
    top_k: Annotated[int | None, opt("Haystack: keep the first k.", ge=1)] = None,
    word_count_threshold: Annotated[
        int | None, opt("Haystack: stop once this many words are kept.", ge=1)
    ] = None,
) -> OrderingResult[T]:
    """Alternate the passages to the two ends, most relevant outermost.

    ``mode="langchain"``: LangChain's ``LongContextReorder`` (langchain-community
    0.4.2 ``_litm_reordering``): it trusts the given order (most relevant first),
    reverses it and alternates ``insert(0)`` / ``append``; with an even count the
    most relevant ends up LAST, with an odd count first. ``mode="llamaindex"``:
    LlamaIndex's ``LongContextReorder`` (llama-index-core 0.14.25): a stable sort by
    ascending score, a missing score counted as 0 (so below any positive score and
    above any negative one), then alternating ``insert(0)`` / ``append``; the most
    relevant ends up first with an odd count, last with an even one, and equal
    scores keep the LATER passage as the more relevant. ``mode="haystack"``:
    Haystack's ``LostInTheMiddleRanker`` (haystack-ai 3.4.1): the first ``top_k``
    passages, each inserted at ``ceil(len/2)``, so the most relevant is always first
    and the second last; with ``word_count_threshold`` it stops after the passage
    whose words (``text.split()``) reach the threshold, dropping the rest. These two
    options are the only way a strategy drops passages. Unlike Haystack, passages
    with the same id are not deduplicated first.

    ``scores`` (one per passage; ``None`` for missing): llamaindex uses them instead
    of the passages' own ``score`` (``Passage.score``, a mapping's ``"score"``, or
    an object's ``.score`` attribute); langchain and haystack first sort the
    passages by them, highest first (stable, missing last), as a user would before
    calling the framework. A NaN among the scores used (``scores``, or the own
    scores llamaindex reads) is a ``ValueError`` naming the passage: a NaN has no
    place in a sort, and ``None`` already says "missing"; infinities are numbers.
    0 or 1 passages come back as given, their scores not read (``scores`` must
    still have one per passage). ``result.scores``: the per-passage scores used
    (NaN for missing), ``[]`` when the order alone was used (and for 0 or 1
    passages). Always zero cost.

    Example:
        >>> edge_reorder(["a", "b", "c", "d", "e"]).passages  # "a" most relevant
        ['a', 'c', 'e', 'd', 'b']
        >>> edge_reorder(["a", "b", "c", "d"], mode="haystack").passages
        ['a', 'c', 'd', 'b']
        >>> edge_reorder(["a", "b", "c"], scores=[0.1, 0.9, 0.5], mode="llamaindex").order
        [1, 0, 2]
    """
    if mode not in ("langchain", "llamaindex", "haystack"):
        raise ValueError(f"`mode` must be 'langchain', 'llamaindex' or 'haystack', got {mode!r}")
    check_count(top_k, "top_k")
    check_count(word_count_threshold, "word_count_threshold")
    if mode != "haystack" and (top_k is not None or word_count_threshold is not None):
        raise ValueError(
            "`top_k` and `word_count_threshold` are Haystack options: use mode='haystack'"
        )
    items = check_passages(passages)
    n = len(items)
    if scores is not None and len(scores) != n:
        raise ValueError(f"got {len(scores)} scores for {n} passages")
    if n < 2:  # nothing to order: no score is read
        return unchanged(items)
    used = _scores(items, scores, mode)
    if mode == "llamaindex":
        order = _llamaindex(used)
    else:
        relevance = list(range(n))
        if scores is not None:
            relevance.sort(
                key=lambda i: (math.isnan(used[i]), 0.0 if math.isnan(used[i]) else -used[i])
            )
        if mode == "langchain":
            order = _langchain(relevance)
        else:
            order = _haystack(relevance, items, top_k, word_count_threshold)
    return OrderingResult(passages=reordered(items, order), order=order, scores=used, cost=Cost())


def _langchain(relevance: list[int]) -> list[int]:
    """``_litm_reordering``: reverse, then even steps ``insert(0)``, odd steps ``append``."""
    docs = list(reversed(relevance))
    out: list[int] = []
    for i, d in enumerate(docs):
        if i % 2 == 1:
            out.append(d)
        else:
            out.insert(0, d)
    return out


def _llamaindex(scores: list[float]) -> list[int]:
    """``_postprocess_nodes``: stable ascending sort, even steps ``insert(0)``, odd ``append``."""
    ascending = sorted(range(len(scores)), key=lambda i: scores[i])
    out: list[int] = []
    for i, d in enumerate(ascending):
        if i % 2 == 0:
            out.insert(0, d)
        else:
            out.append(d)
    return out


def _haystack(
    relevance: list[int], items: list[Any], top_k: int | None, threshold: int | None
) -> list[int]:
    """``LostInTheMiddleRanker.run``: truncate to top_k, insert each at ceil(len/2)."""
    docs = relevance[:top_k] if top_k else relevance
    if len(docs) <= 1:
        return docs
    words = 0
    if threshold:
        text = _text(items[docs[0]])
        if text:
            words = len(text.split())
            if words >= threshold:
                return docs[:1]
    out = [0]
    for k in range(1, len(docs)):
        out.insert(len(out) // 2 + len(out) % 2, k)
        if threshold:
            text = _text(items[docs[k]])
            if text:
                words += len(text.split())
                if words >= threshold:
                    break
    return [docs[k] for k in out]


def _scores(items: list[Any], scores: Sequence[float | None] | None, mode: str) -> list[float]:
    if scores is not None:
        given = given_scores(scores, len(items), missing=True)
    elif mode == "llamaindex":
        given = [own_score(x) for x in items]
        refuse_nan(given, "the own score of passages[{}]")
    else:
        return []
    missing = 0.0 if mode == "llamaindex" else math.nan  # LlamaIndex: `score if not None else 0`
    return [missing if s is None else s for s in given]


def _text(item: Any) -> str:
    if isinstance(item, (Passage, str, Mapping)):
        return as_passage(item).text
    for attr in ("content", "text", "page_content"):
        value = getattr(item, attr, None)
        if isinstance(value, str):
            return value
    raise TypeError(f"cannot count the words of a {type(item).__name__}; pass Passages or dicts")
