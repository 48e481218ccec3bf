"""``rag-position tune``: measure on unreported questions, choose within a budget, save it."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from test_eval_runner import ScriptedScorer, write_gold_at_file

from rag_position import load_tuned, read_tuned
from rag_position._integration import component_of
from rag_position.cli import main
from rag_position.eval import EvalConfigError, run_tune
from rag_position.eval.cli import tune_paths
from rag_position.eval.tasks.tune import TUNE_SKIP, TUNE_STRATEGIES, check_candidates
from rag_position.eval.tasks.tune_choice import choose
from rag_position.models.loading import spec_of
from rag_position.strategies import STRATEGIES
from rag_position.tuned import TunedChoice


def _row(name: str, accuracy: float, tokens: float, n: int = 60) -> dict[str, object]:
    return {
        "strategy": name, "n": n, "accuracy": accuracy, "ci_low": accuracy - 0.1,
        "ci_high": accuracy + 0.1, "prompt_tokens": tokens, "generated_tokens": 0.0,
    }  # fmt: skip


# ---------------------------------------------------------------------- the rule
@pytest.mark.parametrize(
    ("a", "b", "budget", "tie", "chosen"),
    [
        ((0.35, 2000), (0.5, 2500), None, 2.0, "b"),  # the most accurate within the budget
        ((0.35, 2000), (0.5, 3500), 4000, 2.0, "b"),
        ((0.40, 2500), (0.39, 1500), None, 2.0, "b"),  # 1 point behind, 1,000 tokens less
        ((0.40, 2500), (0.39, 1500), None, 0.5, "a"),  # not within half a point
        ((0.40, 2500), (0.37, 1500), None, 2.0, "a"),  # 3 points behind: not a tie
        ((0.1, 2000), (0.15, 1500), None, 2.0, "retriever"),  # nothing beats it
    ],
)
def test_the_most_accurate_candidate_within_the_budget_wins_cost_breaking_near_ties(
    a: tuple[float, float], b: tuple[float, float], budget: float | None, tie: float, chosen: str
) -> None:
    rows = [_row("retriever", 0.2, 1000), _row("a", *a), _row("b", *b)]
    assert choose(rows, budget=budget, tie=tie)[0] == chosen


def test_a_candidate_over_the_budget_is_measured_but_not_chosen() -> None:
    rows = [_row("retriever", 0.2, 1000), _row("a", 0.35, 2000), _row("b", 0.5, 3500)]
    chosen, evidence, notes = choose(rows, budget=None, tie=2.0)  # 3x the retriever's: 3000
    assert chosen == "a"
    assert [e["accuracy"] for e in evidence] == [20.0, 35.0, 50.0]
    assert [e["eligible"] for e in evidence] == [True, True, False]
    assert "over it, not chosen: b" in notes[0]


# ---------------------------------------------------------------------- candidates
def test_candidates_are_orderings_with_a_component_and_the_retriever_first() -> None:
    assert check_candidates(None) == list(TUNE_STRATEGIES)
    with pytest.raises(EvalConfigError, match=r"unknown 'gold_last'.*passage_likelihood"):
        check_candidates(["gold_last"])  # the message lists the rows
    assert check_candidates(["edge", "retriever"]) == ["retriever", "edge"]
    for name in TUNE_STRATEGIES[1:]:
        base = name.split(":")[0]
        assert component_of(base) and not STRATEGIES[base].answers


@pytest.mark.parametrize(
    ("name", "says"),
    [
        *[(n, "not an ordering") for n in ("sandwich", "convex_score_sandwich", "recite", "fact")],
        ("select_and_place:mass=2", ".*option `mass`: Input should be less than or equal to 1"),
        ("select_and_place:top_n=0", ".*option `top_n`: Input should be greater than or equal"),
        ("select_and_place:mass=true", ".*option `mass`: Input should be a valid number"),
        ("passage_likelihood:placement=middle", ".*option `placement`"),
        ("edge:n_orders=3", ".*takes no option 'n_orders'"),
    ],
)
def test_a_candidate_is_refused_before_any_work(name: str, says: str, tmp_path: Path) -> None:
    """``mass=2`` was refused only when used: after the profile sweep (issue 42)."""
    with pytest.raises(EvalConfigError, match=f"--strategies: {name}: {says}"):
        check_candidates([name])
    model = ScriptedScorer()
    with pytest.raises(EvalConfigError, match="--strategies"):
        run_tune(model, questions=2, strategies=[name], out=tmp_path / "run", progress=False)
    assert model.prompts == [] and not (tmp_path / "run").exists()


# ---------------------------------------------------------------------- paths and specs
def test_out_naming_a_json_file_is_the_tuned_file_with_the_run_beside_it() -> None:
    args = argparse.Namespace(out=Path("runs/tuned.json"), tuned=None)
    tune_paths(args)
    assert (args.out, args.tuned) == (Path("runs/tuned-run"), Path("runs/tuned.json"))
    folder = argparse.Namespace(out=Path("runs/t"), tuned=None)
    tune_paths(folder)
    assert (folder.out, folder.tuned) == (Path("runs/t"), None)
    both = argparse.Namespace(out=Path("a.json"), tuned=Path("b.json"))
    with pytest.raises(EvalConfigError, match="give one"):
        tune_paths(both)


def test_the_recorded_spec_loads_the_model_again() -> None:
    specs = {
        "embedded:SmolLM2-135M-Instruct": "embedded",
        "embedded:gemma-3-270m": "embedded:gemma3-270m",
        "embedded:Qwen2.5-Coder-0.5B-Instruct": "embedded:qwen2.5-coder-0.5b",
        "/models/x.gguf": "hf:/models/x.gguf",
    }
    assert {name: spec_of(SimpleNamespace(name=name)) for name in specs} == specs


# ---------------------------------------------------------------------- runs
def test_tune_measures_and_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Measures after the reported questions; writes the file while it holds its folder."""
    model, out = ScriptedScorer(), tmp_path / "run"
    probe = (
        "import sys; from rag_position.eval.engine.folder_lock import check_folder_free\n"
        "try:\n    check_folder_free(sys.argv[1])\nexcept Exception:\n    sys.exit(3)\n"
    )
    held: list[int] = []
    write = TunedChoice.write

    def probing(self: TunedChoice, path: Path) -> Path:
        held.append(subprocess.run([sys.executable, "-c", probe, str(out)]).returncode)
        return write(self, path)

    monkeypatch.setattr(TunedChoice, "write", probing)
    strategies = ["edge", "passage_likelihood:placement=last"]
    run = partial(run_tune, questions=4, strategies=strategies, out=out, spec="embedded")
    result = run(model, progress=False)
    assert held == [3], "another process could take the folder while the tuned file was written"
    choice = read_tuned(out / "tuned.json")
    assert [e["strategy"] for e in choice.evidence] == ["retriever", *strategies]
    assert choice.questions["first"] == TUNE_SKIP and choice.questions["n"] == 4
    assert choice.spec == "embedded" and choice.model == "scripted"
    assert choice.profile is not None and choice.profile.n_positions == 10
    records = [json.loads(line) for line in (out / "predictions.jsonl").open()]
    ids = {int(r["instance"].rsplit(":", 1)[1]) for r in records}
    assert min(ids) > TUNE_SKIP, "tune measured a question the reported figures use"
    assert len(ids) == 4
    # the scripted model answers right with the gold passage last: placing it last wins
    chosen = next(e for e in choice.evidence if e["strategy"] == strategies[1])
    assert chosen["accuracy"] >= choice.evidence[0]["accuracy"]
    assert result.row(setting="chosen")["strategy"] in {e["strategy"] for e in choice.evidence}
    # resumed: a second run into the folder generates nothing new
    before = len(model.prompts)
    run(model, progress=False)
    assert len(model.prompts) == before


def test_the_tuned_reorderer_runs_the_chosen_row(tmp_path: Path) -> None:
    model = ScriptedScorer()
    run_tune(
        model, questions=3, strategies=["passage_likelihood:placement=last"], max_tokens=1e9,
        tie=100.0, out=tmp_path, spec="embedded", progress=False,
    )  # fmt: skip
    choice = read_tuned(tmp_path / "tuned.json")
    assert choice.strategy in ("retriever", "passage_likelihood")
    reorder = load_tuned(tmp_path / "tuned.json", scorer=model)
    passages = ["Paris is in France.", "GOLD Hamlet was written by Shakespeare.", "Rome."]
    got = reorder("Who wrote Hamlet?", passages)  # the same model: no warning
    want = STRATEGIES[choice.strategy](
        "Who wrote Hamlet?", passages, scorer=model, **choice.options
    )
    assert got.passages == want.passages


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"questions": 2, "shard": (1, 2)}, "--shard with tune needs --profile"),
        ({"questions": 2, "skip": 5000}, "--skip 5000"),
        ({"skip": 10**9}, "--skip 1000000000"),
    ],
)
def test_shards_without_a_profile_or_a_skip_past_the_data_are_refused(
    tmp_path: Path, options: dict[str, Any], says: str
) -> None:
    with pytest.raises(EvalConfigError, match=says):
        run_tune(ScriptedScorer(), out=tmp_path / "run", progress=False, **options)
    assert list(tmp_path.iterdir()) == []  # refused before the run's folder was marked


@pytest.mark.slow
def test_tune_cli_on_the_embedded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """On a file of short passages (the packaged dev file's took 50 s of prompts)."""
    path = tmp_path / "tuned.json"
    data = write_gold_at_file(tmp_path / "short.jsonl", n=2)
    code = main(
        ["tune", "--data", str(data), "--skip", "0", "--questions", "2", "--strategies", "edge",
         "--dtype", "float32", "--max-new-tokens", "8", "--out", str(path), "--no-progress"]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    choice = read_tuned(path)
    assert choice.questions["data"] == "short.jsonl" and choice.questions["n"] == 2
    assert choice.spec == "embedded" and choice.model == "embedded:SmolLM2-135M-Instruct"
    assert choice.dtype == "float32"
    assert "rag-position tune" in choice.command
    assert (tmp_path / "tuned-run" / "report.md").is_file()
    assert "The choice" in (tmp_path / "tuned-run" / "report.md").read_text()
