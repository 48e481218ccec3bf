"""FACT, recite-then-solve and medoid voting end to end on the embedded model (float32).

Tiny inputs and few new tokens: about 8 short generations in all. The 135M model's
output is not judged (it paraphrases rather than copies, so FACT and recitation often
find nothing grounded), only the structure of what each strategy returns.
"""

from __future__ import annotations

from typing import Any

import pytest

from rag_position.passages import Passage
from rag_position.prompts import format_documents
from rag_position.strategies._fact import embedding_retrieve, fact
from rag_position.strategies._medoid_vote import medoid_vote
from rag_position.strategies._recite_then_solve import recite_then_solve

pytestmark = pytest.mark.slow

QUESTION = "What is the capital of France?"
DOCS = [
    Passage("Berlin is the capital of Germany.", title="Berlin"),
    Passage("Paris is the capital of France.", title="Paris"),
    Passage("The Nile is a river in Africa.", title="Nile"),
]


def test_fact_end_to_end(embedded_fp32: Any) -> None:
    result = fact(
        QUESTION, DOCS, embedded_fp32, max_iterations=2, max_new_tokens=16, answer_max_new_tokens=4
    )
    trace = result.trace
    assert isinstance(result.answer, str)
    assert 1 <= len(trace.iterations) <= 2
    assert trace.stopped_because in ("nothing_new", "max_iterations", "context_exhausted")
    assert all(isinstance(it.raw, str) for it in trace.iterations)
    assert sorted(result.facts) == sorted(f for it in trace.iterations for f in it.new_facts)
    assert all(
        f in format_documents(DOCS) for f in result.facts
    )  # facts are source text, never invented
    assert trace.hallucinations == sum(len(it.hallucinated) for it in trace.iterations)
    assert result.cost.lm_calls == len(trace.iterations) + 1


def test_fact_embedding_retrieve_end_to_end(embedded_fp32: Any, embedder: Any) -> None:
    result = fact(
        QUESTION,
        DOCS,
        embedded_fp32,
        retrieve=embedding_retrieve(embedder, top_k=1),
        max_iterations=2,
        answer_max_new_tokens=4,
    )
    assert result.trace.iterations[0].new_facts == ["Paris is the capital of France."]
    assert len(result.facts) == 2 and result.trace.stopped_because == "max_iterations"
    assert isinstance(result.answer, str) and result.cost.lm_calls == 1


def test_recite_end_to_end(embedded_fp32: Any) -> None:
    result = recite_then_solve(
        QUESTION, DOCS, embedded_fp32, max_new_tokens=16, answer_max_new_tokens=4
    )
    trace = result.trace
    assert isinstance(result.answer, str) and isinstance(trace.raw, str)
    assert trace.outcome in ("recited", "fell_back")
    assert trace.fell_back == (result.recited == [])
    assert all(p in DOCS for p in result.recited)  # exact source passages only
    usable = {b.source for b in trace.blocks if b.status in ("kept", "replaced")}
    assert len(usable) == len(result.recited)
    assert result.cost.lm_calls == 2


def test_medoid_end_to_end(embedded_fp32: Any, embedder: Any) -> None:
    result = medoid_vote(QUESTION, DOCS, embedded_fp32, embedder, n_orders=3, max_new_tokens=4)
    assert isinstance(result.answer, str) and result.answer in result.answers
    assert len(result.answers) == len(result.orders) == len(result.similarities) == 3
    assert result.orders[0] == [0, 1, 2]
    assert result.answer == result.answers[result.trace.chosen]
    assert result.cost.lm_calls == 3
