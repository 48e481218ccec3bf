"""The likelihood gauge (Liu, Qi, He et al.): how likely the question is, given the passages.

The mean per-token log-likelihood of the question placed after the passages,
``LL(q | C)``, tracks answer accuracy: for the same question, the order with the
highest LL tends to answer best. One forward pass per order, no decoding; many
orders go to the scorer in one batched call.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

from rag_position.cost import Cost
from rag_position.models.protocols import Scorer, Span
from rag_position.prompts import fill_template, question_span, render_qa
from rag_position.strategies._base import (
    GaugeResult,
    check_passages,
    check_question,
    score_prompts,
    to_passages,
)


def question_likelihood(
    question: str,
    passages: Sequence[Any],
    scorer: Scorer,
    *,
    orders: Sequence[Sequence[int]] | None = None,
    template: str | None = None,
    query_aware: bool = False,
) -> GaugeResult:
    """Mean log-likelihood of ``question`` after ``passages``, for each of ``orders``.

    ``orders`` (default: the given order) are permutations of ``range(len(passages))``;
    every order's prompt is rendered with :func:`~rag_position.prompts.render_qa`
    (the published ``qa`` prompt, its query-aware variant, or ``template``, which
    needs ``{question}`` after ``{search_results}``) and all are scored in ONE
    ``score_spans`` call. The scored span is the question's last occurrence in the
    prompt (:func:`~rag_position.prompts.question_span`). No passages: an empty
    result at zero cost.

    Example:
        >>> g = question_likelihood("Who wrote Hamlet?", docs, model, orders=[[0, 1], [1, 0]])
        >>> g.scores, g.best, g.cost.lm_calls
        ([-2.31, -2.05], 1, 2)
    """
    check_question(question)
    check_template(template, query_aware)
    items = check_passages(passages)
    order_list = check_orders(orders, len(items))
    if not items:
        return GaugeResult(scores=[], orders=[], prompts=[], spans=[], span_scores=[], cost=Cost())
    docs = to_passages(items)
    prompts = [
        render_qa(question, [docs[i] for i in o], query_aware=query_aware, template=template)
        for o in order_list
    ]
    spans: list[Span] = [question_span(p, question) for p in prompts]
    span_scores, cost = score_prompts(scorer, prompts, spans)
    return GaugeResult(
        scores=[s.mean for s in span_scores],
        orders=order_list,
        prompts=prompts,
        spans=spans,
        span_scores=span_scores,
        cost=cost,
    )


def check_template(template: str | None, query_aware: bool) -> None:
    """A custom template needs both placeholders, the question after the passages."""
    if template is None:
        return
    if query_aware:
        raise ValueError("pass either a custom `template` or `query_aware=True`, not both")
    fill_template(template, question="", search_results="")  # names missing placeholders
    if template.rfind("{question}") < template.find("{search_results}"):
        raise ValueError(
            "the template puts {question} only before {search_results}; the gauge scores the "
            "question that follows the passages, so put {question} after them too"
        )


def check_orders(orders: Sequence[Sequence[int]] | None, n: int) -> list[list[int]]:
    """Each order must be a permutation of ``range(n)``; ``None`` is the given order."""
    if orders is None:
        return [list(range(n))] if n else []
    if isinstance(orders, (str, bytes)):
        raise TypeError("`orders` must be a sequence of index sequences")
    result: list[list[int]] = []
    for k, order in enumerate(orders):
        o = [operator.index(i) for i in order]
        if sorted(o) != list(range(n)):
            raise ValueError(
                f"`orders[{k}]` = {o} is not a permutation of range({n}) "
                "(each order lists every passage index exactly once)"
            )
        result.append(o)
    if n and not result:
        raise ValueError("`orders` is empty; pass at least one order or None for the given one")
    return result
