"""The embedded model through our adapters, and LangChain's OpenAI classes against the server
double and a real vLLM server (``vllm_server``: skipped, with the reason, without vLLM),
compared with the same weights run locally."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
import pytest
from langchain_core.messages import ChatMessage, HumanMessage, SystemMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from langchain_openai import ChatOpenAI, OpenAI
from langchain_rag_position import (
    ConvexScoreReorder,
    FactRewriter,
    LangChainGenerator,
    LikelihoodReorder,
    MedoidVoting,
    PositionAwareRetriever,
    QuerySandwich,
    RagPositionEmbeddings,
    ReciteThenSolve,
)
from langchain_rag_position._adapters import to_passage
from langchain_tests.integration_tests import EmbeddingsIntegrationTests
from lc_testkit import QUESTION, SUITE_MARKS, make_docs

from rag_position.models.transformers_backend import TransformersModel
from rag_position.strategies import fact, medoid_vote, recite_then_solve
from rag_position.testing.openai_double import ModelServer, serve

pytestmark = pytest.mark.slow


# ---------------------------------------------------------------------- runnables
def sandwich_chain(retriever: Any, chat: Any) -> tuple[str, str]:
    """The answer and the prompt of retriever | QuerySandwich | chat, the question twice."""
    prompts: list[Any] = []
    chain = (
        {"documents": retriever, "question": RunnablePassthrough()}
        | QuerySandwich()
        | RunnableLambda(lambda p: prompts.append(p) or p)
        | chat
        | StrOutputParser()
    )
    answer = chain.invoke(QUESTION)
    text = prompts[0].to_messages()[0].content
    assert text.count(f"Question: {QUESTION}") == 2
    return answer, text


def test_query_sandwich_chain_on_the_embedded_model(lc_store: Any, lc_chat: Any) -> None:
    answer, text = sandwich_chain(lc_store.as_retriever(search_kwargs={"k": 3}), lc_chat)
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
    as_roles = [ChatMessage(role="system", content="Answer in one word."), HumanMessage(QUESTION)]
    assert lc_chat.invoke(as_roles).content == reply.content
    usage = reply.usage_metadata
    assert usage is not None and usage["input_tokens"] > 10
    assert 0 < usage["output_tokens"] <= lc_chat.max_tokens + 1
    chunks = list(lc_chat.stream(QUESTION))
    assert len(chunks) == 1 and chunks[0].content == lc_chat.invoke(QUESTION).content


# ---------------------------------------------------------------------- OpenAI classes
@pytest.fixture(scope="module")
def lc_server(lc_model: TransformersModel) -> Iterator[ModelServer]:
    with serve(lc_model, name="smollm2") as server:
        yield server


def scores_like_local(
    chat: ChatOpenAI, llm: OpenAI, model: TransformersModel, n: int, atol: float, count: Any = None
) -> None:
    """ChatOpenAI (ConvexScore) and OpenAI (Likelihood) pointed at a server with prompt
    log-probabilities reorder as the same weights do locally on the raw prompt (completions
    endpoints apply no chat template); ``count``: the server's count of echo requests."""
    local = TransformersModel(model.model, model.tokenizer, name="raw", chat_template=False)
    docs = make_docs(n)
    before = count() if count else 0
    remote = ConvexScoreReorder(scorer=chat).compress_documents(docs, QUESTION)
    if count:
        assert count() - before == n  # one echo request per rotation
    ours = ConvexScoreReorder(scorer=local).compress_documents(docs, QUESTION)
    assert [d.id for d in remote] == [d.id for d in ours]
    scores = [d.metadata["rag_position"]["score"] for d in (*remote, *ours)]
    np.testing.assert_allclose(scores[:n], scores[n:], atol=atol)
    assert sorted(d.id for d in remote) == sorted(d.id for d in docs)
    assert all("rag_position" not in d.metadata for d in docs)  # the inputs are not mutated
    n_orders = n - 1
    picked = LikelihoodReorder(scorer=llm, n_orders=n_orders).compress_documents(docs, QUESTION)
    same = LikelihoodReorder(scorer=local, n_orders=n_orders).compress_documents(docs, QUESTION)
    assert [d.id for d in picked] == [d.id for d in same]


def test_openai_classes_score_like_the_local_model_on_the_double(
    lc_server: ModelServer, lc_model: TransformersModel
) -> None:
    options = {"base_url": lc_server.url, "model": "smollm2", "api_key": "x", "max_retries": 0}
    chat, llm = ChatOpenAI(**options), OpenAI(**options)
    scores_like_local(chat, llm, lc_model, 3, 1e-3, lambda: lc_server.count("/v1/completions"))


def vllm_chat(server: Any, **kwargs: Any) -> ChatOpenAI:
    return ChatOpenAI(
        base_url=server.base_url, model=server.name, api_key="EMPTY", temperature=0, **kwargs
    )


def test_openai_classes_on_vllm_score_like_the_local_model(
    vllm_server: Any, lc_model: TransformersModel
) -> None:
    llm = OpenAI(base_url=vllm_server.base_url, model=vllm_server.name, api_key="EMPTY")
    scores_like_local(vllm_chat(vllm_server), llm, lc_model, 4, 1e-4)


def test_a_sandwich_chain_answers_through_vllm_like_the_local_model(
    vllm_server: Any, lc_store: Any, lc_model: TransformersModel
) -> None:
    retriever = PositionAwareRetriever(
        retriever=lc_store.as_retriever(search_kwargs={"k": 3}),
        strategy="convex_score",
        scorer=vllm_chat(vllm_server),
    )
    answer, text = sandwich_chain(retriever, vllm_chat(vllm_server, max_tokens=12))
    assert answer == lc_model.generate([text], max_new_tokens=12)[0]


# ---------------------------------------------------------------------- embeddings suite
class TestRagPositionEmbeddingsIntegration(EmbeddingsIntegrationTests):
    pytestmark: ClassVar[list[pytest.MarkDecorator]] = [pytest.mark.slow, *SUITE_MARKS]

    @pytest.fixture(autouse=True)
    def _embedder(self, lc_embedder: Any) -> None:
        self.embedder = lc_embedder

    @property
    def embeddings_class(self) -> type[RagPositionEmbeddings]:
        return RagPositionEmbeddings

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        return {"embedder": self.embedder}
