"""Every cookbook notebook runs top to bottom on the embedded models (small setting).

Notebooks are stored without outputs; this test executes each one in a fresh kernel
with ``COOKBOOK_QUESTIONS=1``, ``COOKBOOK_DOCS=5`` and ``COOKBOOK_MAX_NEW_TOKENS=16`` (and a
short haystack for the long-input notebook), writing its runs under a temporary folder,
and fails on the first cell that raises.
"""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="bash scripts/setup.sh --dev installs it")
nbclient = pytest.importorskip("nbclient", reason="bash scripts/setup.sh --dev installs it")

HERE = Path(__file__).resolve().parent
NOTEBOOKS = sorted(HERE.glob("*.ipynb"))

pytestmark = pytest.mark.slow


def test_notebooks_are_found_and_stored_without_outputs() -> None:
    assert [p.name[:3] for p in NOTEBOOKS] == ["01_", "02_", "03_", "04_", "05_"], NOTEBOOKS
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        first_code = next(c for c in nb.cells if c.cell_type == "code")
        assert "COOKBOOK_MODEL" in first_code.source, f"{path.name}: how to switch models"
        for name in ("COOKBOOK_QUESTIONS", "COOKBOOK_RESULTS"):  # small by default, 200 read
            assert name in first_code.source or path.name[:3] not in ("01_", "05_"), path.name
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, path.name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COOKBOOK_QUESTIONS", "1")
    monkeypatch.setenv("COOKBOOK_DOCS", "5")
    monkeypatch.setenv("COOKBOOK_MAX_NEW_TOKENS", "16")
    monkeypatch.setenv("COOKBOOK_TOKENS", "400")
    monkeypatch.setenv("COOKBOOK_OUT", str(tmp_path / "runs"))
    monkeypatch.setenv("COOKBOOK_RESULTS", str(HERE.parent / "results"))  # run from tmp_path
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("TQDM_DISABLE", "1")
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=900,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    errors = [
        out
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.outputs
        if out.get("output_type") == "error"
    ]
    assert not errors
