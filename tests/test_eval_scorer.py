"""Scorer and reader apart (``--scorer``): who scores, who answers, and the cost split."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_eval_runner import Scripted, write_gold_at_file

from rag_position import read_tuned
from rag_position.cost import Cost, record
from rag_position.data import QAInstance
from rag_position.eval import EvalConfigError, run_open_domain, run_tune
from rag_position.eval.engine.pair import ReaderScorer, scorer_metered, scoring_model
from rag_position.eval.rows.catalog import select_strategies
from rag_position.eval.tasks.compare import run_compare
from rag_position.eval.tasks.open_domain import _prepare
from rag_position.models.protocols import Span, SpanScore
from rag_position.passages import Passage


class GoldScorer:
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
    data = write_gold_at_file(tmp_path / "gold.jsonl", n=4, gold=4)
    reader, scorer = Reader(), GoldScorer()
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
    other = GoldScorer()  # the run's folder refuses another scorer
    other.name = "another-scorer"
    with pytest.raises(EvalConfigError, match=r"another-scorer|small-scorer"):
        run_compare(reader, scorer=other, data=data, strategies=names, gold=["random"], out=out)


def test_without_a_scorer_records_read_as_before(tmp_path: Path) -> None:
    data = write_gold_at_file(tmp_path / "gold.jsonl", n=2)
    out = tmp_path / "run"
    result = run_compare(Scripted(), data=data, strategies=["retriever"], gold=["random"], out=out)
    record_ = json.loads((out / "predictions.jsonl").open().readline())
    assert "scorer_cost" not in record_ and record_["model"] == "scripted"
    assert "scorer tokens" not in result.report.read_text()


def test_open_domain_scores_with_the_scorer(tmp_path: Path) -> None:
    data = write_gold_at_file(tmp_path / "gold.jsonl", n=3)
    scorer = GoldScorer()
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


def test_reader_scorer_delegates_and_meters() -> None:
    pair = ReaderScorer(Reader(), GoldScorer())
    assert pair.name == "big-reader" and scoring_model(pair).name == "small-scorer"
    with scorer_metered() as tally:
        pair.score_spans(["GOLD x", "y"], [(0, 1), (0, 1)])
    assert tally.total.lm_calls == 2 and tally.total.prompt_tokens == 14
    assert pair.generate(["Question: question 1?"]) == ["I do not know"]


def test_tune_chooses_for_the_pair_and_names_the_scorer(tmp_path: Path) -> None:
    data = write_gold_at_file(tmp_path / "gold.jsonl", n=4, gold=4)
    scorer = GoldScorer()
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
