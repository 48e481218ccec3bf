"""kv, gauge, open-domain and swim with scripted models, and the CLI wrapper (fast)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import test_eval_runner as runner
from test_eval_runner import Scripted, write_gold_at_file

import rag_position.eval.cli as eval_cli
from rag_position.cli import main
from rag_position.eval import EvalConfigError
from rag_position.eval.tasks.gauge import run_gauge
from rag_position.eval.tasks.kv import generate_kv, kv_positions, run_kv
from rag_position.eval.tasks.open_domain import run_open_domain
from rag_position.eval.tasks.swim import run_swim


class ScriptedScorer(runner.ScriptedScorer):
    """Question likelihood 0 when the gold passage is at either end, -1 inside."""

    max_context = 2048


@pytest.fixture()
def data(tmp_path: Path) -> Path:
    return write_gold_at_file(tmp_path / "gold_at_3.jsonl", n=9)


def test_kv_sweep_reads_files_and_generates_others(tmp_path: Path) -> None:
    assert kv_positions(75) == [0, 24, 49, 74]
    assert kv_positions(140) == [0, 34, 69, 104, 139]
    assert kv_positions(300) == [0, 49, 99, 149, 199, 249, 299]
    path = tmp_path / "kv.jsonl"
    with path.open("w") as fout:
        for inst in generate_kv(6, 4, seed=1):
            records = [list(r) for r in inst.records]
            line = {"ordered_kv_records": records, "key": inst.key, "value": inst.value}
            fout.write(json.dumps(line) + "\n")
    result = run_kv(Scripted(), pairs=6, positions=[0, 3, 5], data=path, out=tmp_path / "a")
    acc = {(r["prompt"], r["position"]): r["accuracy"] for r in result.rows}
    assert acc == {(p, q): float(q == 0) for p in ("kv", "kv_query_aware") for q in (0, 3, 5)}
    generated = run_kv(Scripted(), pairs=8, questions=2, query_aware=(True,), out=tmp_path / "b")
    assert [r["position"] for r in generated.rows] == [0, 2, 4, 7]
    assert "generated(seed=0)" in generated.report.read_text()
    with pytest.raises(EvalConfigError, match="position 6 is outside the 6"):
        run_kv(Scripted(), pairs=6, positions=[6], data=path, out=tmp_path / "c")


def test_gauge_tertiles_and_instance_level(data: Path, tmp_path: Path) -> None:
    result = run_gauge(ScriptedScorer(), data=data, out=tmp_path)
    rows = {(r["strategy"], r["setting"]): r for r in result.rows}
    assert rows[("baseline", "docs=10 gold=4 prompt=qa")]["question_ll"] == -1.0
    assert rows[("instance", "highest-likelihood order")]["accuracy"] == 1.0
    assert rows[("instance", "lowest-likelihood order")]["accuracy"] == 0.0
    assert any(s == "tertile" for s, _ in rows)
    assert (tmp_path / "gauge-accuracy-and-likelihood.png").is_file()
    with pytest.raises(EvalConfigError, match="score_spans"):
        run_gauge(Scripted(), data=data, out=tmp_path)


def test_open_domain_recall_grows_with_k(data: Path, tmp_path: Path) -> None:
    result = run_open_domain(Scripted(), ks=[1, 5, 20], retriever="bm25", data=data, out=tmp_path)
    recall = [r["accuracy"] for r in result.rows if r["strategy"] == "retriever-recall"]
    reader = [r for r in result.rows if r["strategy"] == "reader"]
    assert len(recall) == 3 and recall == sorted(recall) and len(reader) == 3
    assert all(r["n"] == 9 for r in reader)
    with pytest.raises(EvalConfigError, match="exceeds the 90 passages"):
        run_open_domain(Scripted(), ks=[100], retriever="bm25", data=data, out=tmp_path)


def test_swim_depth_and_size(data: Path, tmp_path: Path) -> None:
    result = run_swim(ScriptedScorer(), budget=300, data=data, out=tmp_path)
    acc = {(r["test"], r["percent"]): r["accuracy"] for r in result.rows}
    assert acc[("depth", 0)] == acc[("depth", 100)] == 1.0 and acc[("depth", 50)] == 0.0
    assert acc[("size", 0)] == 1.0  # the answer document alone
    docs = {(r["test"], r["percent"]): r["documents"] for r in result.rows}
    assert docs[("size", 0)] == 1.0 < docs[("size", 50)] < docs[("size", 100)]
    with pytest.raises(EvalConfigError, match="--depths"):
        run_swim(ScriptedScorer(), budget=300, depths=[150], data=data, out=tmp_path)


def test_cli_wraps_the_tasks(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(eval_cli, "load_model", lambda spec: ScriptedScorer())
    out = str(tmp_path / "md")
    argv = ["eval", "multidoc", "--data", str(data), "--out", out, "--no-progress", "--sandwich"]
    assert main(argv) == 0
    assert "docs=10 gold=4 prompt=qa_query_aware" in capsys.readouterr().out
    argv = ["eval", "compare", "--data", str(data), "--no-progress", "--worst-position", "4"]
    argv += ["--strategies", "retriever,gold_first"]
    assert main([*argv, "--out", out]) == 2  # the multidoc run's folder: its report is kept
    assert "holds another run: multidoc" in capsys.readouterr().err
    assert main([*argv, "--out", str(tmp_path / "cmp")]) == 0
    assert "gold_first" in (tmp_path / "cmp" / "report.md").read_text()
    assert main(["eval", "multidoc", "--data", str(data), "--positions", "0,x"]) == 2
    assert "--positions: expected comma-separated integers" in capsys.readouterr().err
