"""A query that is not a string reaches every compressor and the retriever as a TypeError
naming it, whatever the strategy and however many documents; nothing is scored."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.retrievers import BaseRetriever
from langchain_rag_position import (
    ConvexScoreReorder,
    EdgeReorder,
    LikelihoodReorder,
    PassageLikelihoodReorder,
    PositionAwareRetriever,
    ProfileReorder,
)
from lc_testkit import make_docs


class Untouchable:
    """A scorer that must not be called."""

    def score_spans(self, prompts: Sequence[str], spans: Sequence[Any]) -> list[Any]:
        raise AssertionError("the scorer was called with a malformed query")


COMPRESSORS: dict[str, Callable[[], BaseDocumentCompressor]] = {
    "ProfileReorder": lambda: ProfileReorder(profile=[0.2, 0.1, 0.3, 0.4, 0.5]),
    "LikelihoodReorder": lambda: LikelihoodReorder(scorer=Untouchable()),
    "ConvexScoreReorder": lambda: ConvexScoreReorder(scorer=Untouchable()),
    "PassageLikelihoodReorder": lambda: PassageLikelihoodReorder(scorer=Untouchable()),
    "EdgeReorder": lambda: EdgeReorder(),
}


@pytest.mark.parametrize("n_docs", [1, 5])
@pytest.mark.parametrize("query", [None, 42, b"Who?", ["Who?"]])
@pytest.mark.parametrize("name", sorted(COMPRESSORS))
def test_compressors_refuse_a_query_that_is_not_a_string(
    name: str, query: Any, n_docs: int
) -> None:
    with pytest.raises(TypeError, match=rf"{name}: the query must be a str, got"):
        COMPRESSORS[name]().compress_documents(make_docs(n_docs), query)


@pytest.mark.parametrize("name", ["LikelihoodReorder", "EdgeReorder"])
def test_async_compressors_refuse_it_too(name: str) -> None:
    with pytest.raises(TypeError, match="the query must be a str, got None"):
        asyncio.run(COMPRESSORS[name]().acompress_documents(make_docs(), None))  # type: ignore[arg-type]


class ListRetriever(BaseRetriever):
    docs: list[Document]

    def _get_relevant_documents(self, query: str, *, run_manager: object) -> list[Document]:
        return list(self.docs)


@pytest.mark.parametrize("strategy", ["edge", "profile"])
@pytest.mark.parametrize("query", [None, 42])
def test_retriever_refuses_a_query_that_is_not_a_string(strategy: str, query: Any) -> None:
    options = {"profile": [0.1, 0.2, 0.3]} if strategy == "profile" else {}
    retriever = PositionAwareRetriever(
        retriever=ListRetriever(docs=make_docs(3)), strategy=strategy, strategy_options=options
    )
    with pytest.raises(TypeError, match="PositionAwareRetriever: the query must be a str"):
        retriever.invoke(query)
    with pytest.raises(TypeError, match="PositionAwareRetriever: the query must be a str"):
        asyncio.run(retriever.ainvoke(query))
