"""Accuracy of a compare run's strategies on the questions ALL of them have answered.

    python benchmarks/compare_partial.py runs/compare200-alone/predictions.jsonl \
        --strategies passage_likelihood_profile,passage_likelihood,retriever,gold_last

For a run still in progress (resumable): every strategy judged on the same
instances, with 95% bootstrap intervals (the eval's), wins/losses against the first
baseline named in ``--against``, where the gold landed (``info.gold_at``), and the
mean scoring cost.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from statistics import fmean

from rag_position.eval.engine.stats import bootstrap_ci


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("predictions", type=Path)
    parser.add_argument("--strategies", required=True)
    parser.add_argument("--against", default="retriever")
    parser.add_argument("--setting", default="docs=10 gold=random(seed=0)")
    args = parser.parse_args()
    names = args.strategies.split(",")
    by: dict[str, dict[str, dict]] = defaultdict(dict)
    for line in args.predictions.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        if r["setting"] == args.setting and r["strategy"] in {*names, args.against}:
            by[r["strategy"]][r["instance"]] = r
    common = set.intersection(*(set(by[n]) for n in {*names, args.against}))
    base = by[args.against]
    print(f"{len(common)} instances answered by every strategy ({args.setting})")
    print(
        "| strategy | accuracy | wins / losses vs "
        + args.against
        + " | gold last | prompt tokens |"
    )
    print("| --- | --- | --- | --- | --- |")
    for name in names:
        rows = [by[name][i] for i in sorted(common)]
        mean, low, high = bootstrap_ci([float(r["correct"]) for r in rows], seed=0)
        wins = sum(r["correct"] and not base[r["instance"]]["correct"] for r in rows)
        losses = sum(base[r["instance"]]["correct"] and not r["correct"] for r in rows)
        last = sum((r.get("info") or {}).get("gold_at") == 9 for r in rows)
        tokens = fmean(r["cost"]["prompt_tokens"] for r in rows)
        print(
            f"| {name} | {100 * mean:.1f} [{100 * low:.1f}, {100 * high:.1f}] | {wins} / {losses} "
            f"| {last} | {tokens:,.0f} |"
        )


if __name__ == "__main__":
    main()
