"""The eval runner, summaries, report and input checks, with a scripted generator (fast)."""

from __future__ import annotations

import argparse
import json
import random
import threading
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from rag_position.cli import main
from rag_position.cost import Cost
from rag_position.data import QAInstance
from rag_position.errors import DataFormatError, ModelSpecError
from rag_position.eval import EvalConfigError, EvalRunError, run_multidoc, run_quick, run_voting
from rag_position.eval.cli import model_options
from rag_position.eval.engine.session import open_context
from rag_position.eval.engine.shards import parse_shard
from rag_position.eval.engine.stats import bootstrap_ci
from rag_position.eval.engine.store import PredictionStore
from rag_position.eval.rows.catalog import (
    available_strategies,
    framework_strategies,
    select_strategies,
    split_variant,
)
from rag_position.eval.tasks.compare import compare_section, run_compare
from rag_position.eval.tasks.datasets import load_multidoc
from rag_position.eval.tasks.quick import QUICK_STRATEGIES
from rag_position.models.protocols import SpanScore
from rag_position.passages import Passage
from rag_position.strategies import STRATEGIES, PositionProfile, edge_reorder, registry
from rag_position.strategies.registry import strategy_options

K = 10


class Scripted:
    """Right when the gold passage is first, last or alone; raises past ``fail_after`` prompts."""

    name = "scripted"

    def __init__(self, fail_after: int | None = None) -> None:
        self.fail_after = fail_after
        self.prompts: list[str] = []
        self.batches: list[int] = []
        self._lock = threading.Lock()

    def generate(self, prompts: Sequence[str], **kwargs: Any) -> list[str]:
        with self._lock:
            if self.fail_after is not None and len(self.prompts) + len(prompts) > self.fail_after:
                raise RuntimeError("scripted model failure")
            self.prompts.extend(prompts)
            self.batches.append(len(prompts))
        return [_answer(p) for p in prompts]

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def _answer(prompt: str) -> str:
    if prompt.startswith("Extract the value"):  # key-value: right only when the pair is first
        key = prompt.rsplit('Key: "', 1)[1].split('"')[0]
        first = prompt.split("JSON data:\n{", 1)[1].split("\n")[0]
        return first.split('": "')[1].split('"')[0] if first.startswith(f'"{key}"') else "none"
    docs = [line for line in prompt.split("\n") if line.startswith("Document [")]
    number = prompt.rsplit("Question: question ", 1)[-1].split("?")[0]
    for i, line in enumerate(docs):
        if f"GOLD the answer is ans{number}" in line:
            return f"ans{number}" if i in (0, len(docs) - 1) else "I do not know"
    return "I do not know"


def _ctx(title: str, text: str, gold: bool, **more: Any) -> dict[str, Any]:
    return {"title": title, "text": text, "hasanswer": gold, "isgold": gold, **more}


def write_gold_at_file(path: Path, n: int = 12, k: int = K, gold: int = 3) -> Path:
    """An original-release style file: k passages a record, one of them gold."""
    with path.open("w") as fout:
        for q in range(n):
            ctxs = [
                _ctx(f"D{q}-{j}", f"distractor {j} of {q}", False, score=1.0 - j / k, id=f"{q}-{j}")
                for j in range(k - 1)
            ]
            ctxs.insert(gold, _ctx(f"G{q}", f"GOLD the answer is ans{q}", True))
            record = {"question": f"question {q}?", "answers": [f"ans{q}"], "ctxs": ctxs}
            fout.write(json.dumps(record) + "\n")
    return path


@pytest.fixture()
def data(tmp_path: Path) -> Path:
    return write_gold_at_file(tmp_path / "nq-open-10_total_documents_gold_at_3.jsonl")


@pytest.fixture()
def profile(tmp_path: Path) -> Path:  # the last of K places read best, as the embedded model
    path = tmp_path / "profile.json"
    PositionProfile(tuple([0.1] * (K - 1) + [0.9]), model_name="scripted", source="eval").save(path)
    return path


def _numbers(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:  # without the seconds
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


def test_multidoc_sweep_and_an_interrupted_run_resumed(data: Path, tmp_path: Path) -> None:
    model, out = Scripted(), tmp_path / "whole"
    result = run_multidoc(model, data=data, questions=None, out=out, batch_size=4)
    acc = {r["setting"]: r["accuracy"] for r in result.rows}
    at = {f"docs=10 gold={g} prompt=qa": float(g != 4) for g in (0, 4, 9)}
    assert acc == {**at, "closedbook": 0.0, "oracle": 1.0}
    assert len(model.prompts) == 12 * 5 and max(model.batches) <= 4
    for name in ("summary.json", "summary.csv", "report.md", "predictions.jsonl"):
        assert (out / name).is_file()
    png = out / "multidoc-accuracy-by-position.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads(result.summary_json.read_text())["sections"][0]["rows"][0]["n"] == 12
    assert result.summary_csv.read_text().splitlines()[0].startswith("task,model,strategy")
    report = result.report.read_text()
    assert "rag_position.eval.run_multidoc(<scripted>" in report
    assert "| gold at 4 | 12 | 0.0 [0.0, 0.0] |" in report and "![" in report and png.name in report
    # the sweep's position profile, linear between the measured positions 0, 4 and 9
    profile = PositionProfile.load(out / "profile.json")
    assert profile.source == "eval" and profile.model_name == "scripted"
    assert profile.values[0] == profile.values[9] == 1.0 and profile.values[4] == 0.0
    assert profile.values[2] == 0.5 and profile.ranking()[:2] == [0, 9]
    many = run_multidoc(  # threads give the same summary
        Scripted(), data=data, questions=None, out=tmp_path / "b", batch_size=2, concurrency=3
    )
    assert _numbers(many.rows) == _numbers(result.rows)
    dying = Scripted(fail_after=26)  # dies inside the 7th batch of 4
    with pytest.raises(EvalRunError, match="rerun the same command") as err:
        run_multidoc(dying, data=data, questions=None, out=tmp_path / "cut", batch_size=4)
    assert isinstance(err.value.__cause__, RuntimeError)
    path = tmp_path / "cut" / "predictions.jsonl"
    with path.open("a") as fout:
        fout.write('{"task": "multidoc", "model": "scr')  # half a line, as a kill leaves it
    kept = PredictionStore(path)
    assert len(kept) == 24 == len(dying.prompts) and path.read_text().endswith("}\n")
    resumed = Scripted()
    again = run_multidoc(resumed, data=data, questions=None, out=tmp_path / "cut", batch_size=4)
    assert len(resumed.prompts) == len(model.prompts) - 24 == 12 * 5 - 24
    assert not set(resumed.prompts) & set(dying.prompts)  # nothing generated twice
    assert _numbers(again.rows) == _numbers(result.rows)
    idle = Scripted()  # a third run recomputes nothing at all
    third = run_multidoc(idle, data=data, questions=None, out=tmp_path / "cut", batch_size=4)
    assert idle.prompts == [] and _numbers(third.rows) == _numbers(result.rows)
    with pytest.raises(EvalConfigError, match="max_new_tokens"):  # other decoding: refused
        run_multidoc(Scripted(), data=data, questions=2, out=tmp_path / "cut", max_new_tokens=5)


def _line(instance: str, prediction: str, seconds: float) -> str:
    keys = {"task": "compare", "setting": "s", "strategy": "edge", "model": "m", "prompt_sha": "a"}
    more = {"decoding": {"max_new_tokens": 8}, "cost": {"seconds": seconds}}
    return json.dumps({**keys, "instance": instance, "prediction": prediction, **more}) + "\n"


def test_a_joined_prediction_loads_once_and_a_differing_one_is_an_error(tmp_path: Path) -> None:
    """Shard folders that each resumed from one file, joined: every shared line twice."""
    path = tmp_path / "predictions.jsonl"
    path.write_text(
        _line("q:1", "Paris", 1.0) + _line("q:2", "Rome", 1.0) + _line("q:1", "Paris", 2.5)
    )
    store = PredictionStore(path)
    assert [r["instance"] for r in store.records()] == ["q:1", "q:2"]
    assert store.records()[0]["cost"] == {"seconds": 1.0}  # the first counts
    path.write_text(_line("q:1", "Paris", 1.0) + _line("q:1", "Lyon", 1.0))
    with pytest.raises(DataFormatError, match=r"line 2: a second prediction for .*q:1.* differs"):
        PredictionStore(path)


def test_bootstrap_interval_and_its_coverage() -> None:
    assert bootstrap_ci([1.0] * 30) == (1.0, 1.0, 1.0)
    values = [1.0] * 100 + [0.0] * 100
    mean, low, high = bootstrap_ci(values, seed=3)
    assert mean == 0.5 and low < 0.5 < high
    assert 0.10 < high - low < 0.18  # normal approximation: 2 * 1.96 * sqrt(.25 / 200) = 0.139
    assert bootstrap_ci(values, seed=3) == (mean, low, high)  # seeded
    with pytest.raises(ValueError, match="empty"):
        bootstrap_ci([])
    hits = 0
    for trial in range(40):
        rng = random.Random(trial)
        sample = [float(rng.random() < 0.3) for _ in range(80)]
        _, low, high = bootstrap_ci(sample, n_resamples=400, seed=trial)
        hits += low <= 0.3 <= high
    assert hits >= 34  # about 95% of 40


def test_bad_inputs_name_file_line_and_field(data: Path, tmp_path: Path) -> None:
    lines = data.read_text().splitlines()
    no_answers, no_gold = json.loads(lines[1]), json.loads(lines[0])
    del no_answers["answers"]
    for ctx in no_gold["ctxs"]:
        ctx["isgold"] = False
    files = {
        "unknown": ('{"foo": 1}\n', "line 1: not a multi-document QA"),
        "missing": (f"{lines[0]}\n{json.dumps(no_answers)}\n", "line 2: missing field 'answers'"),
        "nogold": (f"{lines[1]}\n{json.dumps(no_gold)}\n", r"line 2: field 'ctxs\[\]\.isgold'"),
        "empty": ("\n", "the file holds no records"),
    }
    for name, (text, says) in files.items():
        (tmp_path / f"{name}.jsonl").write_text(text)
        with pytest.raises(DataFormatError, match=rf"{name}\.jsonl: {says}"):
            run_multidoc(Scripted(), data=tmp_path / f"{name}.jsonl", out=tmp_path / "o")
    for error, match, options in [
        (DataFormatError, "line 1: field 'ctxs' holds 10 passages, but --docs is 20", {"docs": 20}),
        (EvalConfigError, "--positions: position 10 is outside the 10", {"positions": [0, 10]}),
        (EvalConfigError, "--questions", {"questions": 0}),
        (EvalConfigError, "cannot be combined", {"sandwich": True, "ordered_randomly": True}),
    ]:
        with pytest.raises(error, match=match):
            run_multidoc(Scripted(), data=data, out=tmp_path / "o", **options)


def test_compare_baselines_and_a_row_added_to_the_table(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    def reverse(question: str, passages: Sequence[Any], **kw: Any) -> Any:
        calls.append(question)
        return types.SimpleNamespace(passages=list(passages)[::-1], cost=Cost(lm_calls=3))

    table = {**registry.STRATEGIES, "reverse": registry.StrategySpec("reverse", reverse)}
    monkeypatch.setattr(registry, "STRATEGIES", table)
    assert "reverse" in available_strategies()
    model = Scripted()
    names = ["retriever", "random", "gold_first", "gold_last", "reverse"]
    result = run_compare(model, data=data, questions=None, strategies=names, out=tmp_path)
    rows = {(r["strategy"], r["gold"]): r for r in result.rows if r["task"] == "compare"}
    assert rows[("gold_first", "random")]["accuracy"] == 1.0 and len(calls) == 2 * 12
    assert rows[("gold_last", "worst")]["accuracy"] == 1.0
    assert rows[("retriever", "worst")]["accuracy"] == 0.0  # the sweep's worst: position 4
    assert rows[("reverse", "random")]["lm_calls"] == 4.0  # 3 to choose the order + 1 answer
    with pytest.raises(EvalConfigError, match="unknown"):
        run_compare(Scripted(), data=data, strategies=["nope"], out=tmp_path)
    ctx = open_context(Scripted(), tmp_path / "c", progress=False)  # a narrowed setting not run
    dataset = load_multidoc(data, docs=K, questions=2)
    with pytest.raises(EvalConfigError, match="gold_of"):
        compare_section(
            ctx, dataset, strategies=["edge"], gold=["random"], gold_of={"edge": ["worst"]}
        )


@pytest.mark.parametrize("k", [1, 2, 5, 10, 11])
def test_framework_baselines_are_the_installed_classes_and_match_edge_modes(k: int) -> None:
    """compare's framework reorder rows equal our edge_reorder modes (CI installs both)."""
    pytest.importorskip("langchain_community", reason="the langchain [test] extra installs it")
    pytest.importorskip("llama_index.core", reason="the llama_index package installs it")
    passages = tuple(Passage(f"text {i}", title=f"t{i}") for i in range(k))
    instance = QAInstance("q?", ("a",), passages, gold_index=0, id=f"i{k}")
    found = framework_strategies()
    assert set(found) == {"langchain_reorder", "llamaindex_reorder"}
    for name, mode in (("langchain_reorder", "langchain"), ("llamaindex_reorder", "llamaindex")):
        out = found[name].order(instance, 0)  # type: ignore[attr-defined]
        # the llamaindex baseline scores nodes by retriever rank (k, k-1, ...)
        scores = [k - i for i in range(k)] if mode == "llamaindex" else None
        expected = edge_reorder(list(passages), scores=scores, mode=mode)
        assert [p.title for p in out] == [p.title for p in expected.passages], name


class ScriptedScorer(Scripted):
    """Also a scorer: the question is likelier with the gold passage at either end."""

    def __init__(self) -> None:
        super().__init__()
        self.scored: list[int] = []

    def score_spans(self, prompts: Sequence[str], spans: Sequence[Any]) -> list[Any]:
        self.scored.append(len(prompts))
        out = []
        for prompt in prompts:
            docs = [line for line in prompt.split("\n") if line.startswith("Document [")]
            at = next((i for i, d in enumerate(docs) if "GOLD" in d), len(docs))
            ll = 0.0 if at in (0, len(docs) - 1) else -1.0
            out.append(SpanScore(mean=ll, sum=ll, n_tokens=1))
        return out


def test_compare_shares_convex_scoring(data: Path, tmp_path: Path, profile: Path) -> None:
    model = ScriptedScorer()
    names = ["convex_score", "convex_score_profile", "convex_score_sandwich"]
    given = {"convex_score_profile": {"profile": profile}}
    options = {"data": data, "gold": ["random"], "strategy_options": given, "out": tmp_path / "c"}
    result = run_compare(model, strategies=names, **options)
    assert {(r["task"], r["gold"]) for r in result.rows} == {("compare", "random")}  # no sweep
    assert model.scored == [K] * 12  # one scoring pass of K rotations per question, shared
    rows = {r["strategy"]: r for r in result.rows}
    for name in names:
        assert rows[name]["lm_calls"] == K + 1, name  # each charged its own scoring + answer
    # the gold is found every time; first place is read, the profile's last place is read
    assert rows["convex_score"]["accuracy"] == rows["convex_score_profile"]["accuracy"] == 1.0
    assert sum(p.count("Question: question") == 2 for p in model.prompts) == 12  # sandwiches
    with pytest.raises(EvalConfigError, match="--gold"):
        run_compare(model, data=data, strategies=names, gold=["middle"], out=tmp_path / "c")
    # a variant runs under its own name, with its options (and the base's --profile)
    model = ScriptedScorer()
    variant = "convex_score_profile:n_base_orders=2"
    options["out"] = tmp_path / "v"
    result = run_compare(model, strategies=["convex_score_profile", variant], **options)
    rows = {r["strategy"]: r for r in result.rows}
    assert set(rows) == {"convex_score_profile", variant}
    assert rows["convex_score_profile"]["lm_calls"] == K + 1 and rows[variant]["accuracy"] == 1.0
    assert rows[variant]["lm_calls"] == 2 * K + 1  # two base orders: 2K scoring passes
    records = [json.loads(line) for line in (tmp_path / "v" / "predictions.jsonl").open()]
    assert sum(r["strategy"] == variant for r in records) == 12


@pytest.mark.parametrize(
    ("run", "shares", "options"),
    [
        (run_multidoc, 3, {}),
        (run_compare, 2, {"strategies": ["retriever", "edge"], "worst_position": 4}),
    ],
)
def test_shards_split_a_run_and_merge_by_concatenation(
    run: Any, shares: int, options: dict[str, Any], data: Path, tmp_path: Path
) -> None:
    whole_model = Scripted()
    whole = run(whole_model, data=data, questions=None, out=tmp_path / "whole", **options)
    models = {k: Scripted() for k in range(1, shares + 1)}
    parts = [
        run(m, data=data, questions=None, out=tmp_path / f"s{k}", shard=(k, shares), **options)
        for k, m in models.items()
    ]
    # the shares are disjoint, cover the run, and keep each question in one share
    prompts = [set(m.prompts) for m in models.values()]
    assert all(prompts) and sum(map(len, prompts)) == len(set(whole_model.prompts))
    assert set().union(*prompts) == set(whole_model.prompts)
    instances = [
        {json.loads(line)["instance"] for line in (tmp_path / f"s{k}" / "predictions.jsonl").open()}
        for k in models
    ]
    assert sum(map(len, instances)) == len(set().union(*instances)) == 12
    assert sum(r["n"] for r in parts[0].rows) < sum(r["n"] for r in whole.rows)
    assert f"1/{shares}" in (tmp_path / "s1" / "report.md").read_text()
    merged = tmp_path / "merged"
    merged.mkdir()
    with (merged / "predictions.jsonl").open("w") as fout:
        for k in models:
            fout.write((tmp_path / f"s{k}" / "predictions.jsonl").read_text())
    idle = Scripted()
    again = run(idle, data=data, questions=None, out=merged, **options)
    assert idle.prompts == [] and _numbers(again.rows) == _numbers(whole.rows)
    if run is run_multidoc:  # a share's profile would pass for the model's: only whole runs
        assert (tmp_path / "whole" / "profile.json").exists() and (merged / "profile.json").exists()
        assert not any((tmp_path / f"s{k}" / "profile.json").exists() for k in models)


def test_shards_refuse_one_share_choices_and_bad_values(data: Path, tmp_path: Path) -> None:
    for run, questions, shard, match in [
        (run_compare, None, (1, 2), "--worst-position"),
        (run_voting, None, (1, 2), "--worst-position"),
        (run_quick, 4, (1, 2), "--no-compare"),
        (run_multidoc, 2, (3, 3), "holds no questions"),
        *[(run_multidoc, 2, shard, "shard") for shard in [(0, 2), (3, 2), (1, 0)]],
    ]:
        out = tmp_path / "e" if shard == (3, 3) else tmp_path
        with pytest.raises(EvalConfigError, match=match):
            run(Scripted(), data=data, questions=questions, out=out, shard=shard)
    assert parse_shard("2/4") == (2, 4)
    for text in ("2", "a/b", "5/4", "1/2/3", "-1/2"):
        with pytest.raises(EvalConfigError, match="shard"):
            parse_shard(text)


def test_device_and_dtype_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    from rag_position.models.transformers_backend import check_device

    local = argparse.Namespace(model="embedded", device="cuda:1", dtype="float32")
    assert model_options(local) == {"device": "cuda:1", "dtype": "float32"}
    assert model_options(argparse.Namespace(model="embedded", device=None, dtype=None)) == {}
    served = argparse.Namespace(model="openai:http://127.0.0.1:9/v1/m", device="cuda", dtype=None)
    with pytest.raises(EvalConfigError, match="--device applies to local models only"):
        model_options(served)
    check_device("cpu")
    check_device("cpu:0")
    refused = {"gpu": "'gpu' is not a torch device", "meta": "'meta' holds no data"}
    if not torch.xpu.is_available():  # a backend this torch lacks: refused before loading
        refused["xpu"] = "'xpu' cannot be used here"
    if not torch.cuda.is_available():
        refused["cuda"] = "sees no CUDA device"
    for device, says in refused.items():
        with pytest.raises(ModelSpecError, match=says):
            check_device(device)
    out = tmp_path / "run"  # the CLI reports it before loading any weights
    assert main(["eval", "compare", "--device", "gpu", "--questions", "1", "--out", str(out)]) == 2
    assert "'gpu' is not a torch device" in capsys.readouterr().err and not out.exists()


def test_variant_errors_name_the_problem(data: Path, tmp_path: Path, profile: Path) -> None:
    options = {"mode": "llamaindex", "top_k": 5, "x": 0.5, "y": True}
    assert split_variant("edge:mode=llamaindex:top_k=5:x=0.5:y=true") == ("edge", options)
    assert all(strategy_options(name) == spec.options for name, spec in STRATEGIES.items())
    assert "placement" in strategy_options("convex_score")
    assert "placement" not in strategy_options("convex_score_profile")  # its name says how
    for bad in ("edge:mode", "edge:=3", "edge:mode="):
        with pytest.raises(EvalConfigError, match="KEY=VALUE"):
            split_variant(bad)
    with pytest.raises(EvalConfigError, match="'top_k' given twice"):
        split_variant("edge:top_k=3:top_k=5")
    for bad, match in [
        ("gold_last:position=3", "built-in order and takes no options"),
        ("nope:k=1", "unknown"),
        ("convex_score:seed=3", "the seed is the run's"),
        ("convex_score_profile:placement=first", "sets placement itself"),
        ("convex_score:n_orders=3", r"takes no option 'n_orders'.*n_rotations"),
    ]:
        with pytest.raises(EvalConfigError, match=match):
            select_strategies([bad])
    with pytest.raises(EvalConfigError, match=r"takes no option 'bogus'; its options: "):
        run_compare(ScriptedScorer(), data=data, strategies=["convex_score:bogus=1"], out=tmp_path)
    # a profile given in the variant itself needs no --profile
    variant = f"convex_score_profile:profile={profile}"
    options = {"data": data, "gold": ["random"], "out": tmp_path / "c"}
    result = run_compare(ScriptedScorer(), strategies=[variant], **options)
    assert [(r["strategy"], r["accuracy"]) for r in result.rows] == [(variant, 1.0)]


def test_quick_compares_scorers_with_the_profile_it_measured(data: Path, tmp_path: Path) -> None:
    model = ScriptedScorer()
    result = run_quick(model, data=data, questions=4, out=tmp_path / "q", progress=False)
    rows = {(r["strategy"], r["gold"]): r for r in result.rows if r["task"] == "compare"}
    run = {name for name, _ in rows}
    assert run == set(QUICK_STRATEGIES) & set(available_strategies())
    assert {"select_and_place", "passage_likelihood_profile", "edge", "retriever"} <= run
    assert "random" not in run  # the shuffled baseline is left to eval compare
    assert {g for _, g in rows} == {"random"}  # one setting: the gold at a random position
    for name in ("select_and_place", "passage_likelihood_profile"):
        assert rows[(name, "random")]["n"] == 4 and rows[(name, "random")]["lm_calls"] == K + 1
    # the sweep (0, 4, 9) reads the ends: its profile places the found gold at an end
    assert rows[("passage_likelihood_profile", "random")]["accuracy"] == 1.0
    report = (tmp_path / "q" / "report.md").read_text()
    assert "passage_likelihood_profile uses the accuracy profile of this run's sweep" in report
    assert "'select_and_place'" in report  # the recorded call names the strategies run
    assert "vs retriever: won/lost (p)" in report  # every row paired with the retriever
