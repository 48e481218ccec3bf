"""Selecting rows and scoring models: what compare kept, rows paired with ``--versus``, the
scorer apart from the reader (``--scorer``) and the scores' memory (``PromptScores``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from math import comb
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from test_eval_runner import Scripted, write_gold_at_file

from rag_position import read_tuned
from rag_position.cost import Cost, record
from rag_position.data import QAInstance
from rag_position.eval import EvalConfigError, run_tune
from rag_position.eval.engine.pair import ReaderScorer, scorer_metered, scoring_model
from rag_position.eval.engine.stats import paired, sign_test
from rag_position.eval.rows.catalog import select_strategies
from rag_position.eval.rows.scoring import PromptScores
from rag_position.eval.tasks.compare import run_compare
from rag_position.eval.tasks.open_domain import _prepare, run_open_domain
from rag_position.models.protocols import Span, SpanScore
from rag_position.passages import Passage


class GoldScorer(Scripted):
    """The question is likely (0) after the gold passage alone, else -5; answers as Scripted."""

    def __init__(self) -> None:
        super().__init__()
        self.scored: list[str] = []

    def score_spans(self, prompts: Sequence[str], spans: Sequence[Span]) -> list[SpanScore]:
        self.scored.extend(prompts)
        means = [0.0 if "GOLD" in p else -5.0 for p in prompts]
        return [SpanScore(m, 3 * m, 3) for m in means]


@pytest.fixture()
def data(tmp_path: Path) -> Path:
    return write_gold_at_file(tmp_path / "nq-open-10_total_documents_gold_at_3.jsonl")


def test_selecting_keeps_the_gold_alone_paired_with_retriever(data: Path, tmp_path: Path) -> None:
    names = ["retriever", "select_and_place", "select_and_place:mass=none"]
    result = run_compare(
        GoldScorer(), data=data, questions=None, strategies=names, gold=["random"], out=tmp_path
    )
    rows = {r["strategy"]: r for r in result.rows}
    kept = rows["select_and_place"]
    assert kept["accuracy"] == 1.0 and kept["kept"] == 1.0 and kept["gold_kept"] == 1.0
    assert rows["select_and_place:mass=none"]["kept"] == 10.0  # every passage, gold last
    assert rows["select_and_place:mass=none"]["accuracy"] == 1.0
    records = [json.loads(line) for line in (tmp_path / "predictions.jsonl").open()]
    base = {r["instance"]: r["correct"] for r in records if r["strategy"] == "retriever"}
    wrong = sum(1 for c in base.values() if not c)
    assert 0 < wrong < 12  # the seeded random position puts some golds at the ends
    assert (kept["wins"], kept["losses"]) == (wrong, 0)
    assert kept["sign_p"] == pytest.approx(sign_test(wrong, 0))
    assert "wins" not in rows["retriever"]
    report = (tmp_path / "report.md").read_text()
    assert "vs retriever: won/lost (p)" in report
    assert f"| {wrong}/0 (" in report
    assert "select_and_place (random): kept 1.00 of 10 passages a question" in report
    assert "the gold passage among them 100.0%" in report


def test_versus_names_any_row_or_none(data: Path, tmp_path: Path) -> None:
    names = ["retriever", "gold_last", "select_and_place"]
    result = run_compare(
        GoldScorer(), data=data, questions=None, strategies=names, gold=["random"],
        versus="gold_last", out=tmp_path / "a",
    )  # fmt: skip
    rows = {r["strategy"]: r for r in result.rows}
    assert (rows["select_and_place"]["wins"], rows["select_and_place"]["losses"]) == (0, 0)
    assert rows["select_and_place"]["sign_p"] == 1.0
    assert "vs gold_last" in (tmp_path / "a" / "report.md").read_text()
    run_compare(
        GoldScorer(), data=data, questions=None, strategies=["retriever", "select_and_place"],
        gold=["random"], versus="gold_first", out=tmp_path / "b",
    )  # fmt: skip
    assert "no paired column: gold_first was not run" in (tmp_path / "b" / "report.md").read_text()


def test_sign_test_is_binomial_and_pairs_count_only_instances_both_answered() -> None:
    for wins, losses in [(12, 3), (3, 12), (7, 7), (0, 5), (20, 0)]:
        n, k = wins + losses, min(wins, losses)
        expected = min(1.0, 2 * sum(comb(n, i) for i in range(k + 1)) / 2**n)
        assert sign_test(wins, losses) == pytest.approx(expected)
    assert sign_test(12, 3) == pytest.approx(0.03515625)  # scipy.stats.binomtest(12, 15)

    def rec(strategy: str, instance: int, correct: bool, setting: str = "s") -> dict[str, object]:
        return {"strategy": strategy, "instance": instance, "correct": correct, "setting": setting}

    records = [rec("b", 1, False), rec("b", 2, True), rec("b", 3, False), rec("x", 1, True),
               rec("x", 2, False), rec("x", 4, True),
               rec("x", 1, True, setting="other")]  # fmt: skip
    assert paired(records, "b") == {("x", "s"): (1, 1, 1.0)}  # instance 4 and "other" unpaired


def test_open_domain_selects_and_scores_each_chunk_once(data: Path, tmp_path: Path) -> None:
    model = GoldScorer()
    result = run_open_domain(
        model, ks=[5, 20], retriever="bm25", data=data, questions=4,
        strategies=["retriever", "select_and_place"], out=tmp_path,
    )  # fmt: skip
    rows = {(r["strategy"], r["k"]): r for r in result.rows if r["strategy"] != "retriever-recall"}
    assert set(rows) == {(n, k) for n in ("reader", "reader+select_and_place") for k in (5, 20)}
    # every chunk prompt scored once: k=20 repeats k=5's five prompts from memory
    assert len(model.scored) == len(set(model.scored)) == 4 * 20
    for k in (5, 20):  # still charged in full: one LM call per chunk, plus the answer
        assert rows[("reader+select_and_place", k)]["lm_calls"] == k + 1
        # the gold chunk alone where retrieved; no sure chunk: the mass keeps most of them
        assert 1.0 <= rows[("reader+select_and_place", k)]["kept"] <= k
    report = (tmp_path / "report.md").read_text()
    header = "| k | retriever recall@k | reader accuracy@k | reader accuracy@k, select_and_place |"
    assert header in report
    kept = [rows[("reader+select_and_place", k)]["kept"] for k in (5, 20)]
    assert f"passages kept a question: {kept[0]:.2f} at k=5, {kept[1]:.2f} at k=20" in report


class Counting:
    """Scores a prompt by its length; remembers what it was sent."""

    def __init__(self) -> None:
        self.sent: list[list[str]] = []

    def score_spans(self, prompts: Sequence[str], spans: Sequence[Any]) -> list[SpanScore]:
        self.sent.append(list(prompts))
        return [SpanScore(-float(len(p)), -1.0, 1) for p in prompts]


def _scores(cached: PromptScores, prompts: list[str]) -> list[float]:
    return [s.mean for s in cached.score_spans(prompts, [(0, 1)] * len(prompts))]


def test_a_request_keeps_its_older_prompts_when_new_ones_overflow_the_memory() -> None:
    """A 200-question run stopped with a KeyError: a request's new prompts dropped its old."""
    model = Counting()
    cached = PromptScores(model, size=2)
    assert _scores(cached, ["a", "bb"]) == [-1.0, -2.0]
    # "a" and "bb" are held; two new prompts push the memory past 2 within this request
    assert _scores(cached, ["a", "ccc", "dddd", "bb"]) == [-1.0, -3.0, -4.0, -2.0]
    assert model.sent == [["a", "bb"], ["ccc", "dddd"]]  # the held ones not sent again
    assert len(cached._prompts) == 2


def test_a_request_larger_than_the_memory_gets_every_score() -> None:
    model = Counting()
    cached = PromptScores(model, size=3)
    prompts = [c * (i + 1) for i, c in enumerate("abcdefgh")]
    assert _scores(cached, prompts) == [-float(len(p)) for p in prompts]
    assert _scores(cached, prompts[-3:]) == [-6.0, -7.0, -8.0]
    assert model.sent == [prompts]  # the last three used were kept


def test_the_memory_drops_the_least_recently_used() -> None:
    model = Counting()
    cached = PromptScores(model, size=2)
    _scores(cached, ["a", "b"])
    _scores(cached, ["a"])  # "a" used last
    _scores(cached, ["c"])  # drops "b"
    _scores(cached, ["a", "b"])
    assert model.sent == [["a", "b"], ["c"], ["b"]]


# ------------------------------------------------------------ scorer and reader apart
class SmallScorer:
    """Scores a one-passage prompt high when its passage is the gold; counts its calls."""

    name = "small-scorer"
    max_context = 4096

    def __init__(self) -> None:
        self.prompts = 0

    def score_spans(self, prompts: Sequence[str], spans: Sequence[Span]) -> list[SpanScore]:
        self.prompts += len(prompts)
        record(Cost(lm_calls=len(prompts), prompt_tokens=7 * len(prompts), seconds=0.01))
        return [SpanScore(0.0 if "GOLD" in p else -5.0, 0.0, 3) for p in prompts]


class Reader(Scripted):
    """The scripted reader, which must never be asked to score."""

    name = "big-reader"

    def score_spans(self, prompts: Sequence[str], spans: Sequence[Span]) -> list[SpanScore]:
        raise AssertionError("the reader scored: the strategies must score with the scorer")


def test_compare_scores_with_the_scorer_and_answers_with_the_reader(tmp_path: Path) -> None:
    pair = ReaderScorer(Reader(), SmallScorer())  # delegates, and meters the scorer
    assert pair.name == "big-reader" and scoring_model(pair).name == "small-scorer"
    with scorer_metered() as tally:
        pair.score_spans(["GOLD x", "y"], [(0, 1), (0, 1)])
    assert tally.total.lm_calls == 2 and tally.total.prompt_tokens == 14
    assert pair.generate(["Question: question 1?"]) == ["I do not know"]
    data = write_gold_at_file(tmp_path / "gold.jsonl", n=4, gold=4)
    reader, scorer = Reader(), SmallScorer()
    out = tmp_path / "run"
    names = ["retriever", "select_and_place:top_n=1"]
    result = run_compare(
        reader, scorer=scorer, data=data, strategies=names, gold=["random"], out=out
    )
    assert scorer.prompts == 4 * 10  # one one-passage prompt per passage, on the scorer
    rows = {r["strategy"]: r for r in result.rows}
    # The scorer keeps the gold alone, so the reader (right on one passage) answers all.
    assert rows["select_and_place:top_n=1"]["accuracy"] == 1.0
    assert rows["select_and_place:top_n=1"]["scorer_prompt_tokens"] == 70
    assert rows["retriever"]["scorer_prompt_tokens"] == 0
    assert rows["retriever"]["reader_prompt_tokens"] == rows["retriever"]["prompt_tokens"]
    records = [json.loads(line) for line in (out / "predictions.jsonl").open()]
    assert {r["model"] for r in records} == {"big-reader scored by small-scorer"}
    for r in records:
        total, parts = r["cost"], (r["scorer_cost"], r["reader_cost"])
        assert total["prompt_tokens"] == sum(p["prompt_tokens"] for p in parts)
    report = result.report.read_text()
    assert "| scorer | small-scorer |" in report and "| model | big-reader |" in report
    assert "scorer tokens" in report and "reader s" in report
    other = SmallScorer()  # the run's folder refuses another scorer
    other.name = "another-scorer"
    with pytest.raises(EvalConfigError, match=r"another-scorer|small-scorer"):
        run_compare(reader, scorer=other, data=data, strategies=names, gold=["random"], out=out)
    # without a scorer, records read as before
    out = tmp_path / "plain"
    result = run_compare(Scripted(), data=data, strategies=["retriever"], gold=["random"], out=out)
    record_ = json.loads((out / "predictions.jsonl").open().readline())
    assert "scorer_cost" not in record_ and record_["model"] == "scripted"
    assert "scorer tokens" not in result.report.read_text()


def test_open_domain_scores_with_the_scorer(tmp_path: Path) -> None:
    data = write_gold_at_file(tmp_path / "gold.jsonl", n=3)
    scorer = SmallScorer()
    result = run_open_domain(
        Reader(), scorer=scorer, data=data, ks=[5], retriever="bm25",
        strategies=["select_and_place:top_n=1"], out=tmp_path / "od",
    )  # fmt: skip
    assert scorer.prompts > 0
    readers = [r for r in result.rows if r["strategy"].startswith("reader")]
    assert readers and all("scorer_prompt_tokens" in r for r in readers)
    # BM25 finds no gold chunk here ("question 1?" shares no word with it; recall 0), so no
    # passage the reader gets holds an answer, and the report says so.
    recall = next(r for r in result.rows if r["strategy"] == "retriever-recall")
    assert recall["accuracy"] == 0.0
    assert all(r["answer_in_context"] == 0.0 for r in readers)
    assert "no passage given holds an answer: 100.0% at k=5" in result.report.read_text()


def test_tune_chooses_for_the_pair_and_names_the_scorer(tmp_path: Path) -> None:
    data = write_gold_at_file(tmp_path / "gold.jsonl", n=4, gold=4)
    scorer = SmallScorer()
    out = tmp_path / "tune"
    run_tune(
        Reader(), scorer=scorer, data=data, questions=4, skip=0, spec="embedded", out=out,
        strategies=["edge", "select_and_place:top_n=1"], profile=[0.5] * 10, progress=False,
    )  # fmt: skip
    choice = read_tuned(out / "tuned.json")
    # The reader answers from one passage only; the scorer finds it: selection wins.
    assert choice.strategy == "select_and_place" and choice.options == {"top_n": 1}
    assert choice.model == "small-scorer"  # the model a pipeline loads to score with
    assert scorer.prompts > 0


@pytest.mark.parametrize(("k", "held"), [(2, 1.0), (1, 0.0)])
def test_answer_in_context_is_whether_a_passage_given_holds_an_answer(k: int, held: float) -> None:
    passages = (Passage("nothing here"), Passage("ans1 is in Rome."))
    instance = QAInstance("Where is ans1?", ("ans1",), passages, id="q")
    retriever = select_strategies(["retriever"])[0]
    prepared = _prepare(SimpleNamespace(seed=0), None, retriever, instance, k)()  # type: ignore[arg-type]
    # the question names the answer too: it is left out of what is looked at
    assert prepared.info["answer_in_context"] == held
