"""Tune's choice: the most accurate candidate within the token budget, the cheaper of two
within the tie margin (:func:`choose`), and the report's section that shows it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rag_position.eval.engine.common import EvalConfigError
from rag_position.eval.engine.report import Section, Table, acc_cell, num
from rag_position.eval.rows import (
    TUNE_REFERENCE,
)

BUDGET_FACTOR = 3.0
"""Default token budget: this many times the retriever order's tokens per question."""
TIE_POINTS = 2.0
"""Candidates within this many accuracy points of the best count as tied; the cheapest wins."""


def choose(
    rows: Sequence[Mapping[str, Any]], *, budget: float | None, tie: float
) -> tuple[str, list[dict[str, Any]], list[str]]:
    """The chosen candidate, the evidence table (one dict per candidate) and notes.

    The most accurate candidate within the budget; among those within ``tie`` accuracy
    points of it, the one with the fewest tokens per question (then the more accurate,
    then the earlier listed).

    Example:
        >>> rows = [
        ...     {"strategy": "retriever", "n": 60, "accuracy": 0.20, "ci_low": 0.1,
        ...      "ci_high": 0.3, "prompt_tokens": 1000.0, "generated_tokens": 10.0},
        ...     {"strategy": "a", "n": 60, "accuracy": 0.40, "ci_low": 0.3, "ci_high": 0.5,
        ...      "prompt_tokens": 1500.0, "generated_tokens": 10.0, "wins": 14, "losses": 2,
        ...      "sign_p": 0.004},
        ...     {"strategy": "b", "n": 60, "accuracy": 0.39, "ci_low": 0.3, "ci_high": 0.5,
        ...      "prompt_tokens": 1100.0, "generated_tokens": 10.0, "wins": 13, "losses": 2,
        ...      "sign_p": 0.007},
        ...     {"strategy": "c", "n": 60, "accuracy": 0.60, "ci_low": 0.5, "ci_high": 0.7,
        ...      "prompt_tokens": 9000.0, "generated_tokens": 10.0}]
        >>> chosen, evidence, notes = choose(rows, budget=None, tie=2.0)
        >>> chosen, [e["eligible"] for e in evidence]
        ('b', [True, True, True, False])
    """
    if not rows:
        raise EvalConfigError("tune: no candidate was measured")
    reference = next((r for r in rows if r["strategy"] == TUNE_REFERENCE), rows[0])
    limit = budget if budget is not None else BUDGET_FACTOR * _tokens(reference)
    notes: list[str] = []
    evidence = []
    for r in rows:
        evidence.append(
            {
                "strategy": r["strategy"],
                "n": int(r["n"]),
                "accuracy": round(100 * float(r["accuracy"]), 2),
                "low": round(100 * float(r["ci_low"]), 2),
                "high": round(100 * float(r["ci_high"]), 2),
                "wins": r.get("wins"),
                "losses": r.get("losses"),
                "p_value": r.get("sign_p"),
                "tokens_per_question": round(_tokens(r), 1),
                "eligible": _tokens(r) <= limit,
            }
        )
    eligible = [e for e in evidence if e["eligible"]] or [evidence[0]]
    best = max(e["accuracy"] for e in eligible)
    tied = [e for e in eligible if best - e["accuracy"] <= tie]
    order = {e["strategy"]: i for i, e in enumerate(evidence)}
    pick = min(tied, key=lambda e: (e["tokens_per_question"], -e["accuracy"], order[e["strategy"]]))
    over = [e["strategy"] for e in evidence if not e["eligible"]]
    notes.append(
        f"budget: {limit:.0f} tokens a question"
        + ("" if budget is not None else f" ({BUDGET_FACTOR:g}x the retriever order's)")
        + (f"; over it, not chosen: {', '.join(over)}" if over else "")
    )
    if len(tied) > 1:
        notes.append(
            f"within {tie:g} points of the best ({best:.1f}): "
            f"{', '.join(e['strategy'] for e in tied)}; the cheapest is chosen"
        )
    return str(pick["strategy"]), evidence, notes


def _tokens(row: Mapping[str, Any]) -> float:
    return float(row.get("prompt_tokens") or 0.0) + float(row.get("generated_tokens") or 0.0)


_CELL = {"accuracy": "accuracy", "ci_low": "low", "ci_high": "high"}


def _row(e: Mapping[str, Any]) -> dict[str, Any]:
    """An evidence entry as a summary row (accuracy as a fraction, like every row)."""
    return {"n": e["n"], **{k: e[f] / 100 for k, f in _CELL.items()}}


def choice_section(
    chosen: str, evidence: Sequence[Mapping[str, Any]], notes: list[str], path: Path
) -> Section:
    pick = next(e for e in evidence if e["strategy"] == chosen)
    cells = [
        [
            ("**" + e["strategy"] + "**") if e["strategy"] == chosen else e["strategy"],
            str(e["n"]),
            acc_cell(
                {
                    "accuracy": e["accuracy"] / 100,
                    "ci_low": e["low"] / 100,
                    "ci_high": e["high"] / 100,
                }
            ),
            "--" if e["wins"] is None else f"{e['wins']}/{e['losses']}",
            num(e["tokens_per_question"], 0),
            "yes" if e["eligible"] else "no",
        ]
        for e in evidence
    ]
    return Section(
        title="The choice",
        task="tune",
        rows=[{**_row(pick), "strategy": chosen, "setting": "chosen", "tuned": str(path)}],
        tables=[
            Table(
                "Candidates, gold at a random position: accuracy (%) [95% CI], paired with "
                "the retriever order, tokens per question",
                ["strategy", "n", "accuracy", "won/lost vs retriever", "tokens", "within budget"],
                cells,
            )
        ],
        notes=[f"chosen: {chosen}; written to {path}", *notes],
        settings={"chosen": chosen},
    )


def model_dtype(model: Any) -> str | None:
    dtype = getattr(model, "dtype", None)
    return None if dtype is None else str(dtype).removeprefix("torch.")
