"""ConvexScore gold-passage placement (Liu, Qi, He et al., method 2), in N passes instead of N².

The question's likelihood is U-shaped in the gold passage's position and flat in
a distractor's, so the passage whose likelihood curve rises most at the two ends
is the gold one; it moves to where the model reads best. N rotations of one
seeded random base order put every passage at every position exactly once.

Every prompt holds all N passages, so one rotation set is N prompts of N passages:
N² passage renderings for the scorer, however the bookkeeping is done. N is capped
at :data:`MAX_PASSAGES` (and prompts x N at :data:`MAX_PLACEMENTS`); longer lists
need a per-passage method such as ``passage_likelihood`` (N one-passage prompts).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Literal, TypeVar

import numpy as np
import numpy.typing as npt

from rag_position.cost import Cost
from rag_position.models.protocols import Scorer
from rag_position.strategies._base import (
    OrderingResult,
    check_count,
    check_passages,
    check_question,
    check_seed,
    distinct_orders,
    reordered,
)
from rag_position.strategies._options import (
    LOOSE,
    PLACEMENT_DOC,
    PROFILE_DOC,
    QUERY_AWARE_DOC,
    REST_DOC,
    TEMPLATE_DOC,
    opt,
)
from rag_position.strategies._question_likelihood import check_template, question_likelihood
from rag_position.strategies.profiles import Placement, ProfileLike, Rest, check_placement, place

T = TypeVar("T")
Variant = Literal["convex", "authors"]
Design = Literal["rotations", "authors"]

MAX_PASSAGES = 500
"""The most passages ConvexScore takes. One rotation set is N prompts of all N passages:
N² passage renderings (at 500 passages of 100 words, about 200 MB of prompt text and
some 30 million prompt tokens for the model), so longer lists are refused with a
``ValueError`` rather than run for minutes; use ``passage_likelihood`` (N one-passage
prompts) or trim the list first."""

MAX_PLACEMENTS = MAX_PASSAGES**2
"""The most passage placements (prompts x N) one call renders: one full rotation set at
:data:`MAX_PASSAGES`. More base orders or ``design="authors"`` (N² prompts, N³
placements) reach it at fewer passages."""


@dataclass(frozen=True, kw_only=True)
class ConvexScoreResult(OrderingResult[T]):
    """ConvexScore's answer. ``scores[d]`` is input passage ``d``'s score.

    ``gold`` is the input index of the identified gold candidate (the top score);
    ``likelihoods[d][p]`` is the mean question likelihood with passage ``d`` at
    position ``p`` (NaN where no scored prompt put it there); ``edge`` and
    ``curvature`` are E(d) and C(d) (NaN where undefined, and for the authors'
    variant); ``orders`` and ``prompt_scores`` are the scored prompts.

    Example::

        result = convex_score("Who wrote Hamlet?", docs, load_model("embedded"))
        result.gold, result.scores[result.gold], result.order  # gold candidate, its score
        result.likelihoods[result.gold], result.cost.lm_calls  # its curve over positions
    """

    gold: int | None
    likelihoods: list[list[float]]
    edge: list[float]
    curvature: list[float]
    orders: list[list[int]]
    prompt_scores: list[float]


def convex_score(
    question: str,
    passages: Sequence[T],
    scorer: Scorer,
    *,
    n_base_orders: Annotated[int, opt("Seeded base orders (R).", ge=1)] = 1,
    n_rotations: Annotated[
        int | None, opt("Rotations scored per base order (M <= N; default N).", ge=1)
    ] = None,
    seed: Annotated[int, opt("Seed of the base orders.")] = 0,
    design: Annotated[
        Design, opt("N rotations, or the authors' N shuffles x N rotations.")
    ] = "rotations",
    edge_weight: Annotated[float, opt("Weight of the edge term E(d).")] = 1.0,
    curvature_weight: Annotated[float, opt("Weight of the curvature term.")] = 1.0,
    variant: Annotated[
        Variant, opt("'convex' (edge + curvature) or the authors' +/-LL score.")
    ] = "convex",
    placement: Annotated[Placement, opt(PLACEMENT_DOC)] = "first",
    rest: Annotated[Rest | None, opt(REST_DOC)] = None,
    profile: Annotated[ProfileLike | None, opt(PROFILE_DOC), LOOSE] = None,
    template: Annotated[str | None, opt(TEMPLATE_DOC)] = None,
    query_aware: Annotated[bool, opt(QUERY_AWARE_DOC)] = False,
) -> ConvexScoreResult[T]:
    """Identify the gold passage by ConvexScore and place it.

    Design (see :func:`convex_design`): ``n_base_orders`` (R) seeded random base
    orders, ``n_rotations`` (M, default N) evenly spaced rotations of each: R·M
    prompts, one batched scoring call. ``design="authors"`` is the authors' N
    shuffles x N rotations as intended (R = N distinct shuffles: their public code
    restarts each shuffle's rotations from the original order, repeating N
    prompts N times). Scores, ``variant="convex"``:
    ``edge_weight·E(d) + curvature_weight·C(d)`` with ``E = ll_0 + ll_{N-1}`` and
    ``C = (ll_0 + ll_{N-1})/2 - mean_{0<p<N-1} ll_p``; ``variant="authors"``: the mean
    over prompts of +LL when ``d`` sits at either end, -LL inside.

    Placement of the top-scored passage: ``"first"`` (the paper), ``"last"``, or
    ``"profile"`` (the best position of ``profile``, a :class:`PositionProfile` or
    its JSON file). ``rest``: ``"keep"`` (the others keep their order; default for
    first and last) or ``"scores"`` (they follow their scores: toward the front for
    first, toward the end for last, down the profile's ranking for profile, its
    default). Ties go to the earlier input passage (with 2 passages every position
    is an end, the scores tie and the order stays). 0 or 1 passages: returned as
    they are at zero cost.

    Size: every prompt holds all N passages, so the scorer receives R·M prompts of N
    passages (N² passage renderings for one rotation set; memory and time grow with
    that text). More than :data:`MAX_PASSAGES` (500) passages, or more than
    :data:`MAX_PLACEMENTS` (250,000) passage placements (R·M·N: the authors' design at
    N > 62, or several base orders near the cap), raise ``ValueError`` before anything
    is rendered or scored; use :func:`~rag_position.strategies.passage_likelihood`
    (N one-passage prompts) for longer lists, or trim them first.

    Example:
        >>> r = convex_score("Who wrote Hamlet?", docs, model)     # N prompts
        >>> r.gold, r.order[0] == r.gold, r.cost.lm_calls
        (3, True, 10)
    """
    check_question(question)
    check_template(template, query_aware)
    check_count(n_base_orders, "n_base_orders")
    check_count(n_rotations, "n_rotations")
    seed = check_seed(seed)
    _check_choice(variant, ("convex", "authors"), "variant")
    _check_choice(design, ("rotations", "authors"), "design")
    for name, w in (("edge_weight", edge_weight), ("curvature_weight", curvature_weight)):
        if not math.isfinite(w):
            raise ValueError(f"`{name}` must be a finite number, got {w}")
    prof = check_placement(placement, rest, profile)
    items = check_passages(passages)
    n = len(items)
    if n < 2:
        return ConvexScoreResult(
            passages=items, order=list(range(n)), scores=[], cost=Cost(), gold=0 if n else None,
            likelihoods=[], edge=[], curvature=[], orders=[], prompt_scores=[],
        )  # fmt: skip
    orders = convex_design(
        n, n_base_orders=n_base_orders, n_rotations=n_rotations, seed=seed, design=design
    )
    gauge = question_likelihood(
        question, items, scorer, orders=orders, template=template, query_aware=query_aware
    )
    table = likelihood_table(orders, gauge.scores, n)
    if variant == "authors":
        scores = authors_scores(orders, gauge.scores, n)
        edge, curvature = [math.nan] * n, [math.nan] * n
    else:
        scores, edge, curvature = convex_scores(table, edge_weight, curvature_weight)
    ranked = sorted(range(n), key=lambda d: (-scores[d], d))
    order = place(ranked, placement, rest, prof)
    return ConvexScoreResult(
        passages=reordered(items, order),
        order=order,
        scores=scores,
        cost=gauge.cost,
        gold=ranked[0],
        likelihoods=table,
        edge=edge,
        curvature=curvature,
        orders=orders,
        prompt_scores=gauge.scores,
    )


def convex_design(
    n: int,
    *,
    n_base_orders: int = 1,
    n_rotations: int | None = None,
    seed: int = 0,
    design: Design = "rotations",
) -> list[list[int]]:
    """The orders ConvexScore scores: ``n_rotations`` rotations of each of ``n_base_orders`` bases.

    Base orders are seeded random arrangements, distinct as cycles while there are
    enough ((N-1)! of them; rotations of one cycle would repeat the same prompts).
    Rotation ``k`` of base ``b`` puts ``b[j]`` at position ``(j - k) mod N``; all N
    rotations put every passage at every position once. With M = ``n_rotations`` < N the
    rotations are evenly spaced (``k = floor(i·N/M)``): each passage is measured at M
    of the N positions, at most 2M passages ever sit at an end, and a passage never
    measured where a weighted term needs it scores ``-inf`` (it cannot be the gold
    candidate). ``design="authors"``: N base orders (N² prompts), each (passage,
    position) pair measured N times under different arrangements of the others.
    More than :data:`MAX_PASSAGES` passages or :data:`MAX_PLACEMENTS` placements
    (prompts x N) raise ``ValueError``.

    Example:
        >>> convex_design(3)  # every passage at every position once
        [[1, 2, 0], [2, 0, 1], [0, 1, 2]]
        >>> len(convex_design(4, n_base_orders=2)), len(convex_design(4, n_rotations=2))
        (8, 2)
    """
    check_count(n, "n")
    check_count(n_base_orders, "n_base_orders")
    check_count(n_rotations, "n_rotations")
    _check_choice(design, ("rotations", "authors"), "design")
    if design == "authors":
        if n_base_orders not in (1, n):
            raise ValueError("design='authors' uses N base orders; leave `n_base_orders` at 1")
        n_base_orders = n
    m = n if n_rotations is None else n_rotations
    if m > n:
        raise ValueError(
            f"`n_rotations` ({m}) counts rotations of each base order, at most N = {n}; "
            "use `n_base_orders` for more prompts"
        )
    check_size(n, n_base_orders, m, design)
    rng = random.Random(check_seed(seed))
    tails = distinct_orders(n - 1, n_base_orders, rng)
    orders: list[list[int]] = []
    for r in range(n_base_orders):
        cycle = [0] + [x + 1 for x in tails[r % len(tails)]]
        shift = rng.randrange(n)
        base = cycle[shift:] + cycle[:shift]
        for i in range(m):
            k = i * n // m
            orders.append(base[k:] + base[:k])  # position p holds base[(p + k) mod N]
    return orders


def check_size(n: int, n_base_orders: int, n_rotations: int, design: str = "rotations") -> None:
    """Refuse a design over :data:`MAX_PASSAGES` passages or :data:`MAX_PLACEMENTS` placements.

    ``n_base_orders`` is R as the design uses it (N for ``design="authors"``); the
    design renders R·M prompts of N passages each.
    """
    if n > MAX_PASSAGES:
        raise ValueError(
            f"convex_score got {n:,} passages; it takes at most {MAX_PASSAGES:,}: every one of "
            f"its prompts holds all N passages, so one rotation set is N prompts of N passages "
            f"({n * n:,} passage renderings here). Use passage_likelihood (N one-passage "
            "prompts) for long lists, or keep the top passages first"
        )
    placements = n_base_orders * n_rotations * n
    if placements > MAX_PLACEMENTS:
        what = (
            "design='authors' (N x N prompts)"
            if design == "authors"
            else f"n_base_orders={n_base_orders} x n_rotations={n_rotations}"
        )
        raise ValueError(
            f"convex_score with {what} on {n:,} passages renders "
            f"{n_base_orders * n_rotations:,} prompts of {n:,} passages = {placements:,} passage "
            f"placements; the cap is {MAX_PLACEMENTS:,}. Use fewer `n_base_orders` or "
            "`n_rotations`, the default design, or passage_likelihood (N one-passage prompts)"
        )


def likelihood_table(
    orders: Sequence[Sequence[int]], prompt_scores: Sequence[float], n: int
) -> list[list[float]]:
    """``ll[d][p]``: mean score of the prompts with passage ``d`` at position ``p``; NaN if none.

    One pass over the prompts' cells in array code; each cell's sum adds the prompts'
    scores in prompt order, as a loop would (``np.bincount`` accumulates in input order).
    """
    cells, weights = _cells(orders, prompt_scores, n)
    sums = np.bincount(cells, weights=np.repeat(weights, n), minlength=n * n)
    counts = np.bincount(cells, minlength=n * n)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(counts > 0, sums / counts, np.nan)
    table: list[list[float]] = means.reshape(n, n).tolist()
    return table


def convex_scores(
    table: Sequence[Sequence[float]], edge_weight: float = 1.0, curvature_weight: float = 1.0
) -> tuple[list[float], list[float], list[float]]:
    """``(score, E, C)`` per passage from the ll table, using the measured positions.

    E = 2·mean of the measured ends (ll_0 + ll_{N-1} when both are); C = mean of the
    measured ends - mean of the measured interior positions (0 when N = 2, which has
    no interior). A term with a nonzero weight that is undefined makes the score -inf.

    On a design where every passage is measured at every position equally often (R
    complete rotation sets, or the authors' N x N), every row has the same total, so
    C, E + C and the authors' +/-LL are increasing affine functions of E: all rank the
    passages alike, and only ``n_rotations`` < N makes the weights matter.
    """
    scores, edges, curvatures = [], [], []
    for row in table:
        n = len(row)
        ends = [v for v in (row[0], row[n - 1]) if not math.isnan(v)]
        inner = [v for v in row[1 : n - 1] if not math.isnan(v)]
        e = 2 * sum(ends) / len(ends) if ends else math.nan
        if n <= 2:
            c = 0.0
        elif ends and inner:
            c = sum(ends) / len(ends) - sum(inner) / len(inner)
        else:
            c = math.nan
        total = 0.0
        for w, term in ((edge_weight, e), (curvature_weight, c)):
            if w:
                total += w * term
        scores.append(-math.inf if math.isnan(total) else total)
        edges.append(e)
        curvatures.append(c)
    return scores, edges, curvatures


def authors_scores(
    orders: Sequence[Sequence[int]], prompt_scores: Sequence[float], n: int
) -> list[float]:
    """The authors' code: mean over prompts of +LL with ``d`` at either end, -LL inside."""
    cells, weights = _cells(orders, prompt_scores, n)
    if not len(weights):
        raise ValueError("no prompts to average over")
    sign = np.full(n, -1.0)
    sign[[0, n - 1]] = 1.0
    signed = (weights[:, None] * sign[None, :]).ravel()
    totals = np.bincount(cells // n, weights=signed, minlength=n)  # in prompt order, as a loop
    result: list[float] = (totals / len(weights)).tolist()
    return result


def _cells(
    orders: Sequence[Sequence[int]], prompt_scores: Sequence[float], n: int
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]:
    """The flat ``d·N + p`` cell of every (prompt, position), prompt by prompt; the scores."""
    weights = np.asarray(prompt_scores, dtype=float).reshape(-1)
    if len(orders) != len(weights):
        raise ValueError(f"{len(orders)} orders but {len(weights)} prompt scores")
    if not len(weights):
        return np.zeros(0, dtype=np.intp), weights
    grid = np.asarray(orders, dtype=np.intp)
    if grid.shape != (len(weights), n) or grid.min() < 0 or grid.max() >= n:
        raise ValueError(f"every order must list {n} passage indices in range({n})")
    return (grid * n + np.arange(n)).ravel(), weights


def _check_choice(value: str, allowed: tuple[str, ...], name: str) -> None:
    if value not in allowed:
        raise ValueError(f"`{name}` must be one of {', '.join(map(repr, allowed))}, got {value!r}")
