"""The session's exit (root conftest.py) keeps pytest's exit status and summary."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CASES = "tests/exit_status/cases.py"
RUNS = [  # EXIT_STATUS_CASE, pytest's arguments, RAG_POSITION_TEST_FINALIZE, status, out, err
    ("pass", [CASES], "", 0, "2 passed", ""),
    ("fail", [CASES], "", 1, "1 failed, 1 passed", ""),
    ("fail", [CASES], "1", 1, "", ""),  # the switch keeps the normal exit
    ("pass", [CASES, "-k", "no_such_test"], "", 5, "", ""),  # NO_TESTS_COLLECTED
    ("pass", ["tests/exit_status/no_such_file.py"], "", 4, "", "file or directory not found"),
]


@pytest.mark.parametrize(
    ("case", "args", "finalize", "status", "out", "err"),
    RUNS,
    ids=["pass", "fail", "finalize", "no-tests", "usage-error"],
)
def test_exit_status_and_summary_survive_the_fast_exit(
    case: str, args: list[str], finalize: str, status: int, out: str, err: str
) -> None:
    env = {**os.environ, "EXIT_STATUS_CASE": case, "RAG_POSITION_TEST_FINALIZE": finalize}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == status, run.stdout + run.stderr
    assert out in run.stdout and err in run.stderr, run.stdout + run.stderr
    # printed at interpreter finalization, which os._exit skips
    assert ("interpreter finalization ran" in run.stderr) == (finalize == "1"), run.stderr
