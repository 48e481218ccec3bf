"""The scorer x reader matrix from compare runs: each row's accuracy on the questions every
row of the cell answered, select_and_place paired with the best full-prompt row and the
peers, and the reader's prompt tokens against the full prompt's (issue "Your reader, our
scorer").

    .venv/bin/python scripts/scorer_matrix.py --cell "SmolLM2 -> Qwen 0.5B" runs/qwen05-smol200 \\
        --cell "SmolLM2 -> SmolLM2" results/select200 results/compare200-alone --out matrix.json

A cell is one or more run folders (their predictions.jsonl or predictions.jsonl.gz); a row
found in several is read from the first. Only the questions every row of the cell has
answered count (a partial run counts its first questions), so rows are paired.
"""

from __future__ import annotations

import argparse
import gzip
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rag_position.eval.engine.stats import bootstrap_ci, sign_test

FULL_PROMPT = (
    "retriever",
    "edge",
    "passage_likelihood",
    "passage_likelihood:placement=last",
    "passage_likelihood_profile",
)
"""Rows that give the reader every passage (in some order)."""
SELECTED = (
    "select_and_place",
    "select_and_place:mass=0.99",
    "select_and_place:top_n=1",
    "select_and_place:similar=1",
)
PEERS = ("embeddings_filter", "embeddings_filter_threshold", "llm_rerank", "longllmlingua_top1")
BOUNDS = ("gold_last", "gold_alone")


def _records(folder: Path) -> Iterator[dict[str, Any]]:
    for name in ("predictions.jsonl", "predictions.jsonl.gz"):
        path = folder / name
        if path.is_file():
            opener = gzip.open if name.endswith(".gz") else open
            with opener(path, "rt", encoding="utf-8") as lines:
                for line in lines:
                    if line.strip():
                        yield json.loads(line)
            return
    raise SystemExit(f"{folder}: no predictions.jsonl(.gz)")


def cell(folders: Sequence[Path]) -> dict[str, Any]:
    """One cell: per row, per question, the record (compare's, gold at a random position)."""
    rows: dict[str, dict[str, dict[str, Any]]] = {}
    for folder in folders:
        seen: dict[str, dict[str, dict[str, Any]]] = {}
        for r in _records(folder):
            if r.get("task") == "multidoc" and r.get("setting") == "oracle":
                seen.setdefault("gold_alone", {})[r["instance"]] = r  # the same prompt
                continue
            if r.get("task") != "compare" or "gold=random" not in r.get("setting", ""):
                continue
            seen.setdefault(r["strategy"], {})[r["instance"]] = r
        for name, by in seen.items():
            rows.setdefault(name, by)
    if not rows:
        raise SystemExit(f"{list(map(str, folders))}: no compare records")
    # The questions every row answered; a row run on far fewer (a costly peer on the first
    # questions only) is left out of that set, reported on its own questions and paired
    # with select_and_place on those.
    most = max(len(by) for by in rows.values())
    full = [set(by) for by in rows.values() if len(by) >= most / 2]
    common = set.intersection(*full)
    return {"rows": rows, "questions": sorted(common)}


def summarize(name: str, found: dict[str, Any]) -> dict[str, Any]:
    qs, rows = found["questions"], found["rows"]
    out: dict[str, Any] = {"cell": name, "n": len(qs), "rows": {}}
    model = rows[next(iter(rows))][qs[0]]["model"] if qs else None
    out["model"] = model
    for row, by in rows.items():
        own = qs if all(q in by for q in qs) else sorted(set(by) & set(rows[next(iter(rows))]))
        correct = [1.0 if by[q]["correct"] else 0.0 for q in own]
        mean, low, high = bootstrap_ci(correct, seed=0)
        # A run without --scorer records no reader_cost: the answer's prompt is the reader's.
        reader = [by[q].get("reader_cost", by[q]["generation_cost"]) for q in own]
        scorer = [by[q].get("scorer_cost") for q in own]
        kept = [by[q]["info"].get("gold_kept") for q in own]
        entry = {
            "n": len(own),
            "accuracy": 100 * mean,
            "low": 100 * low,
            "high": 100 * high,
            "reader_prompt_tokens": sum(c["prompt_tokens"] for c in reader) / max(len(own), 1),
            "scorer_prompt_tokens": (
                sum(c["prompt_tokens"] for c in scorer) / len(own)
                if own and all(c is not None for c in scorer)
                else None
            ),
        }
        if kept and all(k is not None for k in kept):
            entry["gold_kept"] = 100 * sum(kept) / len(kept)
        failures = [by[q]["info"].get("format_failure") for q in own]
        if failures and all(f is not None for f in failures):
            entry["format_failures"] = int(sum(failures))
        out["rows"][row] = entry
    full = [r for r in FULL_PROMPT if r in rows]
    if full and "select_and_place" in rows:
        best = max(full, key=lambda r: out["rows"][r]["accuracy"])
        out["best_full_prompt"] = best
        out["versus"] = {
            other: _paired(rows["select_and_place"], rows[other], qs)
            for other in (best, *(p for p in PEERS if p in rows), *(b for b in BOUNDS if b in rows))
        }
        out["variants_versus"] = {  # every other selection, paired with the same rows
            variant: {
                other: _paired(rows[variant], rows[other], qs)
                for other in (best, "select_and_place", *PEERS, *BOUNDS)
                if other in rows
            }
            for variant in SELECTED[1:]
            if variant in rows
        }
        if "gold_alone" in rows:  # the most any selection could win against each peer
            out["oracle_versus"] = {
                peer: _paired(rows["gold_alone"], rows[peer], qs) for peer in PEERS if peer in rows
            }
        base = out["rows"]["retriever"]["reader_prompt_tokens"] if "retriever" in rows else None
        if base:
            out["reader_tokens_vs_full"] = (
                out["rows"]["select_and_place"]["reader_prompt_tokens"] / base
            )
    return out


def _paired(a: dict[str, Any], b: dict[str, Any], qs: Sequence[str]) -> dict[str, Any]:
    if not all(q in a and q in b for q in qs):  # a row on fewer questions: paired on those
        qs = sorted(set(a) & set(b))
    wins = sum(1 for q in qs if a[q]["correct"] and not b[q]["correct"])
    losses = sum(1 for q in qs if b[q]["correct"] and not a[q]["correct"])
    return {"wins": wins, "losses": losses, "p": sign_test(wins, losses)}


def markdown(cells: Sequence[dict[str, Any]]) -> str:
    names = [c["cell"] for c in cells]
    every = list(
        dict.fromkeys(
            r
            for r in (*FULL_PROMPT, *SELECTED, *PEERS, *BOUNDS)
            if any(r in c["rows"] for c in cells)
        )
    )
    lines = [
        "| row | "
        + " | ".join(f"{n} (n={c['n']})" for n, c in zip(names, cells, strict=True))
        + " |",
        "| --- |" + " --- |" * len(cells),
    ]
    for row in every:
        cells_text = []
        for c in cells:
            e = c["rows"].get(row)
            if e is None:
                cells_text.append("")
                continue
            text = f"{e['accuracy']:.1f} [{e['low']:.1f}, {e['high']:.1f}]"
            if e["n"] != c["n"]:
                text += f" n={e['n']}"
            v = c.get("versus", {}).get(row)
            if v is not None:
                text += f" ({v['wins']}/{v['losses']}, p={v['p']:.2g})"
            cells_text.append(text)
        lines.append(f"| {row} | " + " | ".join(cells_text) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--cell",
        nargs="+",
        action="append",
        required=True,
        metavar=("NAME", "FOLDER"),
        help="a cell's name, then its run folders",
    )
    parser.add_argument("--out", type=Path, help="write the matrix as JSON here")
    args = parser.parse_args()  # fmt: skip
    cells = [summarize(c[0], cell([Path(f) for f in c[1:]])) for c in args.cell]
    print(markdown(cells))
    print("(select_and_place's won/lost against that row, and the sign test's p)")
    for c in cells:
        print(
            f"{c['cell']}: best full-prompt row {c.get('best_full_prompt')}; reader tokens with "
            f"selection / full prompt: {c.get('reader_tokens_vs_full', float('nan')):.2f}"
        )
    if args.out is not None:
        args.out.write_text(json.dumps(cells, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
