"""The eval runner, summaries, report and input checks, with a scripted generator (fast)."""

from __future__ import annotations

import json
import threading
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from rag_position.cost import Cost
from rag_position.errors import DataFormatError
from rag_position.eval import EvalConfigError, EvalRunError, run_multidoc
from rag_position.eval.engine.stats import bootstrap_ci
from rag_position.eval.engine.store import PredictionStore
from rag_position.eval.rows.catalog import available_strategies
from rag_position.eval.tasks.compare import run_compare

K = 10


class Scripted:
    """Answers correctly when its gold passage is Document [1] or the last one, or alone.

    Counts every prompt it generates for; ``fail_after`` makes it raise once that many
    prompts have been generated (a model that dies mid-run).
    """

    name = "scripted"

    def __init__(self, fail_after: int | None = None) -> None:
        self.fail_after = fail_after
        self.prompts: list[str] = []
        self.batches: list[int] = []
        self._lock = threading.Lock()

    def generate(
        self,
        prompts: Sequence[str],
        *,
        max_new_tokens: int = 100,
        temperature: float = 0.0,
        seed: int | None = None,
        stop: Sequence[str] | None = None,
    ) -> list[str]:
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


def write_gold_at_file(path: Path, n: int = 12, k: int = K, gold: int = 3) -> Path:
    """An original-release style file: k passages a record, one of them gold."""
    with path.open("w") as fout:
        for q in range(n):
            ctxs = [
                {
                    "title": f"D{q}-{j}",
                    "text": f"distractor {j} of {q}",
                    "hasanswer": False,
                    "isgold": False,
                    "score": 1.0 - j / k,
                    "id": f"{q}-{j}",
                }
                for j in range(k - 1)
            ]
            ctxs.insert(
                gold,
                {
                    "title": f"G{q}",
                    "text": f"GOLD the answer is ans{q}",
                    "hasanswer": True,
                    "isgold": True,
                },
            )
            fout.write(
                json.dumps({"question": f"question {q}?", "answers": [f"ans{q}"], "ctxs": ctxs})
                + "\n"
            )
    return path


@pytest.fixture()
def data(tmp_path: Path) -> Path:
    return write_gold_at_file(tmp_path / "nq-open-10_total_documents_gold_at_3.jsonl")


@pytest.fixture()
def profile(tmp_path: Path) -> Path:
    """A position profile that reads the last of K places best (as the embedded model)."""
    from rag_position.strategies import PositionProfile

    path = tmp_path / "profile.json"
    PositionProfile(tuple([0.1] * (K - 1) + [0.9]), model_name="scripted", source="eval").save(path)
    return path


def _numbers(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Summary rows without wall-clock seconds (which differ between runs)."""
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


def test_multidoc_sweep_numbers_and_report_files(data: Path, tmp_path: Path) -> None:
    model = Scripted()
    result = run_multidoc(model, data=data, questions=None, out=tmp_path / "out", batch_size=4)
    acc = {r["setting"]: r["accuracy"] for r in result.rows}
    assert acc == {
        "docs=10 gold=0 prompt=qa": 1.0,
        "docs=10 gold=4 prompt=qa": 0.0,
        "docs=10 gold=9 prompt=qa": 1.0,
        "closedbook": 0.0,
        "oracle": 1.0,
    }
    assert len(model.prompts) == 12 * 5 and max(model.batches) <= 4
    for name in ("summary.json", "summary.csv", "report.md", "predictions.jsonl"):
        assert (tmp_path / "out" / name).is_file()
    png = tmp_path / "out" / "multidoc-accuracy-by-position.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = json.loads(result.summary_json.read_text())
    assert summary["sections"][0]["rows"][0]["n"] == 12
    assert result.summary_csv.read_text().splitlines()[0].startswith("task,model,strategy")
    report = result.report.read_text()
    assert "rag_position.eval.run_multidoc(<scripted>" in report
    assert "| gold at 4 | 12 | 0.0 [0.0, 0.0] |" in report
    assert "![" in report and "multidoc-accuracy-by-position.png" in report


def test_interrupted_run_resumes_without_recomputing(data: Path, tmp_path: Path) -> None:
    full = Scripted()
    whole = run_multidoc(full, data=data, questions=None, out=tmp_path / "whole", batch_size=4)

    dying = Scripted(fail_after=26)  # dies inside the 7th batch of 4
    with pytest.raises(EvalRunError, match="rerun the same command") as err:
        run_multidoc(dying, data=data, questions=None, out=tmp_path / "cut", batch_size=4)
    assert isinstance(err.value.__cause__, RuntimeError)
    kept = PredictionStore(tmp_path / "cut" / "predictions.jsonl")
    assert len(kept) == 24 == len(dying.prompts)

    resumed = Scripted()
    again = run_multidoc(resumed, data=data, questions=None, out=tmp_path / "cut", batch_size=4)
    assert len(resumed.prompts) == len(full.prompts) - 24
    assert not set(resumed.prompts) & set(dying.prompts)  # nothing generated twice
    assert _numbers(again.rows) == _numbers(whole.rows)

    idle = Scripted()  # a third run recomputes nothing at all
    third = run_multidoc(idle, data=data, questions=None, out=tmp_path / "cut", batch_size=4)
    assert idle.prompts == [] and _numbers(third.rows) == _numbers(whole.rows)


def test_a_line_cut_by_a_kill_is_dropped(data: Path, tmp_path: Path) -> None:
    with pytest.raises(EvalRunError):
        run_multidoc(Scripted(fail_after=8), data=data, questions=None, out=tmp_path, batch_size=4)
    path = tmp_path / "predictions.jsonl"
    with path.open("a") as fout:
        fout.write('{"task": "multidoc", "model": "scr')  # half a line
    store = PredictionStore(path)
    assert len(store) == 8 and path.read_text().endswith("}\n")
    resumed = Scripted()
    run_multidoc(resumed, data=data, questions=None, out=tmp_path, batch_size=4)
    assert len(resumed.prompts) == 12 * 5 - 8


def test_threaded_concurrency_gives_the_same_summary(data: Path, tmp_path: Path) -> None:
    one = run_multidoc(Scripted(), data=data, questions=None, out=tmp_path / "a", batch_size=2)
    many = run_multidoc(
        Scripted(), data=data, questions=None, out=tmp_path / "b", batch_size=2, concurrency=3
    )
    assert _numbers(many.rows) == _numbers(one.rows)


def test_other_decoding_settings_are_refused(data: Path, tmp_path: Path) -> None:
    run_multidoc(Scripted(), data=data, questions=2, out=tmp_path)
    with pytest.raises(EvalConfigError, match="max_new_tokens"):
        run_multidoc(Scripted(), data=data, questions=2, out=tmp_path, max_new_tokens=5)


def test_bootstrap_interval() -> None:
    assert bootstrap_ci([1.0] * 30) == (1.0, 1.0, 1.0)
    values = [1.0] * 100 + [0.0] * 100
    mean, low, high = bootstrap_ci(values, seed=3)
    assert mean == 0.5 and low < 0.5 < high
    assert 0.10 < high - low < 0.18  # normal approximation: 2 * 1.96 * sqrt(.25 / 200) = 0.139
    assert bootstrap_ci(values, seed=3) == (mean, low, high)  # seeded
    with pytest.raises(ValueError, match="empty"):
        bootstrap_ci([])


def test_bootstrap_covers_the_true_rate() -> None:
    import random

    hits = 0
    for trial in range(40):
        rng = random.Random(trial)
        sample = [1.0 if rng.random() < 0.3 else 0.0 for _ in range(80)]
        _, low, high = bootstrap_ci(sample, n_resamples=400, seed=trial)
        hits += low <= 0.3 <= high
    assert hits >= 34  # about 95% of 40


def test_bad_inputs_name_file_line_and_field(data: Path, tmp_path: Path) -> None:
    unknown = tmp_path / "unknown.jsonl"
    unknown.write_text('{"foo": 1}\n')
    with pytest.raises(DataFormatError, match=r"unknown\.jsonl: line 1: not a multi-document QA"):
        run_multidoc(Scripted(), data=unknown, out=tmp_path / "o")
    missing = tmp_path / "missing.jsonl"
    lines = data.read_text().splitlines()
    record = json.loads(lines[1])
    del record["answers"]
    missing.write_text(lines[0] + "\n" + json.dumps(record) + "\n")
    with pytest.raises(DataFormatError, match=r"missing\.jsonl: line 2: missing field 'answers'"):
        run_multidoc(Scripted(), data=missing, out=tmp_path / "o")
    no_gold = tmp_path / "nogold.jsonl"
    record = json.loads(lines[0])
    for ctx in record["ctxs"]:
        ctx["isgold"] = False
    no_gold.write_text(lines[1] + "\n" + json.dumps(record) + "\n")
    with pytest.raises(DataFormatError, match=r"nogold\.jsonl: line 2: field 'ctxs\[\]\.isgold'"):
        run_multidoc(Scripted(), data=no_gold, out=tmp_path / "o")
    with pytest.raises(
        DataFormatError, match=r"line 1: field 'ctxs' holds 10 passages, but --docs is 20"
    ):
        run_multidoc(Scripted(), data=data, docs=20, out=tmp_path / "o")
    with pytest.raises(EvalConfigError, match=r"--positions: position 10 is outside the 10"):
        run_multidoc(Scripted(), data=data, positions=[0, 10], out=tmp_path / "o")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(DataFormatError, match=r"empty\.jsonl: the file holds no records"):
        run_multidoc(Scripted(), data=empty, out=tmp_path / "o")
    with pytest.raises(EvalConfigError, match="--questions"):
        run_multidoc(Scripted(), data=data, questions=0, out=tmp_path / "o")
    with pytest.raises(EvalConfigError, match="cannot be combined"):
        run_multidoc(Scripted(), data=data, sandwich=True, ordered_randomly=True, out=tmp_path)


def test_compare_baselines_and_a_row_added_to_the_table(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    def reverse(question: str, passages: Sequence[Any], **kw: Any) -> Any:
        calls.append(question)
        return types.SimpleNamespace(passages=list(passages)[::-1], cost=Cost(lm_calls=3))

    from rag_position.strategies import registry

    table = {**registry.STRATEGIES, "reverse": registry.StrategySpec("reverse", reverse)}
    monkeypatch.setattr(registry, "STRATEGIES", table)
    assert "reverse" in available_strategies()
    model = Scripted()
    names = ["retriever", "random", "gold_first", "gold_last", "reverse"]
    result = run_compare(model, data=data, questions=None, strategies=names, out=tmp_path)
    rows = {(r["strategy"], r["gold"]): r for r in result.rows if r["task"] == "compare"}
    assert rows[("gold_first", "random")]["accuracy"] == 1.0
    assert rows[("gold_last", "worst")]["accuracy"] == 1.0
    assert rows[("retriever", "worst")]["accuracy"] == 0.0  # the sweep's worst: position 4
    assert rows[("reverse", "random")]["lm_calls"] == 4.0  # 3 to choose the order + 1 answer
    assert len(calls) == 2 * 12
    with pytest.raises(EvalConfigError, match="unknown"):
        run_compare(Scripted(), data=data, strategies=["nope"], out=tmp_path)


@pytest.mark.parametrize("k", [1, 2, 5, 10, 11])
def test_framework_baselines_are_the_installed_classes_and_match_edge_modes(k: int) -> None:
    """compare's langchain_reorder / llamaindex_reorder run the frameworks' own classes; their
    outputs equal our edge_reorder modes on the same inputs (CI installs both frameworks)."""
    from rag_position.data import QAInstance
    from rag_position.eval.rows.catalog import framework_strategies
    from rag_position.passages import Passage
    from rag_position.strategies import edge_reorder

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
        from rag_position.models.protocols import SpanScore

        self.scored.append(len(prompts))
        out = []
        for prompt in prompts:
            docs = [line for line in prompt.split("\n") if line.startswith("Document [")]
            at = next((i for i, d in enumerate(docs) if "GOLD" in d), len(docs))
            ll = 0.0 if at in (0, len(docs) - 1) else -1.0
            out.append(SpanScore(mean=ll, sum=ll, n_tokens=1))
        return out


def test_compare_random_only_shares_convex_scoring_and_charges_each_variant(
    data: Path, tmp_path: Path, profile: Path
) -> None:
    model = ScriptedScorer()
    names = ["convex_score", "convex_score_profile", "convex_score_sandwich"]
    result = run_compare(
        model,
        data=data,
        strategies=names,
        gold=["random"],
        strategy_options={"convex_score_profile": {"profile": profile}},
        out=tmp_path / "c",
    )
    assert {r["task"] for r in result.rows} == {"compare"}  # no sweep: no worst setting asked
    assert {r["gold"] for r in result.rows} == {"random"}
    assert model.scored == [K] * 12  # one scoring pass of K rotations per question, shared
    rows = {r["strategy"]: r for r in result.rows}
    for name in names:
        assert rows[name]["lm_calls"] == K + 1, name  # each charged its own scoring + answer
    # the gold is found every time; first place is read, the profile's last place is read
    assert rows["convex_score"]["accuracy"] == rows["convex_score_profile"]["accuracy"] == 1.0
    sandwiches = [p for p in model.prompts if p.count("Question: question") == 2]
    assert len(sandwiches) == 12
    with pytest.raises(EvalConfigError, match="--gold"):
        run_compare(model, data=data, strategies=names, gold=["middle"], out=tmp_path / "c")


def test_multidoc_saves_its_position_profile(data: Path, tmp_path: Path) -> None:
    from rag_position.strategies import PositionProfile

    run_multidoc(Scripted(), data=data, positions=[0, 4, 9], out=tmp_path / "m")
    profile = PositionProfile.load(tmp_path / "m" / "profile.json")
    assert profile.source == "eval" and profile.model_name == "scripted"
    assert profile.values[0] == profile.values[9] == 1.0 and profile.values[4] == 0.0
    assert profile.values[2] == 0.5  # linear between measured positions
    assert profile.ranking()[:2] == [0, 9]


def test_shards_split_a_run_and_merge_by_concatenation(data: Path, tmp_path: Path) -> None:
    whole_model = Scripted()
    whole = run_multidoc(whole_model, data=data, questions=None, out=tmp_path / "whole")
    models = [Scripted() for _ in range(3)]
    parts = [
        run_multidoc(m, data=data, questions=None, out=tmp_path / f"s{k}", shard=(k, 3))
        for k, m in enumerate(models, start=1)
    ]
    # the shares are disjoint, cover the run, and keep each question in one share
    prompts = [set(m.prompts) for m in models]
    assert all(p for p in prompts) and sum(map(len, prompts)) == len(set(whole_model.prompts))
    assert set().union(*prompts) == set(whole_model.prompts)
    instances = [
        {json.loads(line)["instance"] for line in (tmp_path / f"s{k}" / "predictions.jsonl").open()}
        for k in (1, 2, 3)
    ]
    assert sum(map(len, instances)) == len(set().union(*instances)) == 12
    assert sum(r["n"] for r in parts[0].rows) < sum(r["n"] for r in whole.rows)
    assert "1/3" in (tmp_path / "s1" / "report.md").read_text()

    merged = tmp_path / "merged"
    merged.mkdir()
    with (merged / "predictions.jsonl").open("w") as fout:
        for k in (1, 2, 3):
            fout.write((tmp_path / f"s{k}" / "predictions.jsonl").read_text())
    idle = Scripted()
    again = run_multidoc(idle, data=data, questions=None, out=merged)
    assert idle.prompts == [] and _numbers(again.rows) == _numbers(whole.rows)
    # a share's profile would pass for the model's: only whole runs write one
    assert (tmp_path / "whole" / "profile.json").exists() and (merged / "profile.json").exists()
    assert not any((tmp_path / f"s{k}" / "profile.json").exists() for k in (1, 2, 3))


def test_sharded_compare_merges_into_the_whole_run(data: Path, tmp_path: Path) -> None:
    options: dict[str, Any] = {"strategies": ["retriever", "edge"], "worst_position": 4}
    whole = run_compare(Scripted(), data=data, questions=None, out=tmp_path / "whole", **options)
    merged = tmp_path / "merged"
    merged.mkdir()
    for k in (1, 2):
        model = Scripted()
        run_compare(
            model, data=data, questions=None, out=tmp_path / f"s{k}", shard=(k, 2), **options
        )
        assert model.prompts
        with (merged / "predictions.jsonl").open("a") as fout:
            fout.write((tmp_path / f"s{k}" / "predictions.jsonl").read_text())
    idle = Scripted()
    again = run_compare(idle, data=data, questions=None, out=merged, **options)
    assert idle.prompts == [] and _numbers(again.rows) == _numbers(whole.rows)


def test_shards_refuse_choices_made_from_one_share(data: Path, tmp_path: Path) -> None:
    from rag_position.eval import run_quick, run_voting

    with pytest.raises(EvalConfigError, match="--worst-position"):
        run_compare(Scripted(), data=data, questions=None, out=tmp_path, shard=(1, 2))
    with pytest.raises(EvalConfigError, match="--worst-position"):
        run_voting(Scripted(), data=data, questions=None, out=tmp_path, shard=(1, 2))
    with pytest.raises(EvalConfigError, match="--no-compare"):
        run_quick(Scripted(), data=data, questions=4, out=tmp_path, shard=(1, 2))
    with pytest.raises(EvalConfigError, match="holds no questions"):
        run_multidoc(Scripted(), data=data, questions=2, out=tmp_path / "e", shard=(3, 3))


@pytest.mark.parametrize("shard", [(0, 2), (3, 2), (1, 0)])
def test_bad_shards_are_refused(data: Path, tmp_path: Path, shard: tuple[int, int]) -> None:
    with pytest.raises(EvalConfigError, match="shard"):
        run_multidoc(Scripted(), data=data, questions=2, out=tmp_path, shard=shard)


def test_cli_shard_values(tmp_path: Path) -> None:
    from rag_position.eval.engine.shards import parse_shard

    assert parse_shard("2/4") == (2, 4)
    for text in ("2", "a/b", "5/4", "1/2/3", "-1/2"):
        with pytest.raises(EvalConfigError, match="shard"):
            parse_shard(text)


def test_strategy_variants_run_under_their_own_names_with_their_options(
    data: Path, tmp_path: Path, profile: Path
) -> None:
    model = ScriptedScorer()
    variant = "convex_score_profile:n_base_orders=2"
    result = run_compare(
        model,
        data=data,
        strategies=["convex_score_profile", variant],
        gold=["random"],
        strategy_options={"convex_score_profile": {"profile": profile}},  # the variant's too
        out=tmp_path / "c",
    )
    rows = {r["strategy"]: r for r in result.rows}
    assert set(rows) == {"convex_score_profile", variant}
    assert rows["convex_score_profile"]["lm_calls"] == K + 1
    assert rows[variant]["lm_calls"] == 2 * K + 1  # two base orders: 2K scoring passes
    assert rows[variant]["accuracy"] == 1.0
    records = [json.loads(line) for line in (tmp_path / "c" / "predictions.jsonl").open()]
    assert sum(r["strategy"] == variant for r in records) == 12


def test_strategy_variant_errors_name_the_problem(data: Path, tmp_path: Path) -> None:
    from rag_position.eval.rows.catalog import select_strategies, split_variant

    assert split_variant("edge:mode=llamaindex:top_k=5:x=0.5:y=true") == (
        "edge",
        {"mode": "llamaindex", "top_k": 5, "x": 0.5, "y": True},
    )
    for bad in ("edge:mode", "edge:=3", "edge:mode="):
        with pytest.raises(EvalConfigError, match="KEY=VALUE"):
            split_variant(bad)
    with pytest.raises(EvalConfigError, match="built-in order and takes no options"):
        select_strategies(["gold_last:position=3"])
    with pytest.raises(EvalConfigError, match="unknown"):
        select_strategies(["nope:k=1"])
    with pytest.raises(EvalConfigError, match=r"takes no option 'bogus'; its options: "):
        run_compare(ScriptedScorer(), data=data, strategies=["convex_score:bogus=1"], out=tmp_path)


def test_device_and_dtype_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    import torch

    from rag_position.cli import main
    from rag_position.errors import ModelSpecError
    from rag_position.eval.cli import model_options
    from rag_position.models.transformers_backend import check_device

    local = argparse.Namespace(model="embedded", device="cuda:1", dtype="float32")
    assert model_options(local) == {"device": "cuda:1", "dtype": "float32"}
    assert model_options(argparse.Namespace(model="embedded", device=None, dtype=None)) == {}
    served = argparse.Namespace(model="openai:http://127.0.0.1:9/v1/m", device="cuda", dtype=None)
    with pytest.raises(EvalConfigError, match="--device applies to local models only"):
        model_options(served)
    check_device("cpu")
    check_device("cpu:0")
    with pytest.raises(ModelSpecError, match="'gpu' is not a torch device"):
        check_device("gpu")
    with pytest.raises(ModelSpecError, match="'meta' holds no data"):
        check_device("meta")
    if not torch.xpu.is_available():  # a backend this torch lacks: refused before loading
        with pytest.raises(ModelSpecError, match="'xpu' cannot be used here"):
            check_device("xpu")
    if not torch.cuda.is_available():
        with pytest.raises(ModelSpecError, match="sees no CUDA device"):
            check_device("cuda")
    # the CLI reports it before loading any weights
    out = tmp_path / "run"
    code = main(["eval", "compare", "--device", "gpu", "--questions", "1", "--out", str(out)])
    assert code == 2
    assert "'gpu' is not a torch device" in capsys.readouterr().err
    assert not out.exists()


def test_variant_options_that_would_change_the_strategy_are_refused(
    data: Path, tmp_path: Path, profile: Path
) -> None:
    from rag_position.eval.rows.catalog import select_strategies, split_variant
    from rag_position.strategies import STRATEGIES
    from rag_position.strategies.registry import strategy_options

    assert all(strategy_options(name) == spec.options for name, spec in STRATEGIES.items())
    assert "placement" in strategy_options("convex_score")
    assert "placement" not in strategy_options("convex_score_profile")  # its name says how
    with pytest.raises(EvalConfigError, match="the seed is the run's"):
        select_strategies(["convex_score:seed=3"])
    with pytest.raises(EvalConfigError, match="'top_k' given twice"):
        split_variant("edge:top_k=3:top_k=5")
    with pytest.raises(EvalConfigError, match="sets placement itself"):
        select_strategies(["convex_score_profile:placement=first"])
    with pytest.raises(EvalConfigError, match=r"takes no option 'n_orders'.*n_rotations"):
        select_strategies(["convex_score:n_orders=3"])
    # a profile given in the variant itself needs no --profile
    variant = f"convex_score_profile:profile={profile}"
    result = run_compare(
        ScriptedScorer(), data=data, strategies=[variant], gold=["random"], out=tmp_path / "c"
    )
    assert [(r["strategy"], r["accuracy"]) for r in result.rows] == [(variant, 1.0)]


def test_quick_compares_the_scoring_strategies_with_the_profile_it_measured(
    data: Path, tmp_path: Path
) -> None:
    from rag_position.eval import run_quick
    from rag_position.eval.tasks.quick import QUICK_STRATEGIES

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


def test_compare_refuses_a_narrowed_setting_outside_the_run(data: Path, tmp_path: Path) -> None:
    from rag_position.eval.engine.session import open_context
    from rag_position.eval.tasks.compare import compare_section
    from rag_position.eval.tasks.datasets import load_multidoc

    ctx = open_context(Scripted(), tmp_path / "c", progress=False)
    dataset = load_multidoc(data, docs=K, questions=2)
    with pytest.raises(EvalConfigError, match="gold_of"):
        compare_section(
            ctx, dataset, strategies=["edge"], gold=["random"], gold_of={"edge": ["worst"]}
        )
