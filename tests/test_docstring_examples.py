"""The ``>>>`` examples in the public docstrings run and print what they show.

Only modules whose examples need no model, embedder or data file (those that do are
``Example::`` blocks, not run); ``ILLUSTRATIVE`` ``>>>`` examples on a model are skipped.
"""

from __future__ import annotations

import doctest
import importlib
import io

import pytest

MODULES = [
    "rag_position._jsonfile", "rag_position.strategies._align", "rag_position.strategies._base",
    "rag_position.strategies._convex_score", "rag_position.strategies._edge_reorder",
    "rag_position.strategies._profile_reorder", "rag_position.strategies.registry",
    "rag_position.strategies._sandwich", "rag_position.models.protocols", "rag_position.cost",
    "rag_position.models.devices", "rag_position.models.prefix_cache", "rag_position.eval.cli",
    "rag_position.eval.engine.common", "rag_position.eval.tasks.kv",
    "rag_position.eval.engine.marker", "rag_position.eval.tasks.reference",
    "rag_position.eval.engine.report", "rag_position.eval.engine.runner",
    "rag_position.eval.engine.stats", "rag_position.eval.rows.catalog",
    "rag_position.data.builder", "rag_position.data.loaders", "rag_position.data.metrics",
]  # fmt: skip

ILLUSTRATIVE = {
    "rag_position.strategies._convex_score.convex_score": "scores with a model",
    "rag_position.data.builder.InstanceBuilder": "reads the data files, loads an embedder",
}  # docstrings whose ``>>>`` lines show a call on a model or the data files (not run)


def _doctests(module_name: str) -> list[doctest.DocTest]:
    # importlib, not attribute access: `rag_position.strategies._sandwich` is also a function
    module = importlib.import_module(module_name)
    found = doctest.DocTestFinder().find(module)
    return sorted((t for t in found if t.examples), key=lambda t: t.name)


@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples(module_name: str) -> None:
    tests = [t for t in _doctests(module_name) if t.name not in ILLUSTRATIVE]
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    report = io.StringIO()
    for test in tests:
        runner.run(test, out=report.write)
    results = runner.summarize(verbose=False)
    assert results.attempted > 0, f"{module_name} has no docstring examples to run"
    assert results.failed == 0, report.getvalue()


def test_illustrative_names_exist() -> None:
    """Every skipped name still has ``>>>`` lines (the skip list does not go stale)."""
    names = {t.name for m in MODULES for t in _doctests(m)}
    assert set(ILLUSTRATIVE) <= names, sorted(set(ILLUSTRATIVE) - names)
