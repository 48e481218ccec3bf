"""Run only by tests/test_tiers.py (the name keeps it out of normal collection)."""

import pytest


def test_unit() -> None:
    pass


@pytest.mark.slow
def test_slow() -> None:
    pass


@pytest.mark.lint
def test_lint() -> None:
    pass


@pytest.fixture
def embedder() -> None:
    """Named as a real-model fixture of the root conftest.py (REAL_MODEL_FIXTURES)."""


def test_uses_a_model_fixture(embedder: None) -> None:
    pass
