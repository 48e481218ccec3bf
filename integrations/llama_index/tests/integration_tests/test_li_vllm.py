"""LlamaIndex's OpenAILike LLM pointed at a real vLLM server, through our components.

The server is the session's ``vllm_server`` (the repository's conftest.py starts it with
``rag-position serve``); skipped, with the reason in the summary, where vLLM is missing.
"""

from __future__ import annotations

from typing import Any

import pytest
from li_testkit import make_nodes
from llama_index.core.schema import QueryBundle
from llama_index.postprocessor.rag_position import (
    METADATA_KEY,
    ConvexScoreReorder,
    LikelihoodReorder,
    QuerySandwichQueryEngine,
)

from rag_position.models.transformers_backend import TransformersModel
from rag_position.strategies import sandwich_prompt

pytestmark = pytest.mark.slow

QUESTION = "Who wrote Hamlet?"


def _openai_like(server: Any, **kwargs: Any) -> Any:
    from llama_index.llms.openai_like import OpenAILike

    return OpenAILike(
        api_base=server.base_url,
        model=server.name,
        api_key="EMPTY",
        is_chat_model=False,
        timeout=120.0,
        **kwargs,
    )


def test_postprocessors_with_vllm_match_the_local_scorer(
    vllm_server: Any, li_model: TransformersModel
) -> None:
    raw = TransformersModel(li_model.model, li_model.tokenizer, name="raw", chat_template=False)
    nodes = make_nodes(n=4)
    bundle = QueryBundle(QUESTION)
    for cls, options in ((ConvexScoreReorder, {}), (LikelihoodReorder, {"n_orders": 3})):
        remote = cls(scorer=_openai_like(vllm_server), **options).postprocess_nodes(
            nodes, query_bundle=bundle
        )
        local = cls(scorer=raw, **options).postprocess_nodes(nodes, query_bundle=bundle)
        assert [n.node.node_id for n in remote] == [n.node.node_id for n in local]
        for r, lo in zip(remote, local, strict=True):
            rs, ls = r.node.metadata[METADATA_KEY], lo.node.metadata[METADATA_KEY]
            if rs["score"] is not None:
                assert rs["score"] == pytest.approx(ls["score"], abs=1e-4)


def test_a_query_engine_answers_through_vllm_like_the_local_model(
    vllm_server: Any, li_model: TransformersModel
) -> None:
    from llama_index.core import VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding

    raw = TransformersModel(li_model.model, li_model.tokenizer, name="raw", chat_template=False)
    nodes = [n.node for n in make_nodes(n=3)]
    index = VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=8))
    engine = QuerySandwichQueryEngine.from_index(
        index, llm=_openai_like(vllm_server), similarity_top_k=3, max_new_tokens=10, seed=0
    )
    response = engine.query(QUESTION)
    prompt = response.metadata[METADATA_KEY]["prompt"]
    assert prompt == sandwich_prompt(
        QUESTION,
        [{"text": n.node.text, "title": n.node.metadata["title"]} for n in response.source_nodes],
    )
    assert response.response == raw.generate([prompt], max_new_tokens=10)[0].strip()
