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
