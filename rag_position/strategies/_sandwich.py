"""The query sandwich ("Lost in the Middle", Liu et al., TACL 2024: query-aware contextualization).

The question goes both before and after the passages, so a decoder-only model
reads the passages already knowing what to look for. The order is not changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from rag_position.cost import Cost
from rag_position.prompts import QA_INSTRUCTION, render_qa
from rag_position.strategies._base import OrderingResult, check_passages, check_question

T = TypeVar("T")

CHAT_SANDWICH_TEMPLATE = (
    QA_INSTRUCTION + "\n\nQuestion: {question}\n\n{search_results}\n\nQuestion: {question}"
)
"""The user turn for chat models: the published query-aware prompt without its
trailing ``\\nAnswer:`` completion cue (the assistant turn answers)::

    Write a high-quality answer for the given question using only the provided search results
    (some of which might be irrelevant).        <- one line in the prompt

    Question: {question}

    Document [1](Title: {title}) {text}
    ...

    Question: {question}
"""


def sandwich_prompt(
    question: str,
    passages: Sequence[Any],
    *,
    chat: bool = False,
    template: str | None = None,
) -> str:
    """The query-aware prompt for ``passages`` in the given order.

    ``chat=False``: the published ``qa_with_query_aware_contextualization`` prompt,
    byte for byte (ending ``Question: ...\\nAnswer:``). ``chat=True``: the same text
    without the ``\\nAnswer:`` cue, to send as the user turn
    (:data:`CHAT_SANDWICH_TEMPLATE`). ``template`` replaces either; it needs
    ``{question}`` and ``{search_results}``. No passages: ``ValueError``.

    Example:
        >>> prompt = sandwich_prompt("Who wrote Hamlet?", ["Hamlet is a play by Shakespeare."])
        >>> prompt.count("Question: Who wrote Hamlet?"), prompt.endswith("\\nAnswer:")
        (2, True)
        >>> sandwich_prompt("Who wrote Hamlet?", ["Hamlet ..."], chat=True).endswith("Answer:")
        False
    """
    check_question(question)
    if template is not None and chat:
        raise ValueError("pass either a custom `template` or `chat=True`, not both")
    if template is None and chat:
        template = CHAT_SANDWICH_TEMPLATE
    if template is None:
        return render_qa(question, passages, query_aware=True)
    return render_qa(question, passages, template=template)


def sandwich(
    question: str,
    passages: Sequence[T],
    *,
    chat: bool = False,
    template: str | None = None,
) -> OrderingResult[T]:
    """The sandwich as a strategy: the order unchanged, ``prompt`` the sandwich prompt.

    No passages: an empty result with ``prompt=None``. Zero cost.

    Example:
        >>> result = sandwich("Who wrote Hamlet?", ["doc a", "doc b"])
        >>> result.order, result.prompt.count("Who wrote Hamlet?"), result.cost.lm_calls
        ([0, 1], 2, 0)
    """
    check_question(question)
    items = check_passages(passages)
    prompt = sandwich_prompt(question, items, chat=chat, template=template) if items else None
    return OrderingResult(
        passages=items, order=list(range(len(items))), scores=[], cost=Cost(), prompt=prompt
    )
