"""Shared fixtures of the LlamaIndex tests: the embedded model and embedder, loaded once per
session; the network closed but 127.0.0.1 (pytest-socket), so no hub or mirror is reached."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from li_testkit import DOCS
from llama_index.core import Document, VectorStoreIndex


@pytest.fixture(autouse=True)
def _li_no_network() -> Iterator[None]:
    """Only 127.0.0.1 is reachable while a test runs (fixtures set up before it are not held)."""
    try:
        import pytest_socket
    except ImportError:  # the guard is an extra safety net, not what the tests assert
        yield
        return
    pytest_socket.socket_allow_hosts(["127.0.0.1", "localhost", "::1"], allow_unix_socket=True)
    try:
        yield
    finally:
        pytest_socket.enable_socket()
        pytest_socket._remove_restrictions()


@pytest.fixture(autouse=True)
def _li_one_torch_thread() -> Iterator[None]:
    """One torch thread (restored after): two, beside another process, ran 10x slower."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture(scope="session")
def li_model() -> Any:
    """SmolLM2-135M-Instruct, float32 (exact comparisons), chat template on."""
    from rag_position.models import load_model

    return load_model("embedded", dtype="float32")


@pytest.fixture(scope="session")
def li_llm(li_model: Any) -> Any:
    """The embedded model as a LlamaIndex LLM (short answers)."""
    from llama_index.postprocessor.rag_position import RagPositionLLM

    return RagPositionLLM(li_model, max_new_tokens=16)


@pytest.fixture(scope="session")
def li_embed_model() -> Any:
    """all-MiniLM-L6-v2 as a LlamaIndex embedding model."""
    from llama_index.postprocessor.rag_position import RagPositionEmbedding

    return RagPositionEmbedding("embedded")


@pytest.fixture(scope="session")
def li_index(li_embed_model: Any) -> VectorStoreIndex:
    """An in-memory VectorStoreIndex of :data:`DOCS`, titles in the metadata."""
    docs = [
        Document(text=t, metadata={"title": h}, id_=f"doc-{i}") for i, (h, t) in enumerate(DOCS)
    ]
    return VectorStoreIndex.from_documents(docs, embed_model=li_embed_model)
