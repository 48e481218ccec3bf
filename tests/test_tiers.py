"""The test tiers (root conftest.py): a plain ``pytest`` runs the unit tier, ``--all``
everything (what CI runs), ``-m`` whatever it names; the README, ``.ci/run`` and
docs/development.md say the same."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CASES = "tests/tiers/cases.py"


@pytest.mark.parametrize(
    ("extra", "ran"),
    [
        ([], ["test_unit"]),
        (["--all"], ["test_unit", "test_slow", "test_lint", "test_uses_a_model_fixture"]),
        (["-m", "slow"], ["test_slow", "test_uses_a_model_fixture"]),
    ],
    ids=["plain", "all", "m-slow"],
)
def test_a_plain_run_is_the_unit_tier(extra: list[str], ran: list[str]) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", CASES, *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    passed = [line.split("::")[1].split()[0] for line in lines if " PASSED" in line]
    assert passed == ran, run.stdout


def test_under_xdist_the_served_tests_share_one_worker_with_its_share_of_the_cores(
    tmp_path: Path,
) -> None:
    """``-n 2``: the tests using a vLLM server run in one worker (one server at a time;
    pytest-xdist's loadgroup, which pytest 9.2 broke: pytest-xdist #1386), each worker
    with one torch thread a core it has."""
    env = {k: v for k, v in os.environ.items() if "THREADS" not in k and "XDIST" not in k}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--all",
         "tests/tiers/vllm_cases.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**env, "RAG_POSITION_TIERS_OUT": str(tmp_path)},
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    said = [p.read_text() for p in tmp_path.iterdir()]
    threads = max(1, (os.cpu_count() or 1) // 2)
    assert len(said) == 8 and len(set(said)) == 1, said  # one worker, one thread count
    assert said[0].split()[1] == str(threads), said


def test_ci_runs_the_readme_test_command_with_every_tier() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    command = "bash scripts/setup.sh --dev && .venv/bin/python -m pytest -q --all -n 2"
    assert f"```bash\n{command}\n```" in readme
    assert command in (ROOT / ".ci/run").read_text(encoding="utf-8")
    assert ".venv/bin/python -m pytest -q\n" in (ROOT / "docs/development.md").read_text(
        encoding="utf-8"
    )
