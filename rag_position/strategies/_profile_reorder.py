"""Placement by a model's position profile (beyond the papers).

"Lost in the Middle" (Liu et al., TACL 2024) found accuracy U-shaped in the gold
passage's position, but each model has its own curve: the embedded model reads
the LAST position best, so "most relevant first" is the wrong rule for it.
:func:`profile_reorder` puts the most relevant passage at the position the
model's :class:`~rag_position.strategies.PositionProfile` rates best, the next at
the second best, and so on. With a scorer, relevance is by default each passage's
:func:`~rag_position.strategies.passage_likelihood` (the question's likelihood
after that passage alone), ``relevance="convex_score"`` asks ConvexScore instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, TypeVar, get_args

from rag_position.cost import Cost
from rag_position.models.protocols import Scorer
from rag_position.strategies._base import (
    OrderingResult,
    check_passages,
    check_question,
    given_scores,
    own_score,
    refuse_nan,
    reordered,
)
from rag_position.strategies._convex_score import convex_score
from rag_position.strategies._passage_likelihood import passage_likelihood
from rag_position.strategies.profiles import ProfileLike, as_profile, place

T = TypeVar("T")

Relevance = Literal["passage_likelihood", "convex_score"]
"""Where :func:`profile_reorder` takes its relevance from when a ``scorer`` is given."""
RELEVANCES: tuple[str, ...] = get_args(Relevance)


def profile_reorder(
    question: str,
    passages: Sequence[T],
    *,
    profile: ProfileLike,
    scores: Sequence[float] | None = None,
    scorer: Scorer | None = None,
    relevance: Relevance = "passage_likelihood",
    seed: int = 0,
    **convex_options: Any,
) -> OrderingResult[T]:
    """Most relevant passage to the profile's best position, the next to the second best, ...

    Relevance, first available: ``scores`` (one per passage, higher is more
    relevant); with a ``scorer``, by ``relevance``: ``"passage_likelihood"``
    (default: :func:`~rag_position.strategies.passage_likelihood`'s scores, the
    question's mean log-likelihood after each passage alone, N one-passage prompts)
    or ``"convex_score"`` (ConvexScore's scores; ``convex_options`` and ``seed`` go
    to :func:`~rag_position.strategies.convex_score`); the scoring's cost is this
    result's. Then the passages' own retriever scores (``Passage.score``, a
    mapping's ``"score"``, an object's ``.score``) when every passage has one; else
    the given order (first most relevant). A NaN in ``scores``, or (without
    ``scores`` and ``scorer``) in a passage's own score, is a ``ValueError`` naming
    the passage: give a number, ``None`` for a missing own score (infinities are
    numbers). 0 or 1 passages come back as given, nothing read or scored. Passage
    likelihood is the default: it costs about one full prompt of scoring tokens
    where ConvexScore costs N full prompts, and it identifies the gold passage more
    often (docs/measurements.md, "Measured: identifying the gold passage, by design
    and cost"). ``convex_options`` with
    another relevance (or without a scorer, or with ``scores``) and an unknown
    ``relevance`` are a ``ValueError``. ``profile`` (a :class:`PositionProfile` or
    its JSON file) is interpolated to the number of passages; the whole ranking goes
    down it. Ties go to the earlier passage. ``result.scores``: the relevance used
    (``[]`` for the given order); ``details["relevance"]`` says which
    (``"scores"``, ``"passage_likelihood"``, ``"convex_score"``,
    ``"passage_scores"`` or ``"order"``).

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
    if relevance not in RELEVANCES:
        raise ValueError(
            f"unknown relevance {relevance!r}; known: {', '.join(map(repr, RELEVANCES))}"
        )
    if convex_options:
        wrong = [
            *(["no `scorer` was given"] if scorer is None else []),
            *(["`scores` were given (they are the relevance)"] if scores is not None else []),
            *([f"relevance={relevance!r}"] if relevance != "convex_score" else []),
        ]
        if wrong:
            raise ValueError(
                f"options {sorted(convex_options)} go to convex_score, used only with a "
                f"`scorer`, no `scores` and relevance='convex_score'; here {'; '.join(wrong)}"
            )
    items = check_passages(passages)
    n = len(items)
    if n < 2:
        return OrderingResult(passages=items, order=list(range(n)), scores=[], cost=Cost())
    cost = Cost()
    if scores is not None:
        checked = given_scores(scores, n, hint="-inf to rank it last")
        used, source = [s for s in checked if s is not None], "scores"
    elif scorer is not None and relevance == "convex_score":
        convex = convex_score(question, items, scorer, seed=seed, **convex_options)
        used, cost, source = convex.scores, convex.cost, "convex_score"
    elif scorer is not None:
        alone = passage_likelihood(question, items, scorer)
        used, cost, source = alone.scores, alone.cost, "passage_likelihood"
    else:
        own = [own_score(x) for x in items]
        refuse_nan(own, "the own score of passages[{}]")  # None, not NaN, is "no score"
        if all(s is not None for s in own):
            used, source = [s for s in own if s is not None], "passage_scores"
        else:
            used, source = [float(n - i) for i in range(n)], "order"
    ranked = sorted(range(n), key=lambda i: (-used[i], i))
    order = place(ranked, "profile", "scores", prof)
    return OrderingResult(
        passages=reordered(items, order),
        order=order,
        scores=[] if source == "order" else used,
        cost=cost,
        details={"relevance": source},
    )
