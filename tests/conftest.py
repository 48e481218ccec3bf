"""Shared fixtures: the embedded model and embedder, each loaded once per test session."""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def embedded_fp32() -> Iterator[object]:
    """SmolLM2-135M-Instruct in float32, chat template on (as load_model gives it)."""
    from rag_position.models import load_model

    yield load_model("embedded", dtype="float32")


@pytest.fixture(scope="session")
def embedded_bf16(embedded_fp32: object) -> object:
    """The same weights in bfloat16 (a copy of the float32 model, not a second load)."""
    from rag_position.models.transformers_backend import TransformersModel

    src = embedded_fp32
    assert isinstance(src, TransformersModel)
    model = copy.deepcopy(src.model).to(torch.bfloat16)
    return TransformersModel(model, src.tokenizer, name=src.name + "@bf16")


@pytest.fixture(scope="session")
def embedded_raw(embedded_fp32: object) -> object:
    """The float32 weights with the chat template off (shares the weights)."""
    from rag_position.models.transformers_backend import TransformersModel

    src = embedded_fp32
    assert isinstance(src, TransformersModel)
    return TransformersModel(src.model, src.tokenizer, name=src.name, chat_template=False)


@pytest.fixture(scope="session")
def embedder() -> object:
    from rag_position.models import load_embedder

    return load_embedder("embedded")


@pytest.fixture(scope="module")
def data_dir() -> Path:
    """The packaged data files (no $RAG_POSITION_DATA in the tests)."""
    from rag_position.data import default_data_dir

    return default_data_dir()
