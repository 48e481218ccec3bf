"""Medoid voting over passage orders (Dsouza et al., SWiM, Snorkel).

Answer the question once per seeded permutation of the passages, embed the answers,
and return the medoid: the answer with the largest summed cosine similarity to the
others. Answers saying the context lacks the information are dropped first, when
any other answer remains, so "not found" cannot win by agreeing with itself.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import numpy as np

from rag_position.models.protocols import Embedder, Generator
from rag_position.passages import Passage, as_passages
from rag_position.prompts import render_qa
from rag_position.strategies._align import Meter, StrategyError
from rag_position.strategies._base import (
    AnswerResult,
    check_count,
    check_question,
    check_seed,
    distinct_orders,
)
from rag_position.strategies._options import CORE_ONLY, opt

DEFAULT_ABSENCE_PHRASES: tuple[str, ...] = (
    "no information",
    "not enough information",
    "not mentioned",
    "not provided",
    "not found in",
    "not in the context",
    "not in the provided",
    "does not contain",
    "doesn't contain",
    "does not mention",
    "doesn't mention",
    "does not say",
    "cannot be determined",
    "can't be determined",
    "cannot answer",
    "can't answer",
    "unable to answer",
    "i don't know",
    "i do not know",
)
"""Lower-case phrases marking an answer as "the context lacks the information"."""

TIE_TOLERANCE = 1e-6
"""Summed similarities this close count as a tie (broken by the lowest index)."""


@dataclass(frozen=True, kw_only=True)
class MedoidTrace:
    """The prompts, the answers judged absent, the answers that took part in the vote
    (``voters``) and the index of the winner (``-1`` when unfinished).

    Example::

        trace = medoid_vote(question, docs, load_model("embedded"), load_embedder()).trace
        trace.chosen, trace.voters, trace.absent, len(trace.prompts)
    """

    prompts: list[str]
    absent: list[int]
    voters: list[int]
    chosen: int = -1


@dataclass(frozen=True, kw_only=True)
class MedoidResult(AnswerResult):
    """``answers[i]`` was generated from ``orders[i]``; ``similarities[i]`` is its summed
    cosine similarity to the other voters (``None`` for an answer that did not vote).

    Example::

        result = medoid_vote(question, docs, load_model("embedded"), load_embedder(), n_orders=3)
        result.answer, result.answers, result.orders, result.similarities, result.cost.lm_calls
    """

    answers: list[str]
    orders: list[list[int]]
    similarities: list[float | None]
    trace: MedoidTrace


def medoid_vote(
    question: str,
    passages: Sequence[Passage | str | Mapping[str, Any]],
    generator: Generator,
    embedder: Embedder,
    *,
    n_orders: Annotated[int, opt("Orders, hence answers.", ge=1)] = 3,
    seed: Annotated[int, opt("Seed of the permutations.")] = 0,
    temperature: Annotated[float, opt("Sampling temperature.", ge=0.0)] = 0.0,
    permute: Annotated[bool, CORE_ONLY] = True,
    absence_phrases: Annotated[
        Sequence[str], opt("Lower-case phrases marking an answer as 'the context lacks it'.")
    ] = DEFAULT_ABSENCE_PHRASES,
    max_new_tokens: Annotated[int, opt("Tokens per answer.", ge=1)] = 64,
) -> MedoidResult:
    """The medoid of ``n_orders`` answers, one per order of ``passages``, in one batched call.

    The first order is the given one (so ``n_orders=1`` is a plain single run); the
    others are distinct permutations drawn with ``seed`` (repeated in turn when
    ``n_orders`` exceeds ``n!``; with ``temperature > 0`` such repeats still give
    different samples). Ties go to the lowest index. ``permute=False`` keeps the given
    order for all ``n_orders`` runs: the paper's control, which only resamples (it needs
    ``temperature > 0`` when ``n_orders > 1``; each sample is its own call, seeded
    ``seed + i``). A failed model call raises :class:`StrategyError` with the trace so far.

    Example::

        model, embedder = load_model("embedded"), load_embedder("embedded")
        docs = ["Paris is the capital of France.", "Rome is the capital of Italy."]
        result = medoid_vote("What is the capital of France?", docs, model, embedder, n_orders=3)
        result.answer                              # the medoid of the 3 answers
        result.answers[result.trace.chosen] == result.answer, result.cost.lm_calls
    """
    check_question(question)
    check_count(n_orders, "n_orders")
    seed = check_seed(seed)
    if isinstance(passages, (str, bytes, Mapping)):
        raise TypeError("`passages` must be a sequence of passages (medoid voting permutes them)")
    docs = as_passages(passages)
    if not docs or not any(p.text.strip() for p in docs):
        raise ValueError("no passages with text were given: there is nothing to answer from")
    phrases = [p.lower() for p in absence_phrases]
    if not permute and n_orders > 1 and temperature <= 0:
        raise ValueError(
            "permute=False with temperature 0 gives n_orders identical greedy answers: "
            "resampling at a fixed order needs temperature > 0"
        )
    if permute:
        first = list(range(len(docs)))
        distinct = distinct_orders(len(docs), n_orders, random.Random(seed), first=first)
    else:
        distinct = [list(range(len(docs)))]
    orders = [list(distinct[i % len(distinct)]) for i in range(n_orders)]
    prompts = [render_qa(question, [docs[i] for i in order]) for order in orders]
    meter = Meter(generator)
    try:
        if permute:
            raw = meter.generate(
                prompts, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed
            )
        else:  # one call per sample, each with its own seed: a server seeds per request,
            # so one batch of identical prompts would come back as identical samples
            raw = [
                meter.generate(
                    [prompt], max_new_tokens=max_new_tokens, temperature=temperature, seed=seed + i
                )[0]
                for i, prompt in enumerate(prompts)
            ]
        answers = [a.strip() for a in raw]
        absent = [i for i, a in enumerate(answers) if is_absent(a, phrases)]
        voters = [i for i in range(n_orders) if i not in absent] or list(range(n_orders))
        sums = _summed_similarities([answers[i] for i in voters], embedder)
    except Exception as exc:
        partial = MedoidTrace(prompts=prompts, absent=[], voters=[])
        raise StrategyError(f"medoid voting failed: {exc}", trace=partial) from exc
    top = max(sums)
    best = next(j for j, s in enumerate(sums) if s >= top - TIE_TOLERANCE)
    chosen = voters[best]
    similarities: list[float | None] = [None] * n_orders
    for j, i in enumerate(voters):
        similarities[i] = sums[j]
    trace = MedoidTrace(prompts=prompts, absent=absent, voters=voters, chosen=chosen)
    return MedoidResult(
        answer=answers[chosen],
        answers=answers,
        orders=orders,
        similarities=similarities,
        trace=trace,
        cost=meter.cost(),
    )


def is_absent(answer: str, phrases: Sequence[str] = DEFAULT_ABSENCE_PHRASES) -> bool:
    """Whether ``answer`` says the context lacks the information (a phrase occurs in it,
    case-insensitively)."""
    text = " ".join(answer.lower().replace("\u2019", "'").split())
    return any(p.lower() in text for p in phrases)


def _summed_similarities(answers: list[str], embedder: Embedder) -> list[float]:
    """Each answer's summed cosine similarity to the others (no embedding for one answer)."""
    if len(answers) == 1:
        return [0.0]
    vectors = np.asarray(embedder.embed(answers), dtype=np.float64)
    if vectors.shape[0] != len(answers):
        raise ValueError(f"the embedder returned {vectors.shape[0]} rows for {len(answers)} texts")
    sims = vectors @ vectors.T
    sums = sims.sum(axis=1) - np.diag(sims)
    return [float(s) if math.isfinite(s) else -math.inf for s in sums]
