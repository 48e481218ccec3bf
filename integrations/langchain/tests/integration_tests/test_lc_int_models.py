"""The embedded model through our adapters: runnables, ChatRagPosition, the OpenAI scorer
adapter against the server double (`rag_position.testing.openai_double`, 127.0.0.1),
RagPositionEmbeddings' standard suite. Against a real vLLM server: test_lc_vllm.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from langchain_openai import ChatOpenAI, OpenAI
from langchain_rag_position import (
    ConvexScoreReorder,
    FactRewriter,
    LangChainGenerator,
    LikelihoodReorder,
    MedoidVoting,
    QuerySandwich,
    RagPositionEmbeddings,
    ReciteThenSolve,
)
from langchain_rag_position._adapters import to_passage
from langchain_tests.integration_tests import EmbeddingsIntegrationTests
from lc_testkit import QUESTION, make_docs

from rag_position.models.transformers_backend import TransformersModel
from rag_position.strategies import fact, medoid_vote, recite_then_solve
from rag_position.testing.openai_double import ModelServer, serve

pytestmark = pytest.mark.slow


# ---------------------------------------------------------------------- runnables
def test_query_sandwich_chain_on_the_embedded_model(lc_store: Any, lc_chat: Any) -> None:
    retriever = lc_store.as_retriever(search_kwargs={"k": 3})
    prompts: list[Any] = []
    spy = RunnableLambda(lambda p: prompts.append(p) or p)
    chain = (
        {"documents": retriever, "question": RunnablePassthrough()}
        | QuerySandwich()
        | spy
        | lc_chat
        | StrOutputParser()
    )
    answer = chain.invoke(QUESTION)
    text = prompts[0].to_messages()[0].content
    assert text.count(f"Question: {QUESTION}") == 2
    assert answer == lc_chat.core_model.generate([text], max_new_tokens=lc_chat.max_tokens)[0]
    assert "Paris" in answer  # the gold passage is retrieved first and sandwiched


def test_recite_then_solve_equals_the_core(lc_model: Any, lc_chat: Any) -> None:
    docs = make_docs(3)
    runnable = ReciteThenSolve(llm=lc_chat, max_new_tokens=32, answer_max_new_tokens=8)
    out = runnable.invoke({"question": QUESTION, "documents": docs})
    core = recite_then_solve(
        QUESTION, [to_passage(d) for d in docs], lc_model, max_new_tokens=32,
        answer_max_new_tokens=8,
    )  # fmt: skip
    assert out["answer"] == core.answer and out["trace"] == core.trace
    assert [d.page_content for d in out["recited"]] == [p.text for p in core.recited]
    assert all(any(r is d for d in docs) for r in out["recited"])  # the caller's objects
    assert out["cost"].lm_calls == core.cost.lm_calls >= 1


def test_fact_and_medoid_on_the_embedded_model(
    lc_model: Any, lc_chat: Any, lc_embeddings: Any, lc_embedder: Any
) -> None:
    docs = make_docs(3)
    passages = [to_passage(d) for d in docs]
    out = FactRewriter(
        llm=lc_chat, max_iterations=1, max_new_tokens=24, answer_max_new_tokens=8
    ).invoke({"question": QUESTION, "documents": docs})
    core = fact(QUESTION, passages, lc_model, max_iterations=1, max_new_tokens=24,
                answer_max_new_tokens=8)  # fmt: skip
    assert (out["answer"], out["facts"], out["trace"]) == (core.answer, core.facts, core.trace)
    vote = MedoidVoting(llm=lc_chat, embeddings=lc_embeddings, n_orders=2, max_new_tokens=8)
    got = vote.invoke({"question": QUESTION, "documents": docs})
    want = medoid_vote(QUESTION, passages, lc_model, lc_embedder, n_orders=2, max_new_tokens=8)
    assert got["answers"] == want.answers and got["answer"] == want.answer
    assert got["orders"] == want.orders
    assert got["trace"] == want.trace
    np.testing.assert_allclose(
        [s for s in got["similarities"] if s is not None],
        [s for s in want.similarities if s is not None],
        rtol=1e-5,
    )


def test_langchain_generator_path_equals_the_core(lc_model: Any, lc_chat: Any) -> None:
    """The generic LangChain adapter (batch through BaseChatModel) on the embedded model."""
    prompts = ["What is the capital of France?", "Name a color of the sky."]
    generic = LangChainGenerator(lc_chat).generate(prompts, max_new_tokens=8)
    assert generic == lc_model.generate(prompts, max_new_tokens=8)
    stopped = LangChainGenerator(lc_chat).generate(prompts[:1], max_new_tokens=8, stop=["Paris"])
    assert "Paris" not in stopped[0]


def test_chat_rag_position_conversation_and_usage(lc_chat: Any) -> None:
    reply = lc_chat.invoke([SystemMessage("Answer in one word."), HumanMessage(QUESTION)])
    assert reply.content.strip()
    usage = reply.usage_metadata
    assert (
        usage is not None
        and usage["input_tokens"] > 10
        and 0 < usage["output_tokens"] <= lc_chat.max_tokens + 1
    )
    chunks = list(lc_chat.stream(QUESTION))
    assert len(chunks) == 1 and chunks[0].content == lc_chat.invoke(QUESTION).content


# ---------------------------------------------------------------------- OpenAI scorer adapter
@pytest.fixture(scope="module")
def lc_server(lc_model: TransformersModel) -> Iterator[ModelServer]:
    with serve(lc_model, name="smollm2") as server:
        yield server


def test_chat_openai_scores_like_the_local_model(
    lc_server: ModelServer, lc_model: TransformersModel
) -> None:
    """ChatOpenAI pointed at a server with prompt log-probabilities is a scorer.

    The server scores the raw prompt (completions endpoints apply no chat template),
    so it equals the local model with chat_template=False (the same weights).
    """
    raw = TransformersModel(lc_model.model, lc_model.tokenizer, name="raw", chat_template=False)
    chat = ChatOpenAI(base_url=lc_server.url, model="smollm2", api_key="x", max_retries=0)
    docs = make_docs(3)
    before = lc_server.count("/v1/completions")
    remote = ConvexScoreReorder(scorer=chat).compress_documents(docs, QUESTION)
    assert lc_server.count("/v1/completions") - before == 3  # one echo request per rotation
    local = ConvexScoreReorder(scorer=raw).compress_documents(docs, QUESTION)
    key = "rag_position"
    assert [d.id for d in remote] == [d.id for d in local]
    np.testing.assert_allclose(
        [d.metadata[key]["score"] for d in remote],
        [d.metadata[key]["score"] for d in local],
        atol=1e-3,
    )
    llm = OpenAI(base_url=lc_server.url, model="smollm2", api_key="x", max_retries=0)
    picked = LikelihoodReorder(scorer=llm, n_orders=2).compress_documents(docs, QUESTION)
    same = LikelihoodReorder(scorer=raw, n_orders=2).compress_documents(docs, QUESTION)
    assert [d.id for d in picked] == [d.id for d in same]


# ---------------------------------------------------------------------- embeddings suite
class TestRagPositionEmbeddingsIntegration(EmbeddingsIntegrationTests):
    pytestmark: ClassVar[list[pytest.MarkDecorator]] = [
        pytest.mark.slow,
        pytest.mark.asyncio,  # the suite's async tests are unmarked; pytest-asyncio runs strict
        pytest.mark.filterwarnings("ignore:The test <Function:pytest.PytestWarning"),
    ]

    @pytest.fixture(autouse=True)
    def _embedder(self, lc_embedder: Any) -> None:
        self.embedder = lc_embedder

    @property
    def embeddings_class(self) -> type[RagPositionEmbeddings]:
        return RagPositionEmbeddings

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        return {"embedder": self.embedder}
