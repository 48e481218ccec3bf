"""The codebase stays ruff-clean (rules and formatting in pyproject.toml; ruff pinned in [dev])."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from dev_cache import dev_cache

pytestmark = pytest.mark.lint  # pytest --all, as CI runs it

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("args", [["check"], ["format", "--check"]], ids=["check", "format"])
def test_ruff(args: list[str]) -> None:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is not installed: bash scripts/setup.sh --dev"
    # --no-cache: ruff's cache keeps a file's old verdict when only the modules it imports
    # moved (CI, in a fresh clone, has no cache and saw an import block this missed)
    done = subprocess.run(
        [ruff, *args, "--no-cache", "."], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


MYPY_TARGETS = {
    "core": (ROOT, []),  # [tool.mypy] packages in pyproject.toml
    "langchain": (ROOT / "integrations/langchain", ["--strict", "-p", "langchain_rag_position"]),
    "llama_index": (
        ROOT / "integrations/llama_index",
        ["--strict", "--explicit-package-bases", "-p", "llama_index.postprocessor.rag_position"],
    ),
}


@pytest.mark.parametrize("target", list(MYPY_TARGETS))
def test_mypy_strict(target: str) -> None:
    """The core and both integrations type-check under mypy --strict (mypy pinned in [dev])."""
    cwd, args = MYPY_TARGETS[target]
    done = subprocess.run(
        [sys.executable, "-m", "mypy", *args, "--cache-dir", str(_mypy_cache(target))],
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _mypy_cache(target: str) -> Path:
    """mypy's incremental cache, kept outside the checkout (``$MYPY_CACHE_DIR``, else the
    user's cache folder): a fresh clone, as CI runs, then rechecks only what changed
    (measured on this 2-core CPU: the core 107 s cold, 6 s from a clone at another path).
    mypy compares each module's source hash, so a cache never hides a change."""
    if os.environ.get("MYPY_CACHE_DIR"):
        return Path(os.environ["MYPY_CACHE_DIR"]) / target
    return dev_cache("mypy") / target
