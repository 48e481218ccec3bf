"""Rebuild the packaged 200-question reference: data/files/reference-embedded-200.json.

    .venv/bin/python scripts/make_reference.py                  # rewrites the packaged file
    .venv/bin/python scripts/make_reference.py --out ref.json   # elsewhere (the tests compare)

``eval quick`` shows these figures beside a run of the embedded model (its 10 questions
are the first 10 of these 200). Everything comes from the committed runs in
``results/``, all on ``embedded:SmolLM2-135M-Instruct@float32``:

- the U-curve (gold at 0, 4 and 9 of 10 passages, closed-book, oracle) from
  ``results/ucurve200``;
- the strategies with the gold at a random position from ``results/compare200``,
  ``results/compare200-alone`` and ``results/select200``, the first folder holding a
  strategy giving its row (a strategy in several folders must have the same figures in
  each). Wins, losses and the sign test are recomputed against the retriever's order
  from each folder's ``predictions.jsonl.gz`` (select200's report pairs with another row).

LangChain's and LlamaIndex's ``LongContextReorder`` get ``edge``'s figures: they build
its prompt on every question (``results/compare200/checks.py``). Accuracy and intervals
are the folders' ``summary.json`` figures, rounded to 6 decimals.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rag_position.data import packaged_data_dir
from rag_position.eval.engine.stats import paired
from rag_position.eval.rows.catalog import split_variant
from rag_position.eval.tasks.compare import PROFILE_ROWS
from rag_position.eval.tasks.reference import REFERENCE_FILE

ROOT = Path(__file__).resolve().parents[1]
MODEL = "embedded:SmolLM2-135M-Instruct@float32"
QUESTIONS = 200
SWEEP = "ucurve200"
COMPARISONS = ("compare200", "compare200-alone", "select200")
VERSUS = "retriever"
SAME_AS = {"langchain_reorder": "edge", "llamaindex_reorder": "edge"}
"""Rows given another strategy's figures: the same prompt on every question."""
SAME_AS_NOTE = (
    "LangChain's and LlamaIndex's LongContextReorder build edge's prompt on every "
    "question (results/compare200/checks.py): edge's figures"
)
PROFILE_NOTE = (
    "placed by the 200-question profile (results/ucurve200/profile.json); eval quick "
    "places by its own sweep's"
)


def records(folder: Path) -> Iterator[dict[str, Any]]:
    with gzip.open(folder / "predictions.jsonl.gz", "rt", encoding="utf-8") as lines:
        for line in lines:
            yield json.loads(line)


def command(recorded: str) -> str:
    """The recorded command without what does not change its figures (--out, --no-progress)."""
    words = shlex.split(recorded)
    kept: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word == "--out":
            skip = True
        elif word != "--no-progress":
            kept.append(word)
    return shlex.join(kept)


def figures(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "n": row["n"],
        "accuracy": round(row["accuracy"], 6),
        "ci_low": round(row["ci_low"], 6),
        "ci_high": round(row["ci_high"], 6),
    }


def summary(folder: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    payload = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    if payload["settings"]["model"] != MODEL:
        raise SystemExit(f"{folder}: model {payload['settings']['model']}, not {MODEL}")
    rows = [r for s in payload["sections"] for r in s["rows"]]
    for r in rows:
        if r["n"] != QUESTIONS:
            raise SystemExit(f"{folder}: {r['strategy']} {r['setting']}: n={r['n']}")
    return payload, rows


def sweep_rows(results: Path, sources: dict[str, Any]) -> list[dict[str, Any]]:
    folder = results / SWEEP
    payload, rows = summary(folder)
    source = f"results/{SWEEP}"
    sources[source] = {"command": command(payload["command"]), "questions": QUESTIONS}
    out = []
    for r in rows:
        kind = r["kind"]
        if kind not in ("position", "closedbook", "oracle"):
            continue
        out.append(
            {
                "task": r["task"],
                "strategy": r["strategy"],
                "setting": r["setting"],
                "label": f"gold at {r['position']}" if kind == "position" else kind,
                **figures(r),
                "source": source,
                "model": MODEL,
            }
        )
    return out


def compare_rows(results: Path, sources: dict[str, Any]) -> list[dict[str, Any]]:
    chosen: dict[str, dict[str, Any]] = {}
    for name in COMPARISONS:
        folder = results / name
        payload, rows = summary(folder)
        source = f"results/{name}"
        sources[source] = {"command": command(payload["command"]), "questions": QUESTIONS}
        run = {(r["strategy"], r["setting"]) for r in rows}
        answered = [
            r
            for r in records(folder)
            if r["task"] == "compare" and (r["strategy"], r["setting"]) in run
        ]
        pairs = paired(answered, VERSUS)
        for r in rows:
            if r["gold"] != "random":
                continue
            row = {
                "task": r["task"],
                "strategy": r["strategy"],
                "setting": r["setting"],
                "label": r["strategy"],
                **figures(r),
            }
            n = sum(
                1
                for a in answered
                if (a["strategy"], a["setting"]) == (r["strategy"], r["setting"])
            )
            if n != r["n"]:
                raise SystemExit(f"{folder}: {r['strategy']}: {n} predictions, summary n={r['n']}")
            found = pairs.get((r["strategy"], r["setting"]))
            if found is not None:
                wins, losses, p = found
                row.update(versus=VERSUS, wins=wins, losses=losses, sign_p=float(f"{p:.4g}"))
            elif r["strategy"] != VERSUS:
                raise SystemExit(f"{folder}: {r['strategy']} is not paired with {VERSUS}")
            if split_variant(r["strategy"])[0] in PROFILE_ROWS:
                row["note"] = PROFILE_NOTE
            row.update(source=source, model=MODEL)
            earlier = chosen.get(r["strategy"])
            if earlier is None:
                chosen[r["strategy"]] = row
            elif any(earlier[k] != row[k] for k in ("n", "accuracy", "ci_low", "ci_high")):
                raise SystemExit(
                    f"{r['strategy']}: {earlier['source']} and {source} give different figures"
                )
    for name, same in SAME_AS.items():
        if name not in chosen and same in chosen:
            chosen[name] = {
                **chosen[same],
                "strategy": name,
                "label": name,
                "same_as": same,
                "note": SAME_AS_NOTE,
            }
    return list(chosen.values())


def build(results: Path) -> dict[str, Any]:
    """The reference file's content, from the committed runs in ``results``."""
    sources: dict[str, Any] = {}
    rows = sweep_rows(results, sources) + compare_rows(results, sources)
    return {
        "format": 1,
        "about": (
            "The embedded model's figures on the first 200 dev questions of the packaged "
            "NQ-open oracle file, 10 passages: the reference eval quick shows beside a run "
            "of the same model"
        ),
        "model": MODEL,
        "questions": QUESTIONS,
        "made_by": "python scripts/make_reference.py",
        "sources": sources,
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=ROOT / "results")
    parser.add_argument("--out", type=Path, default=packaged_data_dir() / REFERENCE_FILE)
    args = parser.parse_args(argv)
    payload = build(args.results)
    args.out.write_text(json.dumps(payload, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{args.out}: {len(payload['rows'])} rows from {', '.join(payload['sources'])}")


if __name__ == "__main__":
    main(sys.argv[1:])
