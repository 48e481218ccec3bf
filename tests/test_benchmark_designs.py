"""benchmarks/ordering_designs.py judged on synthetic tables whose answer is known.

A prompt's score is ``sum_j w_j g_{o[j]}`` plus noise (``w`` a position effect, ``g`` each
passage's effect, the gold's the largest); each passage alone scores its own effect plus
noise, so the passage-alone design must find the gold.
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
POSITION_EFFECT = [0.1 * j for j in range(N)]


def _rows(questions: int, seed: int) -> list[dict[str, Any]]:
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
            -3.0 + sum(w * effect[d] for w, d in zip(POSITION_EFFECT, o, strict=True))
            for o in orders
        ]
        rows.append(
            {
                "question": q, "n": N, "gold": gold, "orders": orders,
                "scores": [s + rng.gauss(0.0, 0.01) for s in scores],
                "alone": [-4.0 + e + rng.gauss(0.0, 0.05) for e in effect],
                "alone_prompt_tokens": 1300, "full_prompt_tokens": 1000,
            }
        )  # fmt: skip
    return rows


def test_the_designs_find_a_clear_gold_at_their_cost() -> None:
    report = designs.evaluate(_rows(questions=60, seed=7))
    top1 = {row["design"]: row["top1"] for row in report["rows"]}
    assert top1["alone"] >= 0.9 and top1["convex R=1 + alone"] >= 0.5
    for row in report["rows"]:
        low, high = row["ci95"]
        assert low <= row["top1"] <= high
        assert row["questions"] == 60
    cost = {row["design"]: row["full_prompts_of_tokens"] for row in report["rows"]}
    assert cost["alone"] == pytest.approx(1.3)  # counted in full prompts
    assert cost["convex R=1"] == N
    assert cost["convex R=1 + alone"] == pytest.approx(N + 1.3)
    with pytest.raises(SystemExit, match="no tables"):
        designs.evaluate([])


def test_longllmlingua_is_judged_on_the_questions_it_holds() -> None:
    rows = _rows(questions=10, seed=3)
    ranking = {row["question"]: [row["gold"]] for row in rows[:4]}
    ranking[rows[4]["question"]] = [(rows[4]["gold"] + 1) % N]
    report = designs.evaluate(rows, lingua=ranking)
    lingua = next(r for r in report["rows"] if r["design"].startswith("longllmlingua"))
    assert lingua["questions"] == 5
    assert lingua["top1"] == pytest.approx(0.8)
