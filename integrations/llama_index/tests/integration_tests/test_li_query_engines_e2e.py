"""The four query engines on the real index with the embedded SmolLM2 and all-MiniLM-L6-v2."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest
from li_testkit import passages
from llama_index.core import VectorStoreIndex
from llama_index.core.llms import ChatMessage
from llama_index.postprocessor.rag_position import (
    METADATA_KEY,
    EdgeReorder,
    FactQueryEngine,
    LlamaIndexEmbedder,
    LlamaIndexGenerator,
    MedoidVotingQueryEngine,
    QuerySandwichQueryEngine,
    ReciteThenSolveQueryEngine,
)

from rag_position._integration import conversation
from rag_position.prompts import format_documents
from rag_position.strategies import FactTrace, MedoidTrace, ReciteTrace, sandwich_prompt

pytestmark = pytest.mark.slow

QUESTION = "Who wrote the tragedy Hamlet?"


def test_sandwich_engine_through_both_llm_paths(
    li_index: VectorStoreIndex, li_llm: Any, li_model: Any
) -> None:
    engine = QuerySandwichQueryEngine.from_index(
        li_index, llm=li_llm, similarity_top_k=3, max_new_tokens=12
    )
    response = engine.query(QUESTION)
    nodes = response.source_nodes
    assert len(nodes) == 3 and nodes[0].node.metadata["title"] == "Hamlet"
    prompt = sandwich_prompt(QUESTION, passages(nodes))
    info = response.metadata[METADATA_KEY]
    assert info["prompt"] == prompt and info["cost"].lm_calls == 1
    assert info["cost"].generated_tokens <= 12
    assert response.response == li_model.generate([prompt], max_new_tokens=12)[0].strip()
    assert response.response
    # the same model behind the LlamaIndex LLM adapter: options pass through complete(**kwargs)
    adapted = QuerySandwichQueryEngine.from_index(
        li_index, llm=LlamaIndexGenerator(li_llm), similarity_top_k=3, max_new_tokens=12
    )
    assert adapted.query(QUESTION).response == response.response
    again = asyncio.run(engine.aquery(QUESTION))
    assert again.response == response.response
    assert [n.node.node_id for n in again.source_nodes] == [n.node.node_id for n in nodes]


def test_recite_then_solve_engine(li_index: VectorStoreIndex, li_llm: Any) -> None:
    engine = ReciteThenSolveQueryEngine.from_index(
        li_index, llm=li_llm, similarity_top_k=3, max_new_tokens=48, answer_max_new_tokens=12
    )
    response = engine.query(QUESTION)
    info = response.metadata[METADATA_KEY]
    trace = info["trace"]
    assert isinstance(trace, ReciteTrace) and trace.raw
    assert trace.outcome in ("recited", "fell_back")
    assert trace.recite_prompt.count("Hamlet is a tragedy") == 1
    assert all(0 <= i < len(response.source_nodes) for i in info["recited_nodes"])
    assert (trace.outcome == "recited") == bool(info["recited_nodes"])
    assert info["cost"].lm_calls == 2 and response.response


def test_fact_engine(li_index: VectorStoreIndex, li_llm: Any) -> None:
    options = {"max_iterations": 2, "max_new_tokens": 40, "answer_max_new_tokens": 12}
    engine = FactQueryEngine.from_index(li_index, llm=li_llm, similarity_top_k=3, **options)
    response = engine.query(QUESTION)
    info = response.metadata[METADATA_KEY]
    assert isinstance(info["trace"], FactTrace)
    assert 1 <= len(info["trace"].iterations) <= 2
    context = format_documents(passages(response.source_nodes))
    assert all(fact in context for fact in info["facts"])  # located facts only, never made up
    assert info["cost"].lm_calls == len(info["trace"].iterations) + 1
    assert response.response


def test_fact_engine_with_the_embedding_model(
    li_index: VectorStoreIndex, li_llm: Any, li_embed_model: Any
) -> None:
    options = {"max_iterations": 1, "top_k": 1, "answer_max_new_tokens": 12}
    read_back = type(li_embed_model).from_json(li_embed_model.to_json())  # loads its spec
    engine = FactQueryEngine.from_index(
        li_index, llm=li_llm, embed_model=read_back, similarity_top_k=3, **options
    )
    info = engine.query(QUESTION).metadata[METADATA_KEY]
    assert info["facts"] == ["Hamlet is a tragedy written by William Shakespeare around 1600."]
    assert info["cost"].lm_calls == 1  # only the answer: retrieval was by embeddings


def test_medoid_voting_engine_with_both_embedder_paths(
    li_index: VectorStoreIndex, li_llm: Any, li_embed_model: Any
) -> None:
    results = []
    for embed_model in (li_embed_model, LlamaIndexEmbedder(li_embed_model)):
        options = {"n_orders": 3, "max_new_tokens": 12, "node_postprocessors": [EdgeReorder()]}
        engine = MedoidVotingQueryEngine.from_index(
            li_index, llm=li_llm, embed_model=embed_model, similarity_top_k=3, **options
        )
        response = engine.query(QUESTION)
        info = response.metadata[METADATA_KEY]
        assert isinstance(info["trace"], MedoidTrace)
        assert len(info["answers"]) == 3 and response.response in info["answers"]
        assert len({tuple(o) for o in info["orders"]}) == 3
        voters = info["trace"].voters
        assert all(math.isfinite(info["similarities"][i]) for i in voters)
        assert all(METADATA_KEY in n.node.metadata for n in response.source_nodes)
        results.append((response.response, info["answers"], info["similarities"]))
    (a1, ans1, sim1), (a2, ans2, sim2) = results
    assert a1 == a2 and ans1 == ans2
    for s1, s2 in zip(sim1, sim2, strict=True):
        assert (s1 is None) == (s2 is None)
        if s1 is not None:
            assert s1 == pytest.approx(s2, abs=1e-4)


def test_the_llm_chats_in_the_models_roles(li_llm: Any, li_model: Any) -> None:
    turns = [("system", "Answer in one word."), ("user", QUESTION)]
    prompt, raw = conversation(li_model, turns, "test")
    assert "<|im_start|>system\nAnswer in one word.<|im_end|>" in prompt  # not the default's
    messages = [ChatMessage(role=role, content=text) for role, text in turns]
    reply = raw.generate([prompt], max_new_tokens=li_llm.max_new_tokens)[0]
    calls = li_model.usage.lm_calls
    assert li_llm.chat(messages).message.content == reply
    assert li_model.usage.lm_calls == calls + 1  # the model's own usage counts a chat
    assert [c.delta for c in li_llm.stream_chat(messages)] == [reply]
