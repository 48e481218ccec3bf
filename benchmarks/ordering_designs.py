"""Ordering designs judged offline on ``ordering.py tables``: gold identification vs cost.

Each design picks one passage per question as the gold candidate from what the
tables hold (the question's log-likelihood after R·N full prompts of rotated base
orders, and after each passage alone); its cost is the scoring tokens it reads, in
full prompts' worth (a full prompt = the mean tokens of the question's full
prompts; N passage-alone prompts cost about one). Top-1 rates with 95% Wilson
intervals. Designs:

- ``alone``: the passage whose prompt alone makes the question most likely
  (LongLLMLingua's idea with this project's QA prompt).
- ``convex R=r``: ConvexScore (E + C) on the first r rotation sets, as
  ``convex_score(n_base_orders=r)``.
- ``convex R=r + alone``: the two scores standardised within the question and added.
- ``alone top-3 -> convex R=r``: the passage-alone ranking keeps three candidates, the
  rotations decide among them.
- ``longllmlingua``: LongLLMLingua's coarse ranking run by name from the ``llmlingua``
  package on the same model and instances (``ordering_lingua.py``), where given.

Removed after measurement: a fit of a position effect shared across passages (the
prompt's score as ``c + sum_j w_j g_{o[j]}``, ``w`` shared by all questions, the
candidate the largest ``g``). Over one rotation set (the tables' R = 1) a prompt's
score is a circular correlation of ``w`` with the passage effects in base order, so
the tables fix ``w`` only up to a circular shift (and a sign), and a shifted ``w``
moves every pick by the same number of slots. Its label-free orientation held on 147
questions (23.1%, ConvexScore's level) and flipped with 8 more (2.6%); anchoring it
needs an outside reference such as the passage-alone scores, which identify the gold
better on their own.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from rag_position.strategies._convex_score import convex_scores, likelihood_table

Row = dict[str, Any]


def _top1(scores: Sequence[float]) -> int:
    return max(range(len(scores)), key=lambda d: (scores[d], -d))


def _z(values: Sequence[float]) -> list[float]:
    finite = [v for v in values if math.isfinite(v)]
    mu = statistics.fmean(finite)
    sd = statistics.pstdev(finite) or 1.0
    return [(v - mu) / sd if math.isfinite(v) else -math.inf for v in values]


def _convex(row: Row, r: int) -> list[float]:
    n = row["n"]
    table = likelihood_table(row["orders"][: r * n], row["scores"][: r * n], n)
    return convex_scores(table)[0]


def _wilson(hits: int, total: int, z: float = 1.96) -> list[float]:
    p = hits / total
    centre = (p + z * z / (2 * total)) / (1 + z * z / total)
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / (1 + z * z / total)
    return [round(centre - half, 4), round(centre + half, 4)]


def evaluate(rows: Sequence[Row], lingua: dict[int, list[int]] | None = None) -> dict[str, Any]:
    """Top-1 rate and cost of every design on ``rows`` (the tables' JSON lines).

    ``lingua``: LongLLMLingua's ranking per question (``ordering_lingua.py``), judged on
    the questions it holds; its cost is counted as the passage-alone prompts' (N
    one-document prompts; its own add a sentence to the question and drop the
    instruction, so this is approximate).
    """
    if not rows:
        raise SystemExit("no tables yet")
    n = rows[0]["n"]
    r_max = min(len(row["orders"]) for row in rows) // n
    designs: dict[str, tuple[Callable[[int, Row], list[float]], Callable[[Row], float]]] = {}

    def alone_cost(row: Row) -> float:
        return float(row["alone_prompt_tokens"]) / float(row["full_prompt_tokens"])

    designs["alone"] = (lambda i, row: row["alone"], alone_cost)
    for r in range(1, r_max + 1):
        designs[f"convex R={r}"] = (lambda i, row, r=r: _convex(row, r), lambda row, r=r: r * n)
        designs[f"convex R={r} + alone"] = (
            lambda i, row, r=r: [
                a + b for a, b in zip(_z(_convex(row, r)), _z(row["alone"]), strict=True)
            ],
            lambda row, r=r: r * n + alone_cost(row),
        )
        designs[f"alone top-3 -> convex R={r}"] = (
            lambda i, row, r=r: _filtered(row["alone"], _convex(row, r), 3),
            lambda row, r=r: r * n + alone_cost(row),
        )
    out = []
    for name, (score, cost) in designs.items():
        hits = sum(_top1(score(i, row)) == row["gold"] for i, row in enumerate(rows))
        out.append(
            {
                "design": name,
                "top1": round(hits / len(rows), 4),
                "ci95": _wilson(hits, len(rows)),
                "full_prompts_of_tokens": round(statistics.fmean(cost(row) for row in rows), 2),
                "questions": len(rows),
            }
        )
    if lingua:
        judged = [row for row in rows if row["question"] in lingua]
        hits = sum(lingua[row["question"]][0] == row["gold"] for row in judged)
        out.append(
            {
                "design": "longllmlingua (llmlingua 0.2.2, by name)",
                "top1": round(hits / len(judged), 4),
                "ci95": _wilson(hits, len(judged)),
                "full_prompts_of_tokens": round(statistics.fmean(alone_cost(r) for r in judged), 2),
                "questions": len(judged),
            }
        )
        if len(judged) < len(rows):  # passage alone on the same questions
            mine = sum(_top1(row["alone"]) == row["gold"] for row in judged)
            out.append(
                {
                    "design": "alone (on the same questions as longllmlingua)",
                    "top1": round(mine / len(judged), 4),
                    "ci95": _wilson(mine, len(judged)),
                    "full_prompts_of_tokens": round(
                        statistics.fmean(alone_cost(r) for r in judged), 2
                    ),
                    "questions": len(judged),
                }
            )
    return {
        "benchmark": "ordering.designs",
        "n": n,
        "questions": len(rows),
        "model": rows[0].get("model"),
        "chance": 1 / n,
        "rows": out,
    }


def _filtered(first: Sequence[float], second: Sequence[float], keep: int) -> list[float]:
    kept = set(sorted(range(len(first)), key=lambda d: (-first[d], d))[:keep])
    return [second[d] if d in kept else -math.inf for d in range(len(first))]
