"""LangChain's standard test suites (langchain-tests) on our components, offline: spec
strings load on first use, so no model loads; the real-model variants are in
integration_tests."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from langchain_rag_position import ChatRagPosition, PositionAwareRetriever, RagPositionEmbeddings
from langchain_tests.integration_tests import RetrieversIntegrationTests
from langchain_tests.unit_tests import ChatModelUnitTests, EmbeddingsUnitTests
from lc_testkit import QUESTION, SUITE_MARKS, ListRetriever, make_docs


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
    pytestmark: ClassVar[list[pytest.MarkDecorator]] = SUITE_MARKS

    @property
    def retriever_constructor(self) -> type[PositionAwareRetriever]:
        return PositionAwareRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"retriever": ListRetriever(docs=make_docs(5)), "strategy": "edge"}

    @property
    def retriever_query_example(self) -> str:
        return QUESTION
