"""The cells of compare's report beyond accuracy: each row's cost split between the scorer
and the reader (:func:`split_cells`), and what the selecting rows kept
(:func:`kept_notes`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rag_position.eval.engine.report import (
    num,
)

SPLIT_HEADERS = ("scorer tokens", "scorer s", "reader tokens", "reader s")


SPLIT_NOTE = (
    "scorer / reader: each question's cost split between the model the strategies score "
    "with (--scorer) and the model that answers (--model): the scorer's calls while the "
    "passages were chosen, and everything else (the answer, a strategy's own generation)"
)


def split_cells(row: Mapping[str, Any]) -> list[str]:
    """A summary row's cost split into the scorer's and the reader's (tokens, seconds)."""
    return [
        num(row.get("scorer_prompt_tokens"), 0),
        num(row.get("scorer_seconds"), 2),
        num(row.get("reader_prompt_tokens"), 0),
        num(row.get("reader_seconds"), 2),
    ]


def kept_notes(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """What the selecting rows kept: passages per question, and how often the gold."""
    notes = []
    for r in rows:
        if "kept" in r:
            gold = r.get("gold_kept")
            notes.append(
                f"{r['strategy']} ({r['gold']}): kept {r['kept']:.2f} of {r['docs']} passages a "
                "question"
                + ("" if gold is None else f", the gold passage among them {100 * gold:.1f}%")
            )
    return notes
