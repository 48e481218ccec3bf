"""The session's exit (root conftest.py) keeps pytest's exit status and summary."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CASES = "tests/exit_status/cases.py"


def _pytest(case: str, *extra: str, finalize: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EXIT_STATUS_CASE": case}
    env.pop("RAG_POSITION_TEST_FINALIZE", None)
    if finalize:
        env["RAG_POSITION_TEST_FINALIZE"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize(
    ("case", "status", "summary"), [("pass", 0, "2 passed"), ("fail", 1, "1 failed, 1 passed")]
)
def test_exit_status_and_summary_survive_the_fast_exit(
    case: str, status: int, summary: str
) -> None:
    run = _pytest(case, CASES)
    assert run.returncode == status, run.stdout + run.stderr
    assert summary in run.stdout, run.stdout
    assert "interpreter finalization ran" not in run.stderr  # left by os._exit


def test_finalize_switch_keeps_the_normal_exit() -> None:
    run = _pytest("fail", CASES, finalize=True)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "interpreter finalization ran" in run.stderr


def test_no_tests_collected_keeps_its_status() -> None:
    run = _pytest("pass", CASES, "-k", "no_such_test")
    assert run.returncode == 5, run.stdout + run.stderr  # pytest's NO_TESTS_COLLECTED


def test_usage_errors_are_still_printed() -> None:
    run = _pytest("pass", "tests/exit_status/no_such_file.py")
    assert run.returncode == 4, run.stdout + run.stderr  # pytest's USAGE_ERROR
    assert "file or directory not found" in run.stderr, run.stderr
