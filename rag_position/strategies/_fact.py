"""FACT: iterative context rewriting for multi-fact retrieval (Wang, Wang et al.).

Algorithm 1 of the paper: retrieve candidate facts, locate them in the context and
remove (or mask) them, and repeat until an iteration finds nothing new, so facts the
model skipped surface in later passes. Candidates the context does not hold are
hallucinations: counted in the trace, never kept as facts.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from rag_position.models.protocols import Embedder, Generator, Span
from rag_position.passages import Passage, check_text
from rag_position.prompts import (
    QA_TEMPLATE,
    fill_template,
    render_fact_needle,
    render_fact_retrieve,
)
from rag_position.strategies._align import (
    FUZZY_THRESHOLD,
    Meter,
    Rewritten,
    StrategyError,
    locate,
    normalize,
    parse_bullets,
    resolve_context,
    rewrite_facts,
    sentence_spans,
    similarity,
)
from rag_position.strategies._base import (
    AnswerResult,
    check_count,
    check_fraction,
    check_question,
    closest,
)
from rag_position.strategies._options import CORE_ONLY, As, opt

Retrieve = Callable[[str, str], Sequence[str]]
"""``retrieve(question, context) -> candidate facts``."""
Rewrite = Callable[[Sequence[str], str], Rewritten]
"""``rewrite(candidates, context) -> Rewritten``."""
Stop = Callable[[Sequence[str], str], bool]
"""``stop(facts so far, rewritten context) -> True`` to stop early."""

FACT_ANSWER_WITH_CONTEXT_TEMPLATE = fill_template(
    QA_TEMPLATE, search_results="{search_results}\n\nRelevant sentences:\n{facts}"
)
"""The QA prompt with the full context, then the collected facts as ``-`` bullets."""


@dataclass(frozen=True, kw_only=True)
class FactIteration:
    """One retrieve/rewrite pass. ``raw`` is the model's output (``None`` for a custom
    retrieve); ``new_facts`` the located texts not found before; ``duplicates`` the
    candidates matching facts already found (also when an earlier pass removed them);
    ``hallucinated`` the other candidates not in the context.

    Example::

        result = fact("Which cities are capitals?", docs, load_model("embedded"))
        for it in result.trace.iterations:
            it.candidates, it.new_facts, it.duplicates, it.hallucinated
    """

    raw: str | None
    candidates: list[str]
    spans: list[Span | None]
    new_facts: list[str]
    duplicates: int
    hallucinated: list[str]


@dataclass(frozen=True, kw_only=True)
class FactTrace:
    """Every pass, why the loop stopped (``"nothing_new"``, ``"max_iterations"``,
    ``"stop"``, ``"context_exhausted"``; ``""`` when it did not finish), the answer
    prompt (``None`` when not answering) and whether it used the full context because
    no fact was found.

    Example::

        trace = fact("Which cities are capitals?", docs, load_model("embedded")).trace
        len(trace.iterations), trace.stopped_because, trace.hallucinations
        trace.answer_prompt, trace.fell_back
    """

    iterations: list[FactIteration]
    stopped_because: str = ""
    answer_prompt: str | None = None
    fell_back: bool = False

    @property
    def hallucinations(self) -> int:
        return sum(len(it.hallucinated) for it in self.iterations)


@dataclass(frozen=True, kw_only=True)
class FactResult(AnswerResult):
    """``facts`` in their order in the original context; ``answer`` is ``""`` when
    ``answer=False`` was asked.

    Example::

        result = fact("Which cities are capitals?", docs, load_model("embedded"))
        result.answer, result.facts, result.trace.stopped_because, result.cost.lm_calls
    """

    facts: list[str]
    trace: FactTrace


def fact(
    question: str,
    passages_or_context: str | Sequence[Passage | str | Mapping[str, Any]],
    generator: Generator,
    *,
    max_iterations: Annotated[int, opt("At most this many passes.", ge=1)] = 3,
    retrieve: Annotated[Retrieve | None, CORE_ONLY] = None,
    rewrite: Annotated[
        Literal["remove", "mask"] | Rewrite,
        opt("Cut found facts out, or mask them."),
        As(Literal["remove", "mask"]),
    ] = "remove",
    stop: Annotated[Stop | None, CORE_ONLY] = None,
    answer: Annotated[bool, opt("Generate the answer from the facts.")] = True,
    with_context: Annotated[bool, opt("Answer from the context and facts.")] = False,
    threshold: Annotated[
        float, opt("Fuzzy-match ratio to locate a fact.", gt=0.0, le=1.0)
    ] = FUZZY_THRESHOLD,
    max_new_tokens: Annotated[int, opt("Tokens per retrieval pass.", ge=1)] = 256,
    answer_max_new_tokens: Annotated[int, opt("Tokens for the answer.", ge=1)] = 64,
) -> FactResult:
    """Collect the facts relevant to ``question`` in up to ``max_iterations`` passes.

    ``retrieve`` defaults to the published retrieval prompt on ``generator``, parsed
    from its ``-`` bullets (:func:`parse_bullets`); :func:`embedding_retrieve` is the
    vector-search alternative, :func:`needle_retrieve` the needle-task one.
    ``rewrite="remove"`` cuts each located fact out of the context, ``"mask"``
    overwrites it with filler of the same length; a callable replaces both. The loop
    stops when a pass finds nothing new, when ``stop`` says so, or after
    ``max_iterations``. The answer is one generation from the facts in
    their original order (plus the full context if ``with_context``); with no fact
    found it uses the full context (``trace.fell_back``). A failed model call raises
    :class:`StrategyError` with the trace so far.

    Example::

        model = load_model("embedded")
        docs = ["Paris is the capital of France.", "Rome is the capital of Italy."]
        result = fact("Which cities are capitals?", docs, model, max_iterations=2)
        result.answer          # one generation from the collected facts
        result.facts           # the located facts, in context order
        result.trace.stopped_because, result.trace.hallucinations, result.cost.lm_calls
    """
    check_question(question)
    check_fraction(threshold, "threshold")
    check_count(max_iterations, "max_iterations")
    original, _ = resolve_context(passages_or_context)
    check_text(original, "the context")
    meter = Meter(generator)
    if callable(rewrite):
        rewriter: Rewrite = rewrite
    elif rewrite in ("remove", "mask"):
        mask = rewrite == "mask"
        rewriter = lambda cands, ctx: rewrite_facts(cands, ctx, mask=mask, threshold=threshold)  # noqa: E731
    else:
        raise ValueError(f"`rewrite` must be 'remove', 'mask' or a callable, got {rewrite!r}")
    iterations: list[FactIteration] = []
    facts: list[str] = []
    seen: set[str] = set()
    context, stopped = original, "max_iterations"
    try:
        for _ in range(max_iterations):
            if not any(ch.isalnum() for ch in context):
                stopped = "context_exhausted"
                break
            raw: str | None = None
            if retrieve is None:
                prompt = render_fact_retrieve(question, context)
                raw = meter.generate([prompt], max_new_tokens=max_new_tokens)[0]
                candidates = parse_bullets(raw)
            else:
                candidates = [str(c) for c in meter.run(retrieve, question, context)]
            step = meter.run(rewriter, candidates, context)
            iterations.append(_classify(raw, candidates, step, context, seen, threshold))
            new = iterations[-1].new_facts
            facts.extend(new)
            context = step.context
            if not new:
                stopped = "nothing_new"
                break
            if stop is not None and meter.run(stop, list(facts), context):
                stopped = "stop"
                break
        facts = _in_original_order(facts, original, threshold)
        answer_text, answer_prompt, fell_back = "", None, False
        if answer:
            fell_back = not facts
            answer_prompt = _answer_prompt(question, original, facts, with_context)
            answer_text = meter.generate([answer_prompt], max_new_tokens=answer_max_new_tokens)[0]
    except Exception as exc:
        partial = FactTrace(iterations=iterations)
        raise StrategyError(
            f"FACT failed after {len(iterations)} pass(es): {exc}", trace=partial
        ) from exc
    trace = FactTrace(
        iterations=iterations,
        stopped_because=stopped,
        answer_prompt=answer_prompt,
        fell_back=fell_back,
    )
    return FactResult(answer=answer_text.strip(), facts=facts, trace=trace, cost=meter.cost())


def embedding_retrieve(
    embedder: Embedder,
    top_k: Annotated[int, opt("Sentences per pass with embeddings.", ge=1)] = 3,
) -> Retrieve:
    """A vector-search ``retrieve``: the ``top_k`` sentences of the context closest to the
    question by cosine similarity (``embedder`` rows are unit vectors), best first.

    Example::

        retrieve = embedding_retrieve(load_embedder("embedded"), top_k=2)
        retrieve("Who wrote Hamlet?", context)  # the 2 closest sentences of context
        result = fact("Who wrote Hamlet?", context, load_model("embedded"), retrieve=retrieve)
        result.facts, result.answer
    """
    check_count(top_k, "top_k")

    def retrieve(question: str, context: str) -> list[str]:
        sentences = [context[a:b] for a, b in sentence_spans(context)]
        if not sentences:
            return []
        return [sentences[i] for i in closest(embedder, question, sentences)[:top_k]]

    return retrieve


def needle_retrieve(
    generator: Generator, query: str, *, max_new_tokens: int = 64, template: str | None = None
) -> Retrieve:
    """FACT's ``retrieve`` for RULER-style needle tasks: the published needle prompt
    (:func:`~rag_position.prompts.render_fact_needle`) on ``generator``, each distinct
    number of the reply a candidate (located on word boundaries, it grows to its
    sentence). Its calls count in the cost when the generator keeps ``usage``.

    Example::

        model = load_model("embedded")
        question = "What are all the special magic numbers for apple?"
        retrieve = needle_retrieve(model, "apple", max_new_tokens=64)  # "apple": the key
        result = fact(question, haystack, model, retrieve=retrieve, answer=False)
        result.facts, result.trace.iterations[0].candidates  # found sentences, numbers asked
    """

    def retrieve(question: str, context: str) -> list[str]:
        prompt = render_fact_needle(context, query, template=template)
        reply = generator.generate([prompt], max_new_tokens=max_new_tokens)[0]
        return list(dict.fromkeys(re.findall(r"\d+", reply)))

    return retrieve


def _in_original_order(facts: list[str], original: str, threshold: float) -> list[str]:
    """Facts sorted by where they are in the original context (unlocatable ones last)."""

    def position(text: str) -> float:
        span = locate(text, original, threshold=threshold)
        return math.inf if span is None else span[0]

    return sorted(facts, key=position)


def _answer_prompt(question: str, context: str, facts: list[str], with_context: bool) -> str:
    bullets = "\n".join(f"- {f}" for f in facts)
    if not facts:
        return fill_template(QA_TEMPLATE, question=question, search_results=context)
    if with_context:
        return fill_template(
            FACT_ANSWER_WITH_CONTEXT_TEMPLATE,
            question=question,
            search_results=context,
            facts=bullets,
        )
    return fill_template(QA_TEMPLATE, question=question, search_results=bullets)


def _classify(
    raw: str | None,
    candidates: list[str],
    step: Rewritten,
    context: str,
    seen: set[str],
    threshold: float,
) -> FactIteration:
    """Sort one pass's candidates into new facts, duplicates and hallucinations."""
    if len(step.spans) != len(candidates):
        raise ValueError(
            f"`rewrite` returned {len(step.spans)} spans for {len(candidates)} candidates"
        )
    new, dupes, made_up = [], 0, []
    for cand, span in zip(candidates, step.spans, strict=True):
        if span is None:  # not in the context: a fact found before, or made up
            nc = normalize(cand)
            if any(nc in k or similarity(nc, k) >= threshold for k in seen):
                dupes += 1
            else:
                made_up.append(cand)
            continue
        key = normalize(context[span[0] : span[1]])
        if key in seen:
            dupes += 1
            continue
        seen.add(key)
        new.append(context[span[0] : span[1]].strip())
    return FactIteration(
        raw=raw,
        candidates=candidates,
        spans=step.spans,
        new_facts=new,
        duplicates=dupes,
        hallucinated=made_up,
    )
