"""LangChain's own OpenAI classes pointed at a real vLLM server, through our components.

The server is the session's ``vllm_server`` (the repository's conftest.py starts it with
``rag-position serve``); skipped, with the reason in the summary, where vLLM is missing.
The local reference is the same weights in float32: the raw prompt for scoring (what a
completions endpoint scores), the chat template for chat answers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from langchain_core.output_parsers import StrOutputParser
from langchain_core.runnables import RunnablePassthrough
from langchain_openai import ChatOpenAI, OpenAI
from langchain_rag_position import (
    ConvexScoreReorder,
    LikelihoodReorder,
    PositionAwareRetriever,
    QuerySandwich,
)
from lc_testkit import QUESTION, make_docs

from rag_position.models.transformers_backend import TransformersModel

pytestmark = pytest.mark.slow


def _chat(server: Any, **kwargs: Any) -> ChatOpenAI:
    return ChatOpenAI(
        base_url=server.base_url, model=server.name, api_key="EMPTY", temperature=0, **kwargs
    )


def test_chat_openai_on_vllm_reorders_like_the_local_model(
    vllm_server: Any, lc_model: TransformersModel
) -> None:
    raw = TransformersModel(lc_model.model, lc_model.tokenizer, name="raw", chat_template=False)
    docs = make_docs(4)
    remote = ConvexScoreReorder(scorer=_chat(vllm_server)).compress_documents(docs, QUESTION)
    local = ConvexScoreReorder(scorer=raw).compress_documents(docs, QUESTION)
    assert [d.id for d in remote] == [d.id for d in local]
    key = "rag_position"
    np.testing.assert_allclose(
        [d.metadata[key]["score"] for d in remote],
        [d.metadata[key]["score"] for d in local],
        atol=1e-4,
    )
    assert sorted(d.id for d in remote) == sorted(d.id for d in docs)
    assert all("rag_position" not in d.metadata for d in docs)  # the inputs are not mutated
    llm = OpenAI(base_url=vllm_server.base_url, model=vllm_server.name, api_key="EMPTY")
    picked = LikelihoodReorder(scorer=llm, n_orders=3).compress_documents(docs, QUESTION)
    same = LikelihoodReorder(scorer=raw, n_orders=3).compress_documents(docs, QUESTION)
    assert [d.id for d in picked] == [d.id for d in same]


def test_a_sandwich_chain_answers_through_vllm_like_the_local_model(
    vllm_server: Any, lc_store: Any, lc_model: TransformersModel
) -> None:
    retriever = PositionAwareRetriever(
        retriever=lc_store.as_retriever(search_kwargs={"k": 3}),
        strategy="convex_score",
        scorer=_chat(vllm_server),
    )
    chat = _chat(vllm_server, max_tokens=12)
    prompts: list[Any] = []
    chain = (
        {"documents": retriever, "question": RunnablePassthrough()}
        | QuerySandwich()
        | (lambda p: prompts.append(p) or p)
        | chat
        | StrOutputParser()
    )
    answer = chain.invoke(QUESTION)
    text = prompts[0].to_messages()[0].content
    assert text.count(f"Question: {QUESTION}") == 2
    assert answer == lc_model.generate([text], max_new_tokens=12)[0]
