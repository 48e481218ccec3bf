"""Open-domain reader accuracy at each k, with and without selection, on the questions both
runs answered (one run may cover fewer: the first 50 of the other's 200).

    .venv/bin/python scripts/open_domain_paired.py results/open-domain-bm25 \\
        results/select-open-domain50
    .venv/bin/python scripts/open_domain_paired.py results/select-open-domain200 \\
        results/open-domain-peers --versus reader+select_and_place
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path


def records(folder: Path) -> list[dict[str, object]]:
    """The open-domain records of a run folder (``predictions.jsonl`` or its ``.gz``)."""
    path = folder / "predictions.jsonl.gz"
    opener = gzip.open if path.is_file() else open
    path = path if path.is_file() else folder / "predictions.jsonl"
    with opener(path, "rt", encoding="utf-8") as lines:
        return [r for r in map(json.loads, lines) if r["task"] == "open-domain"]


def correct_by(folder: Path) -> dict[tuple[str, int, str], bool]:
    """Each open-domain record's correctness by (reader row, k, question)."""
    return {
        (str(r["strategy"]), int(r["fields"]["k"]), str(r["instance"])): bool(r["correct"])  # type: ignore[index]
        for r in records(folder)
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path, help="open-domain run folders")
    parser.add_argument(
        "--per-k",
        action="store_true",
        help="pair each k on the questions every row answered at that k (partial runs)",
    )
    parser.add_argument(
        "--versus",
        metavar="ROW",
        help="each other row's wins / losses against ROW at each k (questions "
        "one of the two answered), and the two-sided sign test's p",
    )
    args = parser.parse_args()
    found: dict[tuple[str, int, str], bool] = {}
    for folder in args.folders:
        found.update(correct_by(folder))
    rows = sorted({(name, k) for name, k, _ in found})
    if args.versus:
        versus(found, args.versus)
        return
    if args.per_k:
        print("| k | questions | " + " | ".join(sorted({n for n, _ in rows})) + " |")
        print("| --- | --- |" + " --- |" * len({n for n, _ in rows}))
        for k in sorted({k for _, k in rows}):
            names = sorted({n for n, kk in rows if kk == k})
            shared = set.intersection(
                *({q for n, kk, q in found if (n, kk) == (m, k)} for m in names)
            )
            cells = [
                f"{100 * sum(found[(m, k, q)] for q in shared) / len(shared):.1f}" for m in names
            ]
            print(f"| {k} | {len(shared)} | " + " | ".join(cells) + " |")
        return
    questions = set.intersection(*({q for name, k, q in found if (name, k) == row} for row in rows))
    print(f"{len(questions)} questions every row answered")
    print("| reader row | k | accuracy (%) |\n| --- | --- | --- |")
    for name, k in rows:
        right = sum(found[(name, k, q)] for q in questions)
        print(f"| {name} | {k} | {100 * right / len(questions):.1f} |")
    # the reader's context without any chunk holding an answer (records that say so)
    held: dict[tuple[str, int], list[float]] = {}
    for folder in args.folders:
        for r in records(folder):
            value = r["info"].get("answer_in_context")  # type: ignore[attr-defined]
            if value is not None:
                held.setdefault((str(r["strategy"]), int(r["fields"]["k"])), []).append(value)  # type: ignore[index]
    if held:
        print("\n| reader row | k | questions | no chunk given holds an answer (%) |")
        print("| --- | --- | --- | --- |")
        for (name, k), values in sorted(held.items()):
            print(f"| {name} | {k} | {len(values)} | {100 * (1 - sum(values) / len(values)):.1f} |")


def versus(found: dict[tuple[str, int, str], bool], base: str) -> None:
    """Each row against ``base`` at each k, on the questions both answered."""
    from rag_position.eval.engine.stats import sign_test

    print(f"| k | row | questions | row / {base} (%) | wins / losses | sign test p |")
    print("| --- | --- | --- | --- | --- | --- |")
    for k in sorted({k for _, k, _ in found}):
        mine = {q for n, kk, q in found if (n, kk) == (base, k)}
        for name in sorted({n for n, kk, _ in found if kk == k and n != base}):
            shared = sorted(mine & {q for n, kk, q in found if (n, kk) == (name, k)})
            if not shared:
                continue
            a = [found[(name, k, q)] for q in shared]
            b = [found[(base, k, q)] for q in shared]
            wins = sum(x and not y for x, y in zip(a, b, strict=True))
            losses = sum(y and not x for x, y in zip(a, b, strict=True))
            p = sign_test(wins, losses)
            print(
                f"| {k} | {name} | {len(shared)} | {100 * sum(a) / len(shared):.1f} / "
                f"{100 * sum(b) / len(shared):.1f} | {wins} / {losses} | {p:.2g} |"
            )


if __name__ == "__main__":
    main()
