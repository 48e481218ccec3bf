"""The documentation site builds with warnings as errors (mkdocs.yml, docs/).

A broken link between pages or to a repository file, a missing anchor, a page left out
of the nav, or a docstring the API reference cannot render fails the build, and so this
test, with MkDocs' output.
"""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.lint  # pytest --all, as CI runs it

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = {  # docs/reference/<page>.md: the module it documents
    "rag_position": "rag_position",
    "strategies": "rag_position.strategies",
    "eval": "rag_position.eval",
    "data": "rag_position.data",
    "models": "rag_position.models",
    "langchain": "langchain_rag_position",
    "llama_index": "llama_index.postprocessor.rag_position",
}


def test_the_docs_build_strict(tmp_path: Path) -> None:
    for module in ("mkdocs", "mkdocstrings_handlers.python"):
        assert importlib.util.find_spec(module), f"{module} missing: bash scripts/setup.sh --dev"
    site = tmp_path / "site"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(ROOT / "mkdocs.yml"),
            "--site-dir",
            str(site),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    # the API reference is made from the docstrings: every name each module exports
    for page, name in REFERENCE.items():
        html = (site / "reference" / page / "index.html").read_text(encoding="utf-8")
        exported = importlib.import_module(name).__all__
        missing = [n for n in exported if f'id="{name}.{n}"' not in html]
        assert not missing, f"docs/reference/{page}.md does not document {missing}"
    # a report the measurements link to is copied beside the pages (docs/hooks/repo_files.py)
    assert (site / "repo" / "results" / "quick" / "report.md").is_file()
