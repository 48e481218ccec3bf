"""The test tiers (root conftest.py): a plain ``pytest`` runs the unit tier, ``--all``
everything (what CI runs), ``-m`` whatever it names; the README, ``.ci/run`` and
docs/development.md say the same."""

from __future__ import annotations

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


def test_ci_runs_the_readme_test_command_with_every_tier() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    command = "bash scripts/setup.sh --dev && .venv/bin/python -m pytest -q --all"
    assert f"```bash\n{command}\n```" in readme
    assert command in (ROOT / ".ci/run").read_text(encoding="utf-8")
    assert ".venv/bin/python -m pytest -q\n" in (ROOT / "docs/development.md").read_text(
        encoding="utf-8"
    )
