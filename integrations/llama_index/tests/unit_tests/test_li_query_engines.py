"""Query engines and the retriever with scripted models and a scripted retriever (what they
refuse: ``test_li_adapters.py``; a NaN node score: ``test_li_postprocessors.py``)."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from li_testkit import (
    DOCS,
    EchoModel,
    GoldAtEdgesScorer,
    ListRetriever,
    WordEmbedder,
    make_nodes,
    node_ids,
    node_texts,
)
from llama_index.core.callbacks import CallbackManager
from llama_index.core.llms import MockLLM
from llama_index.core.schema import MetadataMode, QueryBundle
from llama_index.postprocessor.rag_position import (
    METADATA_KEY,
    ConvexScoreReorder,
    EdgeReorder,
    FactQueryEngine,
    MedoidVotingQueryEngine,
    PositionAwareRetriever,
    QuerySandwichQueryEngine,
    ReciteThenSolveQueryEngine,
)
from llama_index.postprocessor.rag_position._nodes import node_passage

from rag_position.strategies import MedoidTrace, ReciteTrace, StrategyError, sandwich_prompt

QUESTION = "Who wrote Hamlet?"


class FailingModel(EchoModel):
    def generate(self, prompts: Any, **options: Any) -> list[str]:
        raise RuntimeError("server down")


# ---------------------------------------------------------------------------- sandwich
def test_sandwich_sends_the_core_prompt_and_returns_the_nodes() -> None:
    nodes = make_nodes(n=3)
    snapshot = copy.deepcopy([n.model_dump() for n in nodes])
    retriever = ListRetriever(nodes)
    engine = QuerySandwichQueryEngine(retriever=retriever, llm=MockLLM())  # MockLLM echoes
    response = engine.query(QUESTION)
    expected = sandwich_prompt(QUESTION, [node_passage(n, "title") for n in nodes])
    assert response.response == expected.strip()
    assert expected.count("Question: Who wrote Hamlet?") == 2
    assert "Document [1](Title: Paris)" in expected
    assert [id(n) for n in response.source_nodes] == [id(n) for n in nodes]
    trace = response.metadata[METADATA_KEY]
    assert trace["strategy"] == "sandwich" and trace["prompt"] == expected
    assert trace["cost"].lm_calls == 1
    assert retriever.queries == [QUESTION]
    assert [n.model_dump() for n in nodes] == snapshot


def test_sandwich_after_postprocessors_reads_their_order() -> None:
    nodes = make_nodes([0.1, 0.2, 0.3, 0.4])
    model = EchoModel(["Shakespeare"])
    engine = QuerySandwichQueryEngine(
        retriever=ListRetriever(nodes),
        llm=model,
        node_postprocessors=[EdgeReorder(mode="haystack")],
        chat=True,
        max_new_tokens=7,
        seed=3,
    )
    response = engine.query(QUESTION)
    assert response.response == "Shakespeare"
    assert node_ids(response.source_nodes) == ["node-3", "node-1", "node-0", "node-2"]
    prompt = model.prompts[0]
    positions = [prompt.index(t) for t in node_texts(response.source_nodes)]
    assert positions == sorted(positions)  # the prompt reads the nodes in the new order
    assert not prompt.rstrip().endswith("Answer:")  # chat variant
    assert METADATA_KEY not in prompt
    assert model.calls == [{"max_new_tokens": 7, "temperature": 0.0, "seed": 3, "stop": None}]


# ---------------------------------------------------------------------------- recite
def test_recite_then_solve_grounds_the_recitation_in_the_nodes() -> None:
    nodes = make_nodes(n=3)
    hamlet = nodes[1].node.get_content(MetadataMode.NONE)
    model = EchoModel([f"# Document 2\n{hamlet}", "William Shakespeare"])
    engine = ReciteThenSolveQueryEngine(
        retriever=ListRetriever(nodes), llm=model, max_new_tokens=20, answer_max_new_tokens=5
    )
    response = engine.query(QUESTION)
    assert response.response == "William Shakespeare"
    info = response.metadata[METADATA_KEY]
    assert info["strategy"] == "recite_then_solve" and info["recited_nodes"] == [1]
    assert isinstance(info["trace"], ReciteTrace) and info["trace"].outcome == "recited"
    assert hamlet in model.prompts[1] and DOCS[0][1] not in model.prompts[1]
    assert [c["max_new_tokens"] for c in model.calls] == [20, 5]
    assert info["cost"].lm_calls == 2


# ---------------------------------------------------------------------------- FACT
def test_fact_collects_facts_then_answers_from_them() -> None:
    nodes = make_nodes(n=3)
    model = EchoModel(
        [
            "- Hamlet is a tragedy written by William Shakespeare around 1600.",
            "- The moon is made of cheese.",
            "Shakespeare",
        ]
    )
    engine = FactQueryEngine(retriever=ListRetriever(nodes), llm=model, max_iterations=3)
    response = engine.query(QUESTION)
    info = response.metadata[METADATA_KEY]
    assert response.response == "Shakespeare"
    assert info["facts"] == ["Hamlet is a tragedy written by William Shakespeare around 1600."]
    assert info["trace"].stopped_because == "nothing_new"
    assert info["trace"].hallucinations == 1
    assert len(response.source_nodes) == 3


def test_fact_with_an_embedding_model_retrieves_sentences_by_similarity() -> None:
    nodes = make_nodes(n=3)
    model = EchoModel(["Shakespeare"])
    embedder = WordEmbedder(["hamlet", "shakespeare", "wrote", "written", "paris"])
    engine = FactQueryEngine(
        retriever=ListRetriever(nodes), llm=model, embed_model=embedder, top_k=1
    )
    response = engine.query(QUESTION)
    info = response.metadata[METADATA_KEY]
    first = info["trace"].iterations[0]
    assert first.raw is None  # a custom retrieve: no model output
    assert first.new_facts == ["Hamlet is a tragedy written by William Shakespeare around 1600."]
    assert first.new_facts[0] in info["facts"]
    assert len(model.prompts) == 1  # the llm only answered; retrieval was by embeddings


# ---------------------------------------------------------------------------- medoid
def test_medoid_voting_returns_the_central_answer() -> None:
    nodes = make_nodes(n=3)
    model = EchoModel(["Shakespeare wrote Hamlet", "I don't know", "Hamlet by Shakespeare"])
    embedder = WordEmbedder(["shakespeare", "hamlet", "wrote", "by", "know"])
    engine = MedoidVotingQueryEngine(
        retriever=ListRetriever(nodes), llm=model, embed_model=embedder, n_orders=3, seed=1
    )
    response = engine.query(QUESTION)
    info = response.metadata[METADATA_KEY]
    assert response.response in ("Shakespeare wrote Hamlet", "Hamlet by Shakespeare")
    assert info["answers"] == ["Shakespeare wrote Hamlet", "I don't know", "Hamlet by Shakespeare"]
    assert isinstance(info["trace"], MedoidTrace) and info["trace"].absent == [1]
    assert info["orders"][0] == [0, 1, 2] and len({tuple(o) for o in info["orders"]}) == 3
    assert info["similarities"][1] is None
    assert [n.node.node_id for n in response.source_nodes] == node_ids(nodes)


# ---------------------------------------------------------------------------- shared behaviour
def test_strategy_errors_propagate_with_their_trace() -> None:
    engine = ReciteThenSolveQueryEngine(
        retriever=ListRetriever(make_nodes(n=2)), llm=FailingModel()
    )
    with pytest.raises(StrategyError) as info:
        engine.query(QUESTION)
    assert isinstance(info.value.trace, ReciteTrace)
    assert isinstance(info.value.__cause__, RuntimeError)


def test_async_queries_match_sync() -> None:
    nodes = make_nodes(n=3)
    vocabulary = ["shakespeare", "hamlet"]

    def engines() -> list[Any]:
        retriever = ListRetriever(nodes)
        return [
            QuerySandwichQueryEngine(retriever=retriever, llm=MockLLM()),
            ReciteThenSolveQueryEngine(retriever=retriever, llm=EchoModel(["# Document 1\nx"])),
            FactQueryEngine(retriever=retriever, llm=EchoModel(["- nothing"])),
            MedoidVotingQueryEngine(
                retriever=retriever,
                llm=EchoModel(["a", "b", "a"]),
                embed_model=WordEmbedder(vocabulary),
                n_orders=3,
                node_postprocessors=[EdgeReorder()],
            ),
        ]

    bundle = QueryBundle(QUESTION, embedding=[0.5], custom_embedding_strs=["Hamlet"])
    for sync_engine, async_engine in zip(engines(), engines(), strict=True):
        expected = sync_engine.query(bundle)  # the caller's bundle is what the retriever gets
        got = asyncio.run(async_engine.aquery(bundle))
        assert sync_engine.retriever.bundles[-1] is bundle is async_engine.retriever.bundles[-1]
        assert got.response == expected.response
        assert node_ids(got.source_nodes) == node_ids(expected.source_nodes)
        a, b = got.metadata[METADATA_KEY], expected.metadata[METADATA_KEY]
        assert {k: v for k, v in a.items() if k != "cost"} == {
            k: v for k, v in b.items() if k != "cost"
        }


# ---------------------------------------------------------------------------- retriever
def test_position_aware_retriever_reorders_the_wrapped_results() -> None:
    nodes = make_nodes([0.1, 0.2, 0.3, 0.4])
    inner = ListRetriever(nodes)
    by_name = PositionAwareRetriever(inner, "edge", mode="llamaindex")
    direct = EdgeReorder(mode="llamaindex").postprocess_nodes(nodes)
    assert node_ids(by_name.retrieve(QUESTION)) == node_ids(direct)
    texts = node_texts(nodes)
    convex = PositionAwareRetriever(
        inner, ConvexScoreReorder(scorer=GoldAtEdgesScorer(texts, texts[2]))
    )
    out = convex.retrieve(QUESTION)
    assert out[0].node.node_id == "node-2"
    assert out[0].node.metadata[METADATA_KEY]["gold"] is True
    assert node_ids(asyncio.run(convex.aretrieve(QUESTION))) == node_ids(out)
    assert inner.queries[-1] == QUESTION
    assert [n.score for n in nodes] == [0.1, 0.2, 0.3, 0.4]


def test_position_aware_retriever_shares_the_wrapped_callback_manager() -> None:
    """Found by benchmarks/load.py: with a CallbackManager of its own, LlamaIndex never reset
    the wrapped retriever's trace map (the wrapper's trace open): an entry more per call."""
    inner = ListRetriever(make_nodes([0.1, 0.2, 0.3, 0.4]))
    retriever = PositionAwareRetriever(inner, "edge")
    for _ in range(20):
        retriever.retrieve(QUESTION)
        asyncio.run(retriever.aretrieve(QUESTION))
    assert len(inner.callback_manager._trace_map) <= 2  # was 40, one a call
    assert retriever.callback_manager is inner.callback_manager
    own = CallbackManager()
    assert PositionAwareRetriever(inner, "edge", callback_manager=own).callback_manager is own
