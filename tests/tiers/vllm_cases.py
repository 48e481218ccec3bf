"""Run only by tests/test_tiers.py: under ``-n 2`` every test that uses a vLLM server
fixture must run in one worker (the root conftest.py's ``xdist_group``)."""

import os
from pathlib import Path

import pytest


@pytest.fixture
def vllm_server() -> str:
    """Named as the root conftest.py's session server (VLLM_FIXTURES): says the worker."""
    return os.environ.get("PYTEST_XDIST_WORKER", "")


@pytest.mark.parametrize("i", range(8))
def test_served(vllm_server: str, i: int) -> None:
    out = Path(os.environ["RAG_POSITION_TIERS_OUT"])
    (out / f"{i}").write_text(f"{vllm_server} {os.environ.get('OMP_NUM_THREADS')}")
