"""LongLLMLingua's coarse ranking, by name from the ``llmlingua`` package, on the tables' questions.

``llmlingua`` 0.2.2 comes with the ``[baselines]`` extra (in ``[all]``, which
``scripts/setup.sh`` installs).

    python benchmarks/ordering_lingua.py --model-dir ~/.cache/rag-position/models/<exported> \
        --tables results/ordering-tables/tables-r1-shard*.jsonl \
        --out results/ordering-tables/lingua.jsonl

The same instances as ``ordering.py tables`` (the eval's, gold at a seeded random
position) and the same model: the embedded GGUF exported to a transformers folder
(``rag-position serve`` exports it once, under ``~/.cache/rag-position/models``).
``PromptCompressor.get_rank_results(docs, question, rank_method="longllmlingua",
condition_in_question="after")``: the question's perplexity (with LongLLMLingua's
sentence "We can get the answer to this question in the given documents.")
conditioned on each document alone, lowest first. Each document as the QA prompt
writes it (``Document [i](Title: ...) text``). One line per question, appended:
``{"question", "ranking"}``; a rerun resumes. Offline shim: the package builds a
tiktoken encoder for OpenAI token counts at start-up, which downloads its
encoding; ranking never uses it, so ``tiktoken.encoding_for_model`` is stubbed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from ordering import _instances, _read_tables

from rag_position.prompts import DOCUMENT_TEMPLATE
from rag_position.strategies._base import to_passages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-dir", type=Path, required=True)
    parser.add_argument("--tables", type=Path, nargs="+", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    import tiktoken

    tiktoken.encoding_for_model = lambda name: None  # see the module doc
    from llmlingua import PromptCompressor

    compressor = PromptCompressor(model_name=str(args.model_dir), device_map="cpu")
    rows = [row for path in args.tables for row in _read_tables(path)]
    done = set()
    if args.out.exists():
        done = {json.loads(line)["question"] for line in args.out.read_text().splitlines() if line}
    n = rows[0]["n"]
    instances = _instances(n, max(r["question"] for r in rows) + 1, args.seed)
    for row in sorted(rows, key=lambda r: r["question"]):
        k = row["question"]
        if k in done:
            continue
        inst = instances[k]
        assert inst.gold_index == row["gold"], "the tables were made from other instances"
        docs = [
            DOCUMENT_TEMPLATE.format(index=i + 1, title=p.title, text=p.text)
            for i, p in enumerate(to_passages(list(inst.passages)))
        ]
        ranked = compressor.get_rank_results(
            docs, inst.question, "longllmlingua", "after", [0] * len(docs)
        )
        with args.out.open("a", encoding="utf-8") as f:
            f.write(json.dumps({"question": k, "ranking": [int(i) for i, _ in ranked]}) + "\n")
        print(f"question {k}: gold {inst.gold_index}, top {int(ranked[0][0])}", flush=True)


if __name__ == "__main__":
    main()
