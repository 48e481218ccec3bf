"""Likelihood selection (Liu, Qi, He et al., method 1): answer with the most likely order.

Draw ``n_orders`` seeded random orders of the passages (the paper: as many as
there are passages), score the question's likelihood after each in one batched
call, and keep the order with the highest mean log-likelihood.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, TypeVar

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
from rag_position.strategies._options import QUERY_AWARE_DOC, TEMPLATE_DOC, opt
from rag_position.strategies._question_likelihood import check_template, question_likelihood

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class SelectionResult(OrderingResult[T]):
    """``scores[i]`` is the question likelihood of candidate ``orders[i]``; ``best`` won.

    Example::

        result = likelihood_selection("Who wrote Hamlet?", docs, load_model("embedded"))
        result.orders[result.best] == result.order, result.scores[result.best], result.cost
    """

    orders: list[list[int]]
    best: int | None


def likelihood_selection(
    question: str,
    passages: Sequence[T],
    scorer: Scorer,
    *,
    n_orders: Annotated[
        int | None, opt("Candidate orders to score (default: one per passage).", ge=1)
    ] = None,
    seed: Annotated[int, opt("Seed of the candidate orders.")] = 0,
    include_given: Annotated[bool, opt("Make the given order the first candidate.")] = True,
    template: Annotated[str | None, opt(TEMPLATE_DOC)] = None,
    query_aware: Annotated[bool, opt(QUERY_AWARE_DOC)] = False,
) -> SelectionResult[T]:
    """The candidate order with the highest question likelihood.

    ``n_orders`` candidates (default: the number of passages), all distinct; when
    ``include_given`` (the default) the given order is the first of them, so the
    selection can only keep or beat the retriever's order by the gauge, and the
    others are seeded random permutations (``seed``). With fewer than ``n_orders``
    possible orders (``n!``), every order is a candidate. Ties go to the earlier
    candidate, so to the given order. 0 or 1 passages: returned as they are, zero cost.

    Example:
        >>> r = likelihood_selection("Who wrote Hamlet?", docs, model, n_orders=4, seed=1)
        >>> r.order, r.cost.lm_calls
        ([2, 0, 1], 4)
    """
    check_question(question)
    check_template(template, query_aware)
    check_count(n_orders, "n_orders")
    rng = random.Random(check_seed(seed))
    items = check_passages(passages)
    n = len(items)
    if n < 2:
        return SelectionResult(
            passages=items, order=list(range(n)), scores=[], cost=Cost(), orders=[], best=None
        )
    k = n if n_orders is None else n_orders
    candidates = distinct_orders(n, k, rng, first=list(range(n)) if include_given else None)
    gauge = question_likelihood(
        question, items, scorer, orders=candidates, template=template, query_aware=query_aware
    )
    best = gauge.best
    assert best is not None
    order = candidates[best]
    return SelectionResult(
        passages=reordered(items, order),
        order=list(order),
        scores=gauge.scores,
        cost=gauge.cost,
        orders=candidates,
        best=best,
    )
