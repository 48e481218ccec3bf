"""A query that is not a string reaches the retriever as a TypeError naming it, whatever
the strategy (the compressors' refusal is tested for both frameworks in
``tests/test_components_bad_input.py``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_rag_position import PositionAwareRetriever
from lc_testkit import make_docs


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
