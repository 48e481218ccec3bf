"""End to end on the embedded model: ``multidoc`` through the Python API and through the CLI."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import rag_position.eval.cli as eval_cli
import rag_position.models as models
from rag_position.cli import main
from rag_position.data import ORACLE_FILE, InstanceBuilder, default_data_dir
from rag_position.data.builder import CACHE_ENV
from rag_position.eval import run_multidoc

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("builder_cache")]


@pytest.fixture(scope="module")
def builder_cache(
    embedder: object, pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    """A private instance cache, seeded with the pool embeddings pytest's cache keeps (a minute)."""
    folder = tmp_path_factory.mktemp("eval-cache")
    builder = InstanceBuilder(default_data_dir() / ORACLE_FILE, embedder, cache_dir=folder)  # type: ignore[arg-type]
    cache = getattr(pytestconfig, "cache", None)
    kept = cache.mkdir("rag-position-pool") / builder.pool_cache_path.name if cache else None
    if kept is not None and kept.is_file():
        shutil.copyfile(kept, builder.pool_cache_path)
    builder.rankings(10, n_questions=2)
    if kept is not None and not kept.is_file() and builder.pool_cache_path.is_file():
        shutil.copyfile(builder.pool_cache_path, kept)  # (the packaged rankings need no pool)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(CACHE_ENV, str(folder))
        yield folder


def test_multidoc_python_api_and_cli(
    embedded_fp32: Any, embedder: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "api"
    result = run_multidoc(embedded_fp32, questions=1, max_new_tokens=3, out=out, embedder=embedder)
    positions = [f"docs=10 gold={gold} prompt=qa" for gold in (0, 4, 9)]
    assert [r["setting"] for r in result.rows] == [*positions, "closedbook", "oracle"]
    assert all(
        r["n"] == 1 and 0.0 <= r["ci_low"] <= r["accuracy"] <= r["ci_high"] <= 1.0
        for r in result.rows
    )
    assert all(r["lm_calls"] == 1.0 and r["generated_tokens"] <= 3 for r in result.rows)
    records = [json.loads(line) for line in result.predictions.read_text().splitlines()]
    assert len(records) == 5 and records[0]["model"].endswith("@float32")
    assert (out / "multidoc-accuracy-by-position.png").is_file()
    # The session's model stands in for a second 15-second load of the same weights.
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(eval_cli, "load_model", lambda spec: embedded_fp32)
        argv = ["eval", "multidoc", "--questions", "1", "--positions", "0,9"]
        argv += ["--max-new-tokens", "3", "--out", str(tmp_path / "cli"), "--no-progress"]
        assert main(argv) == 0
        printed = capsys.readouterr().out
        assert "docs=10 gold=9 prompt=qa" in printed and "report:" in printed
        summary = json.loads((tmp_path / "cli" / "summary.json").read_text())
        assert summary["command"] == "rag-position " + " ".join(argv)
        rows = summary["sections"][0]["rows"]
        assert [r["setting"] for r in rows] == [positions[0], positions[2], "closedbook", "oracle"]
        # A second run recomputes nothing: every prompt is already answered.
        before = embedded_fp32.usage
        assert main(argv) == 0
        assert embedded_fp32.usage == before
        argv[argv.index("0,9")] = "0,10"  # the same run (its folder holds it), a bad position
        assert main(argv) == 2
        assert "--positions: position 10 is outside the 10 passages" in capsys.readouterr().err


def test_demo_cli(
    embedded_fp32: object,
    embedder: object,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The session's model and embedder stand in for second loads of the same weights.
    monkeypatch.setattr(models, "load_model", lambda spec: embedded_fp32)
    monkeypatch.setattr(models, "load_embedder", lambda spec: embedder)
    assert main(["demo", "--positions", "0,9", "--max-new-tokens", "4"]) == 0
    lines = capsys.readouterr().out.splitlines()
    table = [row for row in map(str.split, lines) if len(row) > 2 and row[1] in {"yes", "no"}]
    assert [row[0] for row in table] == ["0", "9"]  # one row per gold position
    assert all(float(row[2]) < 0 for row in table)  # a mean log-probability
