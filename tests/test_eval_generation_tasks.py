"""kv, gauge, open-domain, swim, multifact, length, voting and their CLI: scripted models pin
each task's logic; multifact and length on the embedded model too."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import test_eval_runner as runner
from test_eval_runner import Scripted, write_gold_at_file

import rag_position.eval.cli as eval_cli
from rag_position.cli import main
from rag_position.data.synthetic import (
    NEEDLE_TEMPLATE,
    filler_sentences,
    make_multivalue,
    make_varsum,
)
from rag_position.eval import EvalConfigError, run_length, run_multifact, run_voting
from rag_position.eval.tasks.gauge import run_gauge
from rag_position.eval.tasks.kv import generate_kv, kv_positions, run_kv
from rag_position.eval.tasks.multifact import needle_values, precision, recall
from rag_position.eval.tasks.open_domain import run_open_domain
from rag_position.eval.tasks.swim import run_swim
from rag_position.models.protocols import SpanScore

FILLER = [
    "The river runs past the old mill. Farmers bring their grain in autumn. "
    "The mill wheel turns all day long. Children watch the water from the bridge.",
    "A lighthouse stands on the northern cape. Its keeper climbs the stairs at dusk. "
    "Ships steer by its beam through the fog. Storms batter the rocks every winter.",
]


def words(text: str) -> int:
    return len(text.split())


NEEDLE_QUERY = re.compile(r"What are all the special magic numbers for (\S+) mentioned")


class NeedleModel:
    """Answers ``per_call`` of the queried key's values left in the text: FACT finds more."""

    name = "needle-script"

    def __init__(self, per_call: int = 3) -> None:
        self.per_call = per_call
        self.prompts: list[str] = []

    def generate(self, prompts: Sequence[str], **kwargs: object) -> list[str]:
        self.prompts.extend(prompts)
        out = []
        for prompt in prompts:
            key = NEEDLE_QUERY.findall(prompt)[-1]
            values = re.findall(rf"magic numbers for {re.escape(key)} is: (\d+)\.", prompt)
            out.append(" ".join(values[: self.per_call]))
        return out

    def count_tokens(self, text: str) -> int:
        return words(text)


class VarSumModel:
    """Sums right only under 200 words; recites the named lines: length hurts, reciting helps."""

    name = "varsum-script"

    def generate(self, prompts: Sequence[str], **kwargs: object) -> list[str]:
        out = []
        for prompt in prompts:
            names = re.findall(r"\b([A-Z]{4})\b", prompt.rsplit("Question", 1)[-1])
            if "WORD BY WORD" in prompt:  # step 1: recite the named lines
                lines = [
                    f"- {m.group(0)}" for n in names for m in re.finditer(rf"{n} = \d+\.", prompt)
                ]
                out.append("\n".join(dict.fromkeys(lines)))
                continue
            if words(prompt) > 200:
                out.append("I am not sure.")
                continue
            values = {n: int(v) for n, v in re.findall(r"\b([A-Z]{4}) = (\d+)\.", prompt)}
            out.append(str(sum(values[n] for n in names if n in values)))
        return out

    def count_tokens(self, text: str) -> int:
        return words(text)


class HashEmbedder:
    """Identical texts get identical unit vectors; different texts nearly orthogonal ones."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        rows = [np.random.default_rng(abs(hash(t)) % 2**32).standard_normal(64) for t in texts]
        return np.asarray([v / np.linalg.norm(v) for v in rows], dtype=np.float32)


def test_multivalue_haystacks_and_their_recall_and_precision() -> None:
    [inst] = make_multivalue(1, filler=FILLER, tokens=300, keys=3, values=4, count_tokens=words)
    needles = re.findall(r"magic numbers for (\S+) is: (\d+)\.", inst.context)
    assert len(needles) == 12 and len({v for _, v in needles}) == 12
    assert len({k for k, _ in needles}) == 3
    queried = [v for k, v in needles if k == inst.query]
    assert list(inst.answers) == queried  # in context order
    assert inst.evidence == tuple(NEEDLE_TEMPLATE.format(key=inst.query, value=v) for v in queried)
    assert 300 <= words(inst.context) < 330
    again = make_multivalue(1, filler=FILLER, tokens=300, keys=3, values=4, count_tokens=words)
    assert again[0] == inst
    other = make_multivalue(1, filler=FILLER, tokens=300, keys=3, values=4, seed=1)
    assert other[0].answers != inst.answers
    with pytest.raises(ValueError, match="no sentence"):
        filler_sentences(["no full stop here"])
    record = {"prediction": "12345 and 123456, 7", "answers": ["12345", "23456", "7"]}
    assert recall(record) == pytest.approx(2 / 3)  # whole numbers only
    values = needle_values(inst.context)
    assert len(values) == 12 and set(inst.answers) <= values
    other = sorted(values - set(inst.answers))
    out = f"{inst.answers[0]} {inst.answers[1]} {other[0]} {other[1]} 1999"  # 1999: not a needle
    assert precision({"prediction": out, "answers": inst.answers}, values) == 0.5
    assert precision({"prediction": "none", "answers": inst.answers}, values) is None


def test_varsum_examples() -> None:
    [inst] = make_varsum(1, filler_tokens=0, count_tokens=words)
    values = dict(re.findall(r"\b([A-Z]{4}) = (\d+)\.", inst.context))
    assert len(values) == 50
    names = re.findall(r"\b([A-Z]{4})\b", inst.question)
    assert len(names) == 3 and inst.answers == (str(sum(int(values[n]) for n in names)),)
    assert all(line in inst.context for line in inst.evidence)
    essay = make_varsum(1, filler_tokens=400, filler=FILLER, count_tokens=words)[0]
    assert essay.context.startswith(inst.context)
    assert 400 <= words(essay.context) - words(inst.context) < 440
    blank = make_varsum(1, filler_tokens=400, count_tokens=len)[0]
    assert blank.context.startswith(inst.context) and not blank.context[len(inst.context) :].strip()
    lookup = make_varsum(1, filler_tokens=0, summed=1)[0]
    assert lookup.question.startswith("What is the value of")
    with pytest.raises(ValueError, match="summed"):
        make_varsum(1, filler_tokens=0, summed=51)


def test_multifact_fact_recall_grows_by_iteration(tmp_path: Path) -> None:
    model = NeedleModel(per_call=3)
    options = {"tokens": [200], "configs": [(1, 8), (2, 8)], "iterations": 4, "questions": 3}
    result = run_multifact(model, out=tmp_path, **options)
    rows = {(r["config"], r["strategy"]): r for r in result.rows}
    for config in ("K1V8Q1", "K2V8Q1"):
        assert rows[(config, "single_pass")]["accuracy"] == pytest.approx(3 / 8)
        got = [rows[(config, f"fact@{i}")]["accuracy"] for i in range(1, 5)]
        assert got == pytest.approx([3 / 8, 6 / 8, 1.0, 1.0])
        calls = [rows[(config, f"fact@{i}")]["lm_calls"] for i in range(1, 5)]
        assert calls == [1.0, 2.0, 3.0, 4.0]  # the 4th pass finds nothing new, and stops
        assert rows[(config, "fact@4")]["hallucinated"] == 0.0
        assert rows[(config, "fact@4")]["precision"] == 1.0  # only the queried key's values
    # one FACT run per haystack serves fact@1..4: 4 passes + 1 single pass each
    assert len(model.prompts) == 2 * 3 * (4 + 1)
    assert (tmp_path / "multifact-recall-by-iteration.png").is_file()
    again = run_multifact(model, out=tmp_path, **options)
    assert len(model.prompts) == 30 and again.rows == result.rows  # resumed, nothing redone
    with pytest.raises(EvalConfigError, match="iterations"):
        run_multifact(model, iterations=0, out=tmp_path)
    model.max_context = 1000  # type: ignore[attr-defined]
    with pytest.raises(EvalConfigError, match="context window of 1000"):
        run_multifact(model, tokens=[2000], out=tmp_path / "window")


def test_length_recite_beats_direct_as_filler_grows(tmp_path: Path) -> None:
    result = run_length(VarSumModel(), filler_tokens=[0, 400], questions=3, out=tmp_path, data=None)
    acc = {(r["filler"], r["filler_tokens"], r["strategy"]): r for r in result.rows}
    fillers = [("none", 0), ("essay", 400), ("whitespace", 400)]
    assert set(acc) == {(f, n, s) for f, n in fillers for s in ("direct", "recite")}
    assert acc[("essay", 400, "direct")]["accuracy"] == 0.0
    recite = acc[("essay", 400, "recite")]
    assert recite["accuracy"] == recite["recited"] == recite["exact"] == 1.0
    assert recite["lm_calls"] == 2.0
    assert (tmp_path / "length-accuracy-by-filler.png").is_file()
    with pytest.raises(EvalConfigError, match="--fillers"):
        run_length(VarSumModel(), fillers=["noise"], out=tmp_path)


def test_voting_permutations_rescue_the_worst_position(tmp_path: Path) -> None:
    data = write_gold_at_file(tmp_path / "gold_at_3.jsonl", n=8)
    model = Scripted()  # right only with the gold passage first or last, else "I do not know"
    result = run_voting(
        model, votes=[5], worst_position=4, data=data, embedder=HashEmbedder(), out=tmp_path / "v"
    )
    acc = {r["strategy"]: r for r in result.rows}
    assert set(acc) == {"single", "medoid_k5", "resample_k5_t0.7"}
    assert acc["single"]["accuracy"] == 0.0
    assert acc["resample_k5_t0.7"]["accuracy"] == 0.0  # resampling never moves the gold
    assert acc["medoid_k5"]["accuracy"] > 0.0  # a permutation with the gold at an end wins
    assert acc["medoid_k5"]["lm_calls"] == acc["resample_k5_t0.7"]["lm_calls"] == 5.0
    with pytest.raises(EvalConfigError, match="at least 2 answers"):
        run_voting(model, votes=[1], worst_position=4, data=data, embedder=HashEmbedder())
    with pytest.raises(EvalConfigError, match="temperatures"):
        run_voting(model, control_temperatures=[0.0], data=data, embedder=HashEmbedder())


@pytest.mark.slow
def test_multifact_and_length_on_the_embedded_model(embedded_fp32: object, tmp_path: Path) -> None:
    options = {"configs": [(1, 3)], "iterations": 2, "questions": 1, "max_new_tokens": 32}
    result = run_multifact(embedded_fp32, tokens=[200], out=tmp_path, **options)
    rows = {r["strategy"]: r for r in result.rows}
    assert set(rows) == {"single_pass", "fact@1", "fact@2"}
    assert rows["fact@1"]["accuracy"] <= rows["fact@2"]["accuracy"]  # facts only accumulate
    assert rows["fact@1"]["lm_calls"] == 1.0 and rows["fact@2"]["lm_calls"] <= 2.0
    assert rows["single_pass"]["prompt_tokens"] > 200
    length = run_length(
        embedded_fp32, filler_tokens=[0, 200], fillers=["whitespace"], questions=1,
        summed=1, max_new_tokens=8, recite_tokens=48, out=tmp_path / "len",
    )  # fmt: skip
    got = {(r["filler"], r["strategy"]): r for r in length.rows}
    assert set(got) == {(f, s) for f in ("none", "whitespace") for s in ("direct", "recite")}
    assert all(0.0 <= r["accuracy"] <= 1.0 and r["n"] == 1 for r in length.rows)
    assert all(r["lm_calls"] >= 2.0 for (_, s), r in got.items() if s == "recite")
    assert "recited" in got[("none", "recite")]


class NeedleScorer(NeedleModel):
    """Also scores: likely (0) after a chunk holding a queried needle, else unlikely (-5)."""

    def score_spans(self, prompts: Sequence[str], spans: Sequence[Any]) -> list[Any]:
        out = []
        for prompt in prompts:
            key = re.findall(r"magic numbers for (\S+)\?", prompt)[-1]
            mean = 0.0 if f"magic numbers for {key} is:" in prompt else -5.0
            out.append(SpanScore(mean, 4 * mean, 4))
        return out


def test_multifact_selection_keeps_the_chunks_of_every_needle(tmp_path: Path) -> None:
    model = NeedleScorer(per_call=10)
    names = ["single_pass", "select_and_place"]
    result = run_multifact(
        model, tokens=[400], configs=[(2, 6)], questions=3, strategies=names, out=tmp_path
    )
    rows = {r["strategy"]: r for r in result.rows}
    assert set(rows) == {"single_pass", "select_and_place"}  # no FACT asked for
    selected = rows["select_and_place"]
    # the posterior is even over the needles' chunks: 0.9 of it keeps every one of them
    assert selected["needle_chunks_kept"] == 1.0 and selected["accuracy"] == 1.0
    assert 1 <= selected["kept"] < selected["chunks"]
    assert selected["lm_calls"] == selected["chunks"] + 1  # each chunk scored, one answer
    with pytest.raises(EvalConfigError, match="--strategies: choose from"):
        run_multifact(model, strategies=["nope"], out=tmp_path / "x")


# ------------------------------------------------------ kv, gauge, open-domain, swim
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
    monkeypatch.setattr(eval_cli, "load_model", lambda spec: NeedleModel())
    mf = tmp_path / "mf"
    argv = ["eval", "multifact", "--tokens", "200", "--keys", "1", "--iterations", "2"]
    argv += ["--questions", "2", "--out", str(mf), "--no-progress", "--max-new-tokens", "50"]
    assert main(argv) == 0
    assert "fact@2" in capsys.readouterr().out
    first = json.loads((mf / "predictions.jsonl").read_text().splitlines()[0])
    assert first["decoding"]["max_new_tokens"] == 50
    monkeypatch.setattr(eval_cli, "load_model", lambda spec: VarSumModel())
    argv = ["eval", "length", "--filler-tokens", "0", "--questions", "2", "--no-progress"]
    assert main([*argv, "--out", str(tmp_path / "len")]) == 0
    first = json.loads((tmp_path / "len" / "predictions.jsonl").read_text().splitlines()[0])
    assert first["decoding"]["max_new_tokens"] == 32  # the task's own default
    assert main(["eval", "voting", "--control-temperatures", "warm"]) == 2
    assert "--control-temperatures: expected numbers" in capsys.readouterr().err
