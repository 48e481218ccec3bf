"""An OpenAILike LLM pointed at a server scores and answers like the local model: the server
double (`rag_position.testing.openai_double`, on 127.0.0.1) and the session's real vLLM server
(``vllm_server``, started by the repository's conftest.py; skipped, saying why, without vLLM)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from li_testkit import make_nodes
from llama_index.core.schema import QueryBundle
from llama_index.postprocessor.rag_position import (
    METADATA_KEY,
    ConvexScoreReorder,
    LikelihoodReorder,
    QuerySandwichQueryEngine,
    resolve_scorer,
)

from rag_position.models import Scorer
from rag_position.models.transformers_backend import TransformersModel
from rag_position.strategies import sandwich_prompt
from rag_position.testing.openai_double import ModelServer, serve

pytestmark = pytest.mark.slow

QUESTION = "Who wrote Hamlet?"


@pytest.fixture(scope="module")
def li_server(li_model: TransformersModel) -> Iterator[ModelServer]:
    with serve(li_model) as server:
        yield server


@pytest.fixture(scope="module")
def li_raw(li_model: TransformersModel) -> TransformersModel:
    """The same weights with the chat template off: what an echo-scoring server scores."""
    return TransformersModel(
        li_model.model, li_model.tokenizer, name=li_model.name, chat_template=False
    )


def _openai_like(url: str, model: str, **kwargs: Any) -> Any:
    from llama_index.llms.openai_like import OpenAILike

    return OpenAILike(api_base=url, model=model, is_chat_model=False, **kwargs)


def _double(server: ModelServer) -> Any:
    return _openai_like(server.url, server.model_name, api_key="x", timeout=60.0, max_retries=0)


def _vllm(server: Any) -> Any:
    return _openai_like(server.base_url, server.name, api_key="EMPTY", timeout=120.0)


def test_openai_like_scores_like_the_local_model(
    li_server: ModelServer, li_raw: TransformersModel
) -> None:
    scorer = resolve_scorer(_double(li_server)).get()
    assert isinstance(scorer, Scorer) and scorer is not li_raw
    prompt = (
        "Document [1](Title: Hamlet) Hamlet is a tragedy by Shakespeare.\nQuestion: " + QUESTION
    )
    other = "Document [1](Title: Paris) Paris is in France.\nQuestion: " + QUESTION
    spans = [(p.index("Question:"), len(p)) for p in (prompt, other)]
    before = li_server.count("/v1/completions")
    got = scorer.score_spans([prompt, other], spans)
    assert li_server.count("/v1/completions") - before == 2  # really went over HTTP
    want = li_raw.score_spans([prompt, other], spans)
    for g, w in zip(got, want, strict=True):
        assert g.n_tokens == w.n_tokens
        assert g.mean == pytest.approx(w.mean, abs=1e-4)
    assert got[0].mean > got[1].mean  # the relevant passage makes the question more likely


def check_postprocessors(llm: Any, raw: TransformersModel, n: int, abs_tol: float) -> None:
    """ConvexScore and likelihood selection score through ``llm`` like ``raw`` locally."""
    nodes = make_nodes(n=n)
    bundle = QueryBundle(QUESTION)
    for cls, options in ((ConvexScoreReorder, {}), (LikelihoodReorder, {"n_orders": 3})):
        remote = cls(scorer=llm, **options).postprocess_nodes(nodes, query_bundle=bundle)
        local = cls(scorer=raw, **options).postprocess_nodes(nodes, query_bundle=bundle)
        assert [n.node.node_id for n in remote] == [n.node.node_id for n in local]
        for r, lo in zip(remote, local, strict=True):
            rs, ls = r.node.metadata[METADATA_KEY], lo.node.metadata[METADATA_KEY]
            assert rs["original_rank"] == ls["original_rank"]
            if rs["score"] is not None:
                assert rs["score"] == pytest.approx(ls["score"], abs=abs_tol)


def test_postprocessors_with_an_openai_like_scorer_match_the_local_scorer(
    li_server: ModelServer, li_raw: TransformersModel
) -> None:
    check_postprocessors(_double(li_server), li_raw, 3, 1e-3)


def test_postprocessors_with_vllm_match_the_local_scorer(
    vllm_server: Any, li_raw: TransformersModel
) -> None:
    check_postprocessors(_vllm(vllm_server), li_raw, 4, 1e-4)


def check_query_engine(llm: Any, raw: TransformersModel, n: int) -> None:
    """A sandwich engine over ``n`` nodes answers through ``llm`` as ``raw`` does locally."""
    from llama_index.core import VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding

    index = VectorStoreIndex(
        [x.node for x in make_nodes(n=n)], embed_model=MockEmbedding(embed_dim=8)
    )
    engine = QuerySandwichQueryEngine.from_index(
        index, llm=llm, similarity_top_k=n, max_new_tokens=10, seed=0
    )
    response = engine.query(QUESTION)
    prompt = response.metadata[METADATA_KEY]["prompt"]
    assert prompt == sandwich_prompt(
        QUESTION,
        [{"text": x.node.text, "title": x.node.metadata["title"]} for x in response.source_nodes],
    )
    assert response.response == raw.generate([prompt], max_new_tokens=10)[0].strip()


def test_openai_like_as_the_llm_of_a_query_engine(
    li_server: ModelServer, li_raw: TransformersModel
) -> None:
    before = li_server.count("/v1/completions")
    check_query_engine(_double(li_server), li_raw, 2)
    assert li_server.count("/v1/completions") - before == 1


def test_a_query_engine_answers_through_vllm_like_the_local_model(
    vllm_server: Any, li_raw: TransformersModel
) -> None:
    check_query_engine(_vllm(vllm_server), li_raw, 3)
