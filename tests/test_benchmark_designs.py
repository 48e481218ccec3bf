"""benchmarks/ordering_designs.py judged on synthetic tables whose answer is known.

The tables: a prompt's score is ``sum_j w_j g_{o[j]}`` plus noise (``w`` a position
effect, ``g`` each passage's effect, the gold's the largest), and each passage alone
scores its own effect plus noise, so the passage-alone design must find the gold, and
the rates, intervals and costs must be counted as the module says.
"""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path
from typing import Any

import pytest

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "ordering_designs.py"
_SPEC = importlib.util.spec_from_file_location("ordering_designs", _PATH)
assert _SPEC is not None and _SPEC.loader is not None
designs = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(designs)

N = 10


def _rows(position_effect: list[float], questions: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    rows = []
    for q in range(questions):
        gold = rng.randrange(N)
        effect = [rng.gauss(0.0, 0.1) for _ in range(N)]
        effect[gold] = 1.0
        base = list(range(N))
        rng.shuffle(base)
        orders = [base[k:] + base[:k] for k in range(N)]
        scores = [
            -3.0
            + sum(w * effect[d] for w, d in zip(position_effect, order, strict=True))
            + rng.gauss(0.0, 0.01)
            for order in orders
        ]
        rows.append(
            {
                "question": q,
                "n": N,
                "gold": gold,
                "orders": orders,
                "scores": scores,
                "alone": [-4.0 + e + rng.gauss(0.0, 0.05) for e in effect],
                "alone_prompt_tokens": 1300,
                "full_prompt_tokens": 1000,
            }
        )
    return rows


def _top1(report: dict[str, Any], design: str) -> float:
    return next(row["top1"] for row in report["rows"] if row["design"] == design)


def test_passage_alone_and_the_combined_designs_find_a_clear_gold() -> None:
    report = designs.evaluate(_rows([0.1 * j for j in range(N)], questions=60, seed=7))
    assert _top1(report, "alone") >= 0.9
    assert _top1(report, "convex R=1 + alone") >= 0.5
    for row in report["rows"]:
        low, high = row["ci95"]
        assert low <= row["top1"] <= high
        assert row["questions"] == 60


def test_longllmlingua_is_judged_on_the_questions_it_holds() -> None:
    rows = _rows([0.1 * j for j in range(N)], questions=10, seed=3)
    ranking = {row["question"]: [row["gold"]] for row in rows[:4]}
    ranking[rows[4]["question"]] = [(rows[4]["gold"] + 1) % N]
    report = designs.evaluate(rows, lingua=ranking)
    lingua = next(r for r in report["rows"] if r["design"].startswith("longllmlingua"))
    assert lingua["questions"] == 5
    assert lingua["top1"] == pytest.approx(0.8)


def test_costs_are_counted_in_full_prompts() -> None:
    report = designs.evaluate(_rows([0.1 * j for j in range(N)], questions=10, seed=1))
    cost = {row["design"]: row["full_prompts_of_tokens"] for row in report["rows"]}
    assert cost["alone"] == pytest.approx(1.3)
    assert cost["convex R=1"] == N
    assert cost["convex R=1 + alone"] == pytest.approx(N + 1.3)


def test_no_tables_is_an_error() -> None:
    with pytest.raises(SystemExit, match="no tables"):
        designs.evaluate([])
