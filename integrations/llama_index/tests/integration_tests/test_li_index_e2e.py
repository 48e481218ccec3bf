"""Each postprocessor in a real in-memory VectorStoreIndex built with the embedded embedder,
queried through ``as_query_engine(node_postprocessors=[...])``: with ``MockLLM`` (it echoes
the prompt, so the prompt itself is checked) and with the embedded SmolLM2 end to end."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from li_testkit import DOCS, node_ids, node_texts, passages
from llama_index.core import VectorStoreIndex
from llama_index.core.llms import MockLLM
from llama_index.postprocessor.rag_position import (
    METADATA_KEY,
    ConvexScoreReorder,
    EdgeReorder,
    LikelihoodReorder,
    ProfileReorder,
)

from rag_position.strategies import convex_score, likelihood_selection

pytestmark = pytest.mark.slow

QUESTION = "Who wrote the tragedy Hamlet?"
PROFILE = [0.17, 0.12, 0.15, 0.40]
MAKE: dict[str, Any] = {  # kind -> the postprocessor, given the scorer
    "likelihood": lambda scorer: LikelihoodReorder(scorer=scorer, n_orders=4, seed=1),
    "convex": lambda scorer: ConvexScoreReorder(scorer=scorer),
    "profile": lambda scorer: ProfileReorder(profile=PROFILE),
    "profile_scored": lambda scorer: ProfileReorder(profile=PROFILE, scorer=scorer),
    "edge": lambda scorer: EdgeReorder(),
    "edge_llamaindex": lambda scorer: EdgeReorder(mode="llamaindex"),
}
ANSWERED = ("likelihood", "convex", "profile_scored", "edge")  # also by the embedded model


@pytest.mark.parametrize("kind", list(MAKE))
def test_postprocessor_in_a_vector_store_index(
    kind: str, li_index: VectorStoreIndex, li_llm: Any, li_model: Any
) -> None:
    reorder = MAKE[kind](li_llm)  # the RagPositionLLM serves as the scorer: one model loaded
    retrieved = li_index.as_retriever(similarity_top_k=4).retrieve(QUESTION)
    assert len(retrieved) == 4
    engine = li_index.as_query_engine(
        llm=MockLLM(), similarity_top_k=4, node_postprocessors=[reorder]
    )
    response = engine.query(QUESTION)
    out = response.source_nodes
    assert sorted(node_ids(out)) == sorted(node_ids(retrieved))
    assert node_ids(out) == node_ids(reorder.postprocess_nodes(retrieved, query_str=QUESTION))
    # MockLLM returns the prompt it got: the nodes appear in the new order, our key does not
    prompt = str(response.response)
    positions = [prompt.index(text) for text in node_texts(out)]
    assert positions == sorted(positions)
    assert METADATA_KEY not in prompt and "original_rank" not in prompt
    assert "title: Hamlet" in prompt  # the nodes' own metadata still reaches the LLM
    scores = {n.node.node_id: n.score for n in retrieved}
    for rank, node in enumerate(out):
        assert node.score == scores[node.node.node_id]  # the retriever's score, untouched
        entry = node.node.metadata[METADATA_KEY]
        assert entry["rank"] == rank and entry["strategy"] == reorder.strategy_name
        assert node_ids(retrieved)[entry["original_rank"]] == node.node.node_id
    for stored in li_index.docstore.docs.values():  # the index's own nodes are never touched
        assert METADATA_KEY not in stored.metadata
    again = asyncio.run(engine.aquery(QUESTION))
    assert node_ids(again.source_nodes) == node_ids(out)
    assert [n.node.metadata for n in again.source_nodes] == [n.node.metadata for n in out]
    assert str(again.response) == prompt
    if kind not in ANSWERED:
        return
    # end to end on the embedded model: its answer to exactly the prompt MockLLM echoed
    engine = li_index.as_query_engine(llm=li_llm, similarity_top_k=4, node_postprocessors=[reorder])
    response = engine.query(QUESTION)
    answer = str(response.response)
    assert answer.strip()
    assert answer.strip() == li_model.generate([prompt], max_new_tokens=16)[0].strip()
    assert all(METADATA_KEY in n.node.metadata for n in response.source_nodes)
    if kind == "convex":
        again = asyncio.run(engine.aquery(QUESTION))
        assert str(again.response) == answer
        assert node_ids(again.source_nodes) == node_ids(response.source_nodes)


def test_scoring_postprocessors_score_like_the_core(
    li_index: VectorStoreIndex, li_llm: Any, li_model: Any
) -> None:
    titles = sorted(n.metadata["title"] for n in li_index.docstore.docs.values())
    assert titles == sorted(t for t, _ in DOCS)  # the index's documents carry their titles
    retrieved = li_index.as_retriever(similarity_top_k=4).retrieve(QUESTION)
    convex = ConvexScoreReorder(scorer=li_llm).postprocess_nodes(retrieved, query_str=QUESTION)
    core = convex_score(QUESTION, passages(retrieved), li_model)
    assert [n.node.metadata[METADATA_KEY]["original_rank"] for n in convex] == core.order
    for node in convex:
        entry = node.node.metadata[METADATA_KEY]
        assert entry["score"] == pytest.approx(core.scores[entry["original_rank"]], abs=1e-6)
        assert entry["gold"] == (entry["original_rank"] == core.gold)
    selected = LikelihoodReorder(scorer=li_llm, n_orders=4, seed=1).postprocess_nodes(
        retrieved, query_str=QUESTION
    )
    core_sel = likelihood_selection(QUESTION, passages(retrieved), li_model, n_orders=4, seed=1)
    assert [n.node.metadata[METADATA_KEY]["original_rank"] for n in selected] == core_sel.order
    assert selected[0].node.metadata[METADATA_KEY]["question_loglik"] == pytest.approx(
        max(core_sel.scores), abs=1e-6
    )
