"""How often each selecting row keeps the gold passage, reader aside: the scorer's share of
the matrix, on all 200 reported dev questions (gold at compare's seeded random position).

    .venv/bin/python scripts/selection_recall.py --questions 200 \\
        --likelihood results/select200 --out results/selection-recall/recall.json

The embedding filters run here (the packaged MiniLM embedder: a minute); likelihood
selection's gold-kept rates are read from a compare run's records (``--likelihood``: its
folder), since they need the scorer's forward passes.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
from pathlib import Path

from rag_position.data import place_gold
from rag_position.eval.engine.common import derive_seed
from rag_position.eval.rows.peers import peer_strategies
from rag_position.eval.tasks.datasets import load_multidoc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--likelihood", type=Path, action="append", default=[])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    dataset = load_multidoc(None, docs=10, questions=args.questions)
    rows: dict[str, dict[str, float]] = {}
    peers = peer_strategies()
    top1: dict[str, float] = {}  # embeddings_filter's gold kept, by question
    for name in ("embeddings_filter", "embeddings_filter_threshold"):
        kept, gold, none = [], [], []
        for inst in dataset.instances:
            k = inst.k
            position = random.Random(derive_seed(0, "gold-position", inst.id)).randrange(k)
            info = peers[name].prepare(place_gold(inst, position), None, seed=0).info
            if name == "embeddings_filter":
                top1[str(inst.id)] = info["gold_kept"]
            kept.append(info["kept"])
            gold.append(info["gold_kept"])
            none.append(info["none_kept"])
        n = len(kept)
        rows[name] = {"n": n, "kept": sum(kept) / n, "gold_kept": 100 * sum(gold) / n,
                      "none_kept": 100 * sum(none) / n}  # fmt: skip
    for folder in args.likelihood:
        path = folder / "predictions.jsonl.gz"
        opener = gzip.open if path.is_file() else open
        path = path if path.is_file() else folder / "predictions.jsonl"
        by: dict[str, dict[str, dict[str, float]]] = {}
        with opener(path, "rt", encoding="utf-8") as lines:
            for line in lines:
                r = json.loads(line)
                if r["task"] == "compare" and "gold_kept" in r["info"]:
                    by.setdefault(r["strategy"], {})[r["instance"]] = r["info"]
        for name, infos in by.items():
            n = len(infos)
            paired = [q for q in infos if q in top1]
            rows[f"{name} ({folder.name})"] = {
                "n": n,
                "kept": sum(i["kept"] for i in infos.values()) / n,
                "gold_kept": 100 * sum(i["gold_kept"] for i in infos.values()) / n,
                # beside embeddings_filter's top 1 on the same questions: kept by either, by both
                "either_with_embeddings_filter": sum(
                    1 for q in paired if infos[q]["gold_kept"] or top1[q]
                ),
                "both_with_embeddings_filter": sum(
                    1 for q in paired if infos[q]["gold_kept"] and top1[q]
                ),
            }
    print(
        "| row | n | passages kept | gold kept (%) | with embeddings_filter: either / both |\n"
        "| --- | --- | --- | --- | --- |"
    )
    for name, r in rows.items():
        union = r.get("either_with_embeddings_filter")
        both = "" if union is None else f"{union} / {r['both_with_embeddings_filter']}"
        print(f"| {name} | {r['n']} | {r['kept']:.2f} | {r['gold_kept']:.1f} | {both} |")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
