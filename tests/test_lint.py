"""The codebase stays ruff-clean (rules and formatting in pyproject.toml; ruff pinned in [dev])."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("args", [["check"], ["format", "--check"]], ids=["check", "format"])
def test_ruff(args: list[str]) -> None:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is not installed: bash scripts/setup.sh --dev"
    done = subprocess.run([ruff, *args, "."], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
