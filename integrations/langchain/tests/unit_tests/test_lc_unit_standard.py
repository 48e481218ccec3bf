"""LangChain's standard test suites (langchain-tests) on our components, offline.

The chat model and embeddings unit suites construct the classes without loading a
model (spec strings load on first use). The retriever suite runs the edge strategy
over an in-memory list retriever; the real-model variants are in integration_tests.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_rag_position import ChatRagPosition, PositionAwareRetriever, RagPositionEmbeddings
from langchain_tests.integration_tests import RetrieversIntegrationTests
from langchain_tests.unit_tests import ChatModelUnitTests, EmbeddingsUnitTests
from lc_testkit import make_docs


class ListRetriever(BaseRetriever):
    """Returns its documents in order (a stand-in for a vector store)."""

    docs: list[Document]

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        return list(self.docs)


class TestChatRagPositionUnit(ChatModelUnitTests):
    @property
    def chat_model_class(self) -> type[ChatRagPosition]:
        return ChatRagPosition

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return {"model": "embedded"}


class TestRagPositionEmbeddingsUnit(EmbeddingsUnitTests):
    @property
    def embeddings_class(self) -> type[RagPositionEmbeddings]:
        return RagPositionEmbeddings


class TestPositionAwareRetrieverEdge(RetrieversIntegrationTests):
    # The suite's async test is not marked; the root config runs pytest-asyncio strict.
    pytestmark: ClassVar[list[pytest.MarkDecorator]] = [
        pytest.mark.asyncio,
        pytest.mark.filterwarnings("ignore:The test <Function:pytest.PytestWarning"),
    ]

    @property
    def retriever_constructor(self) -> type[PositionAwareRetriever]:
        return PositionAwareRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"retriever": ListRetriever(docs=make_docs(5)), "strategy": "edge"}

    @property
    def retriever_query_example(self) -> str:
        return "What is the capital of France?"
