"""Recite-then-solve (Du, Tian et al., "Context length alone hurts LLM performance").

Step 1 asks the model to copy the relevant evidence verbatim from the long input;
step 2 answers from a new, short prompt holding only that evidence. Ours: every
recited block is aligned to the source and replaced by the exact source text, or
dropped when it matches nothing, and nothing usable falls back to the full context.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Annotated, Any, Literal

from rag_position.models.protocols import Generator, Span
from rag_position.passages import Passage, check_text
from rag_position.prompts import QA_TEMPLATE, fill_template, render_qa, render_recite
from rag_position.strategies._align import (
    Meter,
    StrategyError,
    locate,
    normalize,
    parse_bullets,
    resolve_context,
    similarity,
)
from rag_position.strategies._base import AnswerResult, check_fraction, check_question
from rag_position.strategies._options import opt

RECITE_TEXT_TEMPLATE = (
    "Read the question based on the given text. Choose the sentences most relevant to the "
    "question and copy them fully WORD BY WORD.\n"
    "\n"
    "The following is the given text.\n"
    "\n"
    "{context}\n"
    "\n"
    "Read the question. Choose the sentences most relevant to the question and copy them "
    "fully WORD BY WORD. Only give me the relevant sentences and do not output any other "
    "words. Do not make up sentences. Do not repeat sentences. "
    'Start each sentence on a new line with "- ".\n'
    "\n"
    "Question:\n"
    "{question}"
)
"""Step 1 for a context that is not numbered documents (ours, after the published prompt)."""

RECITE_THRESHOLD = 0.7
"""Default score a recited block needs to be grounded in a source passage."""

Status = Literal["kept", "replaced", "dropped", "repeated"]
Outcome = Literal["recited", "fell_back", "no_evidence", "unfinished"]

_BLOCK_HEADER = re.compile(
    r"^[ \t]*(?:#+[ \t]*)?Document[ \t]*\[?(\d+)\]?[ \t]*:?[ \t]*(?:\(Title:[^)\n]*\))?[ \t]*",
    re.IGNORECASE | re.MULTILINE,
)


@dataclass(frozen=True, kw_only=True)
class RecitedBlock:
    """One recited block and what grounding made of it: ``kept`` (exact copy),
    ``replaced`` (by the source text), ``dropped`` (matches nothing) or ``repeated``
    (a source already recited). ``source`` is the passage index (passages given) and
    ``span`` the character span in the context (plain-string context).

    Example::

        result = recite_then_solve(question, docs, load_model("embedded"))
        for block in result.trace.blocks:
            block.number, block.status, block.source, block.score
    """

    number: int | None
    text: str
    status: Status
    source: int | None
    span: Span | None
    score: float


@dataclass(frozen=True, kw_only=True)
class ReciteTrace:
    """Both prompts, the raw recitation and each block's grounding. ``outcome``:
    ``"recited"`` (answered from the grounded evidence), ``"fell_back"`` (nothing usable,
    answered from the full context), ``"no_evidence"`` (nothing usable, no answer made)
    or ``"unfinished"`` (a model call failed). ``answer_prompt`` is ``None`` when no
    answer was generated.

    Example::

        trace = recite_then_solve(question, docs, load_model("embedded")).trace
        trace.outcome, trace.raw, trace.exact_rate, trace.fell_back, trace.answer_prompt
    """

    recite_prompt: str
    raw: str | None
    blocks: list[RecitedBlock]
    outcome: Outcome = "unfinished"
    answer_prompt: str | None = None

    @property
    def fell_back(self) -> bool:
        return self.outcome == "fell_back"

    @property
    def exact_rate(self) -> float | None:
        """Share of the recited blocks copied exactly (``None`` when nothing was recited)."""
        return (
            sum(b.status == "kept" for b in self.blocks) / len(self.blocks) if self.blocks else None
        )


@dataclass(frozen=True, kw_only=True)
class ReciteResult(AnswerResult):
    """``recited``: the grounded evidence (exact source text) in context order.

    Example::

        result = recite_then_solve(question, docs, load_model("embedded"))
        result.answer, [p.text for p in result.recited], result.trace.outcome, result.cost
    """

    recited: list[Passage]
    trace: ReciteTrace


def recite_then_solve(
    question: str,
    passages_or_context: str | Sequence[Passage | str | Mapping[str, Any]],
    generator: Generator,
    *,
    fallback: Annotated[
        Literal["context", "none"],
        opt("Nothing usable recited: answer from the full context, or not at all."),
    ] = "context",
    threshold: Annotated[
        float, opt("Similarity a recited block needs to ground.", gt=0.0, le=1.0)
    ] = RECITE_THRESHOLD,
    max_new_tokens: Annotated[int, opt("Tokens for the recitation.", ge=1)] = 256,
    answer_max_new_tokens: Annotated[int, opt("Tokens for the answer.", ge=1)] = 64,
) -> ReciteResult:
    """Recite the relevant evidence, ground it in the source, answer from it alone.

    Passages: step 1 is the published prompt; the ``# Document <n>`` blocks are aligned
    to the passages and step 2 is the QA prompt with the recited passages. A plain
    string: :data:`RECITE_TEXT_TEMPLATE`, one recited sentence a line, each located in
    the context. Nothing usable recited: ``fallback="context"`` answers from the full
    context (``trace.fell_back``), ``"none"`` returns ``answer=""`` after one call. A
    failed model call raises :class:`StrategyError` with the trace so far.

    Example::

        model = load_model("embedded")
        docs = ["Paris is the capital of France.", "Rome is the capital of Italy."]
        result = recite_then_solve("What is the capital of France?", docs, model)
        result.answer, result.recited         # the answer, the grounded evidence passages
        result.trace.outcome, result.trace.exact_rate, result.cost.lm_calls
    """
    check_question(question)
    check_fraction(threshold, "threshold")
    if fallback not in ("context", "none"):
        raise ValueError(f"`fallback` must be 'context' or 'none', got {fallback!r}")
    context, docs = resolve_context(passages_or_context)
    check_text(context, "the context")
    meter = Meter(generator)
    template = None if docs is not None else RECITE_TEXT_TEMPLATE
    prompt = render_recite(question, context, template=template)
    raw: str | None = None
    blocks: list[RecitedBlock] = []
    try:
        raw = meter.generate([prompt], max_new_tokens=max_new_tokens)[0]
        if docs is not None:
            blocks = ground_blocks(raw, docs, threshold=threshold)
            used = sorted({b.source for b in blocks if b.source is not None and _usable(b)})
            recited = [docs[i] for i in used]
        else:
            blocks = _ground_sentences(raw, context, threshold)
            spans = sorted({b.span for b in blocks if b.span is not None and _usable(b)})
            recited = [Passage(text=context[a:b]) for a, b in spans]
        outcome: Outcome = "recited"
        answer, answer_prompt = "", None
        if recited:
            answer_prompt = (
                render_qa(question, recited)
                if docs is not None
                else fill_template(
                    QA_TEMPLATE,
                    question=question,
                    search_results="\n".join(p.text for p in recited),
                )
            )
        elif fallback == "context":
            outcome = "fell_back"
            answer_prompt = fill_template(QA_TEMPLATE, question=question, search_results=context)
        else:
            outcome = "no_evidence"
        if answer_prompt is not None:
            answer = meter.generate([answer_prompt], max_new_tokens=answer_max_new_tokens)[0]
    except Exception as exc:
        partial = ReciteTrace(recite_prompt=prompt, raw=raw, blocks=blocks)
        raise StrategyError(f"recite-then-solve failed: {exc}", trace=partial) from exc
    trace = ReciteTrace(
        recite_prompt=prompt, raw=raw, blocks=blocks, outcome=outcome, answer_prompt=answer_prompt
    )
    return ReciteResult(answer=answer.strip(), recited=recited, trace=trace, cost=meter.cost())


def parse_blocks(text: str) -> list[tuple[int | None, str]]:
    """``(number, content)`` of each ``# Document <n>`` block (also ``Document [n](Title: t)``).

    Text before the first header (all of it when there is no header) gives one block
    (number ``None``) per paragraph; a ``(Title: t)`` copied after a header is not content.
    """
    headers = list(_BLOCK_HEADER.finditer(text))
    blocks: list[tuple[int | None, str]] = []
    lead = text[: headers[0].start()] if headers else text
    blocks.extend((None, part.strip()) for part in re.split(r"\n[ \t]*\n", lead) if part.strip())
    for i, m in enumerate(headers):
        end = headers[i + 1].start() if i + 1 < len(headers) else len(text)
        blocks.append((int(m.group(1)), text[m.end() : end].strip()))
    return blocks


def ground_blocks(
    text: str, passages: Sequence[Passage], *, threshold: float = RECITE_THRESHOLD
) -> list[RecitedBlock]:
    """Align each block of ``text`` (:func:`parse_blocks`) to its best source passage.

    The score is the ``difflib`` ratio, or, for a block that copies at least a third of a
    passage, the share of the block found in the passage in order. Ties go to the
    number the model wrote, then to the first passage.
    """
    out: list[RecitedBlock] = []
    used: set[int] = set()
    for number, content in parse_blocks(text):
        best, best_score = None, 0.0
        for j, p in enumerate(passages):
            score = _score(content, p.text)
            prefer = number is not None and j == number - 1
            if score > best_score or (score == best_score and prefer and score > 0):
                best, best_score = j, score
        status: Status
        if best is None or best_score < threshold:
            status, best = "dropped", None
        elif best in used:
            status = "repeated"
        else:
            used.add(best)
            exact = normalize(content) == normalize(passages[best].text)
            status = "kept" if exact else "replaced"
        out.append(
            RecitedBlock(
                number=number, text=content, status=status, source=best, span=None, score=best_score
            )
        )
    return out


def _ground_sentences(text: str, context: str, threshold: float) -> list[RecitedBlock]:
    out: list[RecitedBlock] = []
    used: set[Span] = set()
    for item in parse_bullets(text):
        span = locate(item, context, threshold=threshold)
        status: Status
        if span is None:
            status, score = "dropped", 0.0
        else:
            score = similarity(item, context[span[0] : span[1]])
            status = "repeated" if span in used else ("kept" if score == 1.0 else "replaced")
            used.add(span)
        out.append(
            RecitedBlock(number=None, text=item, status=status, source=None, span=span, score=score)
        )
    return out


def _usable(block: RecitedBlock) -> bool:
    return block.status in ("kept", "replaced")


def _score(block: str, source: str) -> float:
    nb, ns = normalize(block), normalize(source)
    if not nb or not ns:
        return 0.0
    ratio = similarity(nb, ns)
    if len(nb) * 3 < len(ns):
        return ratio
    blocks = SequenceMatcher(None, nb, ns, autojunk=False).get_matching_blocks()
    matched = sum(m.size for m in blocks if m.size >= 4)  # runs, not scattered letters
    return max(ratio, matched / len(nb)) if len(nb) <= len(ns) else ratio
