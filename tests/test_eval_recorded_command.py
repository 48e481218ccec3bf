"""Every task's recorded Python call (or CLI line), rerun, gives the same summary (fast)."""

from __future__ import annotations

import ast
import json
import re
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from test_eval_generation_tasks import HashEmbedder, NeedleModel, VarSumModel
from test_eval_runner import ScriptedScorer, write_gold_at_file

import rag_position.eval
import rag_position.eval.cli as eval_cli
from rag_position.cli import main
from rag_position.eval.cli import SPECS


class Cut:
    """Cuts each answer to ``max_new_tokens`` words, as a real model: the decoding shows."""

    def generate(self, prompts: Sequence[str], **kwargs: Any) -> list[str]:
        texts = super().generate(prompts, **kwargs)  # type: ignore[misc]
        limit = kwargs.get("max_new_tokens", 100)
        return [" ".join(t.split()[:limit]) for t in texts]


class QAModel(Cut, ScriptedScorer):
    """Right with the gold passage first or last; a scorer; counts words as tokens."""

    max_context = 2048


class Needles(Cut, NeedleModel):
    pass


class VarSum(Cut, VarSumModel):
    pass


PLACEHOLDER = "__object__"


def parse_call(command: str) -> tuple[str, dict[str, Any]]:
    """``rag_position.eval.run_kv(<m>, x=8)`` -> ``("run_kv", {"x": 8})``; ``<m>``: PLACEHOLDER."""
    tree = ast.parse(re.sub(r"<[^<>]*>", PLACEHOLDER, command.strip()), mode="eval")
    call = tree.body
    assert isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute), command
    assert ast.unparse(call.func.value) == "rag_position.eval", command
    assert [ast.unparse(a) for a in call.args] == [PLACEHOLDER], command
    return call.func.attr, {k.arg: _value(k.value) for k in call.keywords if k.arg}


def _value(node: ast.expr) -> Any:
    if isinstance(node, ast.Name) and node.id == PLACEHOLDER:
        return PLACEHOLDER
    if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("Path"):
        return Path(ast.literal_eval(node.args[0]))
    return ast.literal_eval(node)


def summary(out: Path) -> dict[str, Any]:
    """``summary.json`` without wall-clock seconds (which differ between runs)."""
    text = (out / "summary.json").read_text()
    return json.loads(text, object_hook=lambda d: {k: v for k, v in d.items() if k != "seconds"})


@pytest.fixture()
def data(tmp_path: Path) -> Path:
    return write_gold_at_file(tmp_path / "nq-open-10_total_documents_gold_at_3.jsonl", n=4)


Case = tuple[Callable[[], Any], dict[str, Any]]


def cases(data: Path) -> dict[str, Case]:
    """Per task: a model factory and the Python call's options (small, not the defaults)."""
    qa = {"data": data, "questions": 3, "max_new_tokens": 2, "seed": 1}
    kv = {"pairs": 8, "positions": [0, 7], "query_aware": (True,), "questions": 2, "seed": 3}
    needles = {"tokens": [200], "configs": [(1, 8)], "iterations": 2, "questions": 2}
    fillers = {"filler_tokens": [0, 300], "fillers": ["whitespace"], "summed": 2, "questions": 2}
    votes = {"votes": [3], "control_temperatures": [0.5], "worst_position": 4}
    return {
        "multidoc": (QAModel, {**qa, "positions": [0, 9], "baselines": False, "sandwich": True}),
        "compare": (QAModel, {**qa, "strategies": ["retriever", "gold_first"], "gold": ["worst"]}),
        "quick": (QAModel, {**qa, "strategies": ["retriever", "edge"]}),
        "kv": (QAModel, kv),
        "gauge": (QAModel, {**qa, "positions": [0, 4]}),
        "open_domain": (QAModel, {**qa, "ks": [1, 5], "retriever": "bm25"}),
        "swim": (QAModel, {**qa, "budget": 300, "depths": [0, 100], "sizes": [50]}),
        "multifact": (Needles, {**needles, "max_new_tokens": 2}),
        "length": (VarSum, {**fillers, "recite_tokens": 3, "max_new_tokens": 5}),
        "voting": (QAModel, {**qa, **votes, "embedder": HashEmbedder()}),
    }


@pytest.mark.parametrize("task", list(cases(Path("data.jsonl"))))
def test_the_recorded_call_gives_the_same_summary(task: str, data: Path, tmp_path: Path) -> None:
    make, options = cases(data)[task]
    function = getattr(rag_position.eval, f"run_{task}")
    first = function(make(), out=tmp_path / "first", progress=False, **options)
    recorded = json.loads(first.summary_json.read_text())["command"]
    name, params = parse_call(recorded)
    assert name == f"run_{task}"
    # only an object the call cannot print (the embedder) may stand as a placeholder
    assert {k for k, v in params.items() if v == PLACEHOLDER} <= {"embedder"}, recorded
    params = {k: options[k] if v == PLACEHOLDER else v for k, v in params.items()}
    again = function(make(), out=tmp_path / "again", progress=False, **params)
    assert summary(again.out) == summary(first.out), recorded
    # the call records every option given that changes results
    assert set(options) <= set(params), recorded


CLI_CASES = {
    "kv": ["--pairs", "8", "--positions", "0,7", "--query-aware", "on", "--seed", "3"],
    "swim": ["--budget", "300", "--depths", "0,100", "--sizes", "50", "--max-new-tokens", "2"],
    "length": ["--filler-tokens", "0,300", "--fillers", "whitespace", "--recite-tokens", "3"],
}


@pytest.mark.parametrize("task", list(CLI_CASES))
def test_the_recorded_command_line_reruns_to_the_same_summary_and_matches_the_call(
    task: str, data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make = VarSum if task == "length" else QAModel
    monkeypatch.setattr(eval_cli, "load_model", lambda spec: make())
    extra = ["--data", str(data)] if task == "swim" else []
    first = tmp_path / "first"
    argv = ["eval", task, *CLI_CASES[task], *extra, "--questions", "2", "--no-progress"]
    assert main([*argv, "--out", str(first)]) == 0
    recorded = json.loads((first / "summary.json").read_text())["command"]
    words = shlex.split(recorded)
    assert words[0] == "rag-position"
    words[words.index("--out") + 1] = str(tmp_path / "again")
    assert main(words[1:]) == 0
    again = summary(tmp_path / "again")
    assert {**again, "command": None} == {**summary(first), "command": None}
    # the same options through the Python function give the same sections
    spec = SPECS[task]
    assert f"(default: {spec.questions_help or 'the first 50'}" in " ".join(
        spec.parser().format_help().split()
    )
    params = spec.from_cli(spec.parser().parse_args(words[3:]))
    params.pop("out")
    result = spec.function(make(), out=tmp_path / "api", **params)
    assert summary(result.out)["sections"] == again["sections"]
