"""compare with a selecting row: what it kept, and every row paired with ``--versus``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from math import comb
from pathlib import Path

import pytest
from test_eval_runner import Scripted, write_gold_at_file

from rag_position.eval.engine.stats import paired, sign_test
from rag_position.eval.tasks.compare import run_compare
from rag_position.eval.tasks.open_domain import run_open_domain
from rag_position.models.protocols import Span, SpanScore


class GoldScorer(Scripted):
    """The question is likely (0) after the gold passage alone, unlikely (-5) after others;
    its answers are :class:`Scripted`'s: right when the gold is first, last or alone."""

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
