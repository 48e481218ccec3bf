"""``eval quick`` shows the embedded model's 200-question reference beside its rows, or why not."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_eval_runner import ScriptedScorer, write_gold_at_file

from rag_position.data import packaged_data_dir
from rag_position.eval import run_quick
from rag_position.eval.rows.catalog import available_strategies
from rag_position.eval.tasks.reference import REFERENCE_FILE, REFERENCE_HEADER, load_reference

ROOT = Path(__file__).resolve().parents[1]


class Embedded(ScriptedScorer):
    """The scripted scorer under the embedded model's label (``@bfloat16``, as by default)."""

    name = "embedded:SmolLM2-135M-Instruct"
    dtype = "torch.bfloat16"


def table_line(report: str, first: str) -> list[str]:
    found = [line for line in report.splitlines() if line.startswith(f"| {first} |")]
    assert len(found) == 1, (first, found)
    return cells(found[0])


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def within(old: list[str], new: list[str]) -> bool:
    """``new`` holds ``old``'s cells in order, and more."""
    rest = iter(new)
    return len(new) > len(old) and all(any(c == n for n in rest) for c in old)


def test_the_packaged_reference_is_what_the_script_makes_of_the_results(tmp_path: Path) -> None:
    out = tmp_path / REFERENCE_FILE
    argv = [sys.executable, "scripts/make_reference.py", "--out", str(out)]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert out.read_text() == (packaged_data_dir() / REFERENCE_FILE).read_text()
    payload = json.loads(out.read_text())
    assert payload["model"] == "embedded:SmolLM2-135M-Instruct@float32"
    rows = {(r["source"], r["label"]): r for r in payload["rows"]}
    # the README's figures (results/README.md, docs/measurements.md)
    assert rows[("results/ucurve200", "gold at 9")]["accuracy"] == 0.295
    edge = rows[("results/compare200", "edge")]
    assert (edge["accuracy"], edge["wins"], edge["losses"]) == (0.165, 20, 14)
    assert rows[("results/compare200", "langchain_reorder")]["same_as"] == "edge"
    selected = rows[("results/select200", "select_and_place")]
    assert (selected["versus"], selected["n"], selected["accuracy"]) == ("retriever", 200, 0.455)


def test_quick_on_the_embedded_model_shows_the_reference_beside_each_row(tmp_path: Path) -> None:
    result = run_quick(Embedded(), questions=2, out=tmp_path / "q", progress=False)
    report = result.report.read_text()
    reference = load_reference()
    assert f"| setting | n | accuracy | {REFERENCE_HEADER} |" in report
    gold4 = result.row(task="multidoc", setting="docs=10 gold=4 prompt=qa")
    assert reference.accuracy_cell(gold4) == "9.0 [5.5, 13.0]"
    assert table_line(report, "gold at 4")[1:] == ["2", "0.0 [0.0, 0.0]", "9.0 [5.5, 13.0]"]
    assert table_line(report, "oracle")[-1] == "48.5 [41.5, 55.5]"
    headers = table_line(report, "strategy")
    assert headers[3:5] == ["accuracy", REFERENCE_HEADER]
    assert headers[-2:] == ["vs retriever: won/lost (p)", "reference vs retriever: won/lost (p)"]
    selected = table_line(report, "select_and_place")
    assert selected[4] == "45.5 [38.5, 52.0]" and selected[-1] == "69/5 (<0.001)"
    assert table_line(report, "retriever")[-2:] == ["--", "--"]  # the row the others pair with
    assert table_line(report, "edge")[4] == "16.5 [11.5, 21.5]"
    assert "`results/ucurve200/`: `rag-position eval multidoc --docs 10 --questions 200`" in report
    assert "`results/select200/` (select_and_place)" in report
    assert "this run is in bfloat16" in report
    assert "this run's 95% intervals (2 questions) are up to" in report
    assert "passage_likelihood_profile (reference): placed by the 200-question profile" in report
    # the summary rows keep their keys: the reference is in the report only
    assert not [k for row in result.rows for k in row if "reference" in k]


@pytest.mark.parametrize(
    ("model", "options", "why"),
    [
        (ScriptedScorer, {}, "it is the embedded model's, not `scripted`'s"),
        (Embedded, {"seed": 1}, "it was measured with seed 0; this run: --seed 1"),
        (Embedded, {"data": "own"}, "this run has other data or another embedder"),
    ],
)
def test_quick_shows_no_reference_where_it_does_not_fit(
    model: Any, options: dict[str, Any], why: str, tmp_path: Path
) -> None:
    if options.get("data") == "own":
        options = {"data": write_gold_at_file(tmp_path / "own.jsonl", n=2)}
    strategies = ["retriever", "edge"]
    options = {"questions": 2, "strategies": strategies, "progress": False, **options}
    result = run_quick(model(), out=tmp_path / "q", **options)
    report = result.report.read_text()
    assert f"| {REFERENCE_HEADER} |" not in report
    assert "reference vs retriever" not in report
    assert f"no `{REFERENCE_HEADER}` column" in report and why in report
    assert "run's 95% intervals (2 questions) are up to" in report


class Replay:
    """The embedded model's label on a model never asked: all comes from the predictions."""

    name = "embedded:SmolLM2-135M-Instruct"
    dtype = "float32"

    def generate(self, prompts: Any, **kwargs: Any) -> list[str]:
        raise AssertionError(f"asked to generate {len(prompts)} answers")

    def score_spans(self, prompts: Any, spans: Any) -> list[Any]:
        raise AssertionError(f"asked to score {len(prompts)} prompts")

    def count_tokens(self, text: str) -> int:
        raise AssertionError("asked to count tokens")


def test_the_committed_quick_run_keeps_its_figures_and_gains_the_reference(tmp_path: Path) -> None:
    committed = ROOT / "results" / "quick-f32"
    before = json.loads((committed / "summary.json").read_text())
    run = before["sections"][1]["settings"]["strategies"]
    missing = set(run) - set(available_strategies())
    if missing:
        pytest.skip(f"not installed: {sorted(missing)} (scripts/setup.sh --dev)")
    out = tmp_path / "quick-f32"
    out.mkdir()
    with gzip.open(committed / "predictions.jsonl.gz", "rt", encoding="utf-8") as fin:
        (out / "predictions.jsonl").write_text(fin.read(), encoding="utf-8")
    result = run_quick(Replay(), out=out, progress=False, batch_size=8)
    assert result.rows == [r for s in before["sections"] for r in s["rows"]]
    old = (committed / "report.md").read_text().splitlines()
    new = result.report.read_text().splitlines()
    tables = [cells(n) for n in new if n.startswith("| ")]
    start = old.index("## Multi-document QA: accuracy by gold position, 10 passages")
    for line in old[start:]:  # the sections: as before, or a table line with cells added
        assert line in new or any(within(cells(line), t) for t in tables), line
    assert table_line(result.report.read_text(), "gold at 9")[1:] == [
        "10", "30.0 [0.0, 60.0]", "29.5 [23.0, 36.0]"
    ]  # fmt: skip
    assert "this run is in" not in result.report.read_text()  # float32, as the reference
