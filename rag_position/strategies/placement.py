"""Placement by a model's position profile (beyond the papers).

"Lost in the Middle" (Liu et al., TACL 2024) found accuracy U-shaped in the gold
passage's position, but each model has its own curve: the embedded model reads
the LAST position best, so "most relevant first" is the wrong rule for it.
:func:`profile_reorder` puts the most relevant passage at the position the
model's :class:`~rag_position.strategies.PositionProfile` rates best, the next at
the second best, and so on.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, TypeVar

from rag_position.cost import Cost
from rag_position.models.protocols import Scorer
from rag_position.strategies._base import (
    OrderingResult,
    check_passages,
    check_question,
    own_score,
    reordered,
)
from rag_position.strategies.convex import convex_score
from rag_position.strategies.profiles import ProfileLike, as_profile, place

T = TypeVar("T")


def profile_reorder(
    question: str,
    passages: Sequence[T],
    *,
    profile: ProfileLike,
    scores: Sequence[float] | None = None,
    scorer: Scorer | None = None,
    seed: int = 0,
    **convex_options: Any,
) -> OrderingResult[T]:
    """Most relevant passage to the profile's best position, the next to the second best, ...

    Relevance, first available: ``scores`` (one per passage, higher is more
    relevant); ConvexScore's scores when a ``scorer`` is given (``convex_options``
    go to :func:`~rag_position.strategies.convex_score`, and its cost is this
    result's); the passages' own retriever scores when every passage has one;
    else the given order (first most relevant). ``profile`` (a
    :class:`PositionProfile` or its JSON file) is interpolated to the number of
    passages. Ties go to the earlier passage. ``result.scores``: the relevance used
    (``[]`` for the given order); ``details["relevance"]`` says which.

    Example:
        >>> from rag_position.strategies import PositionProfile
        >>> profile = PositionProfile([0.2, 0.1, 0.5])  # reads the last position best
        >>> r = profile_reorder("Who wrote Hamlet?", ["a", "b", "c"], profile=profile,
        ...                     scores=[0.9, 0.1, 0.5])
        >>> r.passages, r.details["relevance"]
        (['c', 'b', 'a'], 'scores')
    """
    check_question(question)
    prof = as_profile(profile)
    if convex_options and (scorer is None or scores is not None):
        raise ValueError(
            f"options {sorted(convex_options)} go to convex_score: pass a `scorer` and no `scores`"
        )
    items = check_passages(passages)
    n = len(items)
    if n < 2:
        return OrderingResult(passages=items, order=list(range(n)), scores=[], cost=Cost())
    cost = Cost()
    if scores is not None:
        if len(scores) != n:
            raise ValueError(f"got {len(scores)} scores for {n} passages")
        relevance, source = [float(s) for s in scores], "scores"
        if any(math.isnan(s) for s in relevance):
            raise ValueError("`scores` holds NaN; give every passage a number (-inf for last)")
    elif scorer is not None:
        result = convex_score(question, items, scorer, seed=seed, **convex_options)
        relevance, cost, source = result.scores, result.cost, "convex_score"
    else:
        own = [own_score(x) for x in items]
        if all(s is not None and not math.isnan(s) for s in own):  # NaN: no score
            relevance, source = [s for s in own if s is not None], "passage_scores"
        else:
            relevance, source = [float(n - i) for i in range(n)], "order"
    ranked = sorted(range(n), key=lambda i: (-relevance[i], i))
    order = place(ranked, "profile", "scores", prof)
    return OrderingResult(
        passages=reordered(items, order),
        order=order,
        scores=[] if source == "order" else relevance,
        cost=cost,
        details={"relevance": source},
    )
