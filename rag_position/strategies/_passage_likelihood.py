"""Passage likelihood: the question's likelihood after each passage alone (beyond the papers).

ConvexScore finds the gold passage from how the question's likelihood moves as every
passage is rotated through every position of the full prompt: N full prompts for
one rotation set, more for more sets. Scoring each passage ALONE asks the same model
the direct question (which passage makes this question most likely?) in N prompts
of one passage each, about one full prompt's worth of tokens in all; how often each
finds the gold is in docs/measurements.md, "Measured: identifying the gold passage, by design
and cost" (``benchmarks/ordering.py designs``).
The idea is LongLLMLingua's coarse ranking (Jiang et al., 2024: the question's
perplexity conditioned on each document), here with the QA prompt the reader uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, TypeVar

from rag_position.cost import Cost
from rag_position.models.protocols import Scorer, Span, SpanScore
from rag_position.prompts import question_span, render_qa
from rag_position.strategies._base import (
    OrderingResult,
    check_passages,
    check_question,
    reordered,
    score_prompts,
    to_passages,
)
from rag_position.strategies._options import (
    LOOSE,
    PLACEMENT_DOC,
    PROFILE_DOC,
    REST_DOC,
    TEMPLATE_DOC,
    opt,
)
from rag_position.strategies._question_likelihood import check_template
from rag_position.strategies.profiles import Placement, ProfileLike, Rest, check_placement, place

T = TypeVar("T")


def passage_likelihood(
    question: str,
    passages: Sequence[T],
    scorer: Scorer,
    *,
    placement: Annotated[Placement, opt(PLACEMENT_DOC)] = "first",
    rest: Annotated[Rest | None, opt(REST_DOC)] = None,
    profile: Annotated[ProfileLike | None, opt(PROFILE_DOC), LOOSE] = None,
    template: Annotated[str | None, opt(TEMPLATE_DOC)] = None,
) -> OrderingResult[T]:
    """Rank passages by the question's mean log-likelihood after each one alone; place them.

    N prompts (the QA prompt, or ``template``, with one passage each), scored in ONE
    ``score_spans`` call; the scored span is the question, as in
    :func:`~rag_position.strategies.question_likelihood`. The top passage is the gold
    candidate (``details["gold"]``), placed ``"first"``, ``"last"``, or ``"profile"``
    (at the ``profile``'s best position). ``rest``: ``"keep"`` (default, for every
    placement: the other passages keep the order they came in) or ``"scores"`` (they
    follow their scores away from the top one; down the profile's ranking for
    ``"profile"``); docs/measurements.md compares the two ("Measured: identifying the gold
    passage, by design and cost").
    ``result.scores``: each passage's mean log-likelihood. Ties go to the earlier
    passage. 0 or 1 passages: returned as they are at zero cost.

    Example:
        >>> r = passage_likelihood("Who wrote Hamlet?", docs, model)  # N short prompts
        >>> r.order[0] == r.details["gold"], r.cost.lm_calls
        (True, 10)
    """
    check_question(question)
    check_template(template, False)
    prof = check_placement(placement, rest, profile)
    items = check_passages(passages)
    n = len(items)
    if n < 2:
        details: dict[str, Any] = {"gold": 0 if n else None}
        return OrderingResult(
            passages=items, order=list(range(n)), scores=[], cost=Cost(), details=details
        )
    span_scores, cost = score_alone(question, items, scorer, template)
    scores = [s.mean for s in span_scores]
    ranked = sorted(range(n), key=lambda d: (-scores[d], d))
    order = place(ranked, placement, rest or "keep", prof)
    return OrderingResult(
        passages=reordered(items, order),
        order=order,
        scores=scores,
        cost=cost,
        details={"gold": ranked[0]},
    )


def score_alone(
    question: str, items: Sequence[Any], scorer: Scorer, template: str | None = None
) -> tuple[list[SpanScore], Cost]:
    """The question's score after each passage alone (the QA prompt, or ``template``,
    with one passage), in ONE ``score_spans`` call, and what it cost."""
    prompts = [render_qa(question, [doc], template=template) for doc in to_passages(items)]
    spans: list[Span] = [question_span(p, question) for p in prompts]
    return score_prompts(scorer, prompts, spans)


__all__ = ["passage_likelihood"]
