"""Every strategy end to end on the embedded model (float32), on tiny inputs: about 15
short prompts and 8 short generations (one prompt is about 0.7 s on a quiet 2-core CPU).
The generation strategies' output is not judged (the 135M model paraphrases rather than
copies, so FACT and recitation often find nothing grounded), only its structure."""

from __future__ import annotations

import math
from typing import Any

import pytest

from rag_position.passages import Passage
from rag_position.prompts import format_documents, question_span, render_qa
from rag_position.strategies import (
    STRATEGIES,
    ConvexScoreResult,
    PositionProfile,
    convex_score,
    edge_reorder,
    estimate_profile,
    likelihood_selection,
    profile_reorder,
    question_likelihood,
    sandwich_prompt,
)
from rag_position.strategies._fact import embedding_retrieve, fact
from rag_position.strategies._medoid_vote import medoid_vote
from rag_position.strategies._recite_then_solve import recite_then_solve

pytestmark = pytest.mark.slow

QUESTION = "What is the capital of France?"
DOCS: list[Any] = [
    Passage("Berlin is the capital of Germany.", title="Berlin", metadata={"isgold": False}),
    {"title": "Paris", "text": "Paris is the capital of France.", "isgold": True},
    "The Nile is a river in Africa.",
    Passage("Mount Everest is the highest mountain.", title="Everest"),
]
PLAIN = [
    Passage("Berlin is the capital of Germany.", title="Berlin"),
    Passage("Paris is the capital of France.", title="Paris"),
    Passage("The Nile is a river in Africa.", title="Nile"),
]


def _is_permutation(result: Any, docs: list[Any]) -> None:
    assert sorted(result.order) == list(range(len(docs)))
    assert all(result.passages[k] is docs[i] for k, i in enumerate(result.order))


def test_gauge_equals_a_direct_score_spans_call(embedded_fp32: Any) -> None:
    model = embedded_fp32
    orders = [[0, 1, 2], [2, 1, 0]]
    before = model.usage
    g = question_likelihood(QUESTION, DOCS[:3], model, orders=orders)
    assert g.cost.lm_calls == 2 == (model.usage - before).lm_calls
    assert g.cost.prompt_tokens > 0 and g.cost.seconds > 0
    prompt = render_qa(QUESTION, [DOCS[i] for i in orders[1]])
    direct = model.score_spans([prompt], [question_span(prompt, QUESTION)])[0]
    assert g.prompts[1] == prompt
    assert g.span_scores[1].n_tokens == direct.n_tokens
    assert g.scores[1] == pytest.approx(direct.mean, abs=1e-5)
    assert all(math.isfinite(s) and s < 0 for s in g.scores)


def test_likelihood_selection(embedded_fp32: Any) -> None:
    r = likelihood_selection(QUESTION, DOCS[:3], embedded_fp32, n_orders=2, seed=0)
    _is_permutation(r, DOCS[:3])
    assert r.cost.lm_calls == len(r.orders) == 2
    assert all(math.isfinite(s) for s in r.scores) and r.scores[r.best or 0] == max(r.scores)


def test_convex_score(embedded_fp32: Any) -> None:
    docs = DOCS[:3]
    r = convex_score(QUESTION, docs, embedded_fp32, seed=0, placement="last")
    _is_permutation(r, docs)
    assert r.cost.lm_calls == len(r.orders) == 3
    assert all(math.isfinite(s) for s in r.scores)
    assert r.passages[-1] is docs[r.gold or 0]
    assert all(math.isfinite(v) for row in r.likelihoods for v in row)


def test_profile_estimate_and_placement(embedded_fp32: Any, tmp_path: Any) -> None:
    instances = [(QUESTION, DOCS[:3], 1)]
    profile = estimate_profile(embedded_fp32, instances)
    assert profile.n_positions == 3 and profile.source == "likelihood"
    assert profile.model_name == embedded_fp32.name
    assert all(math.isfinite(v) for v in profile.values)
    path = tmp_path / "profile.json"
    profile.save(path)
    assert PositionProfile.load(path) == profile
    via_registry = STRATEGIES["convex_score_profile"](
        QUESTION, DOCS[:3], scorer=embedded_fp32, profile=path
    )
    assert isinstance(via_registry, ConvexScoreResult)
    _is_permutation(via_registry, DOCS[:3])
    assert via_registry.cost.lm_calls == 3
    best = profile.ranking()[0]
    assert via_registry.passages[best] is DOCS[:3][via_registry.gold or 0]
    r = profile_reorder(QUESTION, DOCS[:3], profile=path, scores=via_registry.scores)
    assert r.order == via_registry.order and r.cost.lm_calls == 0


def test_edge_and_sandwich(embedded_fp32: Any) -> None:
    e = edge_reorder(DOCS, mode="haystack")
    _is_permutation(e, DOCS)
    prompt = sandwich_prompt(QUESTION, e.passages)
    assert prompt.count(QUESTION) == 2
    g = question_likelihood(QUESTION, e.passages, embedded_fp32, query_aware=True)
    assert g.prompts == [prompt] and g.cost.lm_calls == 1 and math.isfinite(g.scores[0])
    (answer,) = embedded_fp32.generate(
        [sandwich_prompt(QUESTION, DOCS[1:2], chat=True)], max_new_tokens=8
    )
    assert isinstance(answer, str) and answer


def test_fact_end_to_end(embedded_fp32: Any) -> None:
    result = fact(
        QUESTION, PLAIN, embedded_fp32, max_iterations=2, max_new_tokens=16, answer_max_new_tokens=4
    )
    trace = result.trace
    assert isinstance(result.answer, str)
    assert 1 <= len(trace.iterations) <= 2
    assert trace.stopped_because in ("nothing_new", "max_iterations", "context_exhausted")
    assert all(isinstance(it.raw, str) for it in trace.iterations)
    assert sorted(result.facts) == sorted(f for it in trace.iterations for f in it.new_facts)
    assert all(
        f in format_documents(PLAIN) for f in result.facts
    )  # facts are source text, never invented
    assert trace.hallucinations == sum(len(it.hallucinated) for it in trace.iterations)
    assert result.cost.lm_calls == len(trace.iterations) + 1


def test_fact_embedding_retrieve_end_to_end(embedded_fp32: Any, embedder: Any) -> None:
    result = fact(
        QUESTION,
        PLAIN,
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
        QUESTION, PLAIN, embedded_fp32, max_new_tokens=16, answer_max_new_tokens=4
    )
    trace = result.trace
    assert isinstance(result.answer, str) and isinstance(trace.raw, str)
    assert trace.outcome in ("recited", "fell_back")
    assert trace.fell_back == (result.recited == [])
    assert all(p in PLAIN for p in result.recited)  # exact source passages only
    usable = {b.source for b in trace.blocks if b.status in ("kept", "replaced")}
    assert len(usable) == len(result.recited)
    assert result.cost.lm_calls == 2


def test_medoid_end_to_end(embedded_fp32: Any, embedder: Any) -> None:
    result = medoid_vote(QUESTION, PLAIN, embedded_fp32, embedder, n_orders=3, max_new_tokens=4)
    assert isinstance(result.answer, str) and result.answer in result.answers
    assert len(result.answers) == len(result.orders) == len(result.similarities) == 3
    assert result.orders[0] == [0, 1, 2]
    assert result.answer == result.answers[result.trace.chosen]
    assert result.cost.lm_calls == 3
