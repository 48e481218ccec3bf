"""Shared fixtures of the langchain-rag-position tests: the embedded model and embedder,
loaded once per session when a test asks (from installed packages, no network)."""

from __future__ import annotations

import os
from typing import Any

import pytest
from lc_testkit import make_docs

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def lc_model() -> Any:
    """SmolLM2-135M-Instruct (float32, chat template on), loaded once."""
    from rag_position.models import load_model

    return load_model("embedded", dtype="float32")


@pytest.fixture(scope="session")
def lc_embedder() -> Any:
    """all-MiniLM-L6-v2 from its installed package, loaded once."""
    from rag_position.models import load_embedder

    return load_embedder("embedded")


@pytest.fixture(scope="session")
def lc_chat(lc_model: Any) -> Any:
    """ChatRagPosition over the session's embedded model, short replies."""
    from langchain_rag_position import ChatRagPosition

    return ChatRagPosition(model=lc_model, max_tokens=10)


@pytest.fixture(scope="session")
def lc_embeddings(lc_embedder: Any) -> Any:
    from langchain_rag_position import RagPositionEmbeddings

    return RagPositionEmbeddings(embedder=lc_embedder)


@pytest.fixture(scope="session")
def lc_store(lc_embeddings: Any) -> Any:
    """An InMemoryVectorStore of the five FACTS documents, embedded for real."""
    from langchain_core.vectorstores import InMemoryVectorStore

    store = InMemoryVectorStore(lc_embeddings)
    store.add_documents(make_docs(5))
    return store
