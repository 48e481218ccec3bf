"""Two checks behind the README's 200-question comparison, from the repository root.

    .venv/bin/python results/compare200/checks.py

1. LangChain's and LlamaIndex's ``LongContextReorder`` (run by name, so both
   frameworks must be installed: ``scripts/setup.sh --dev``) build the same prompt as
   the ``edge`` strategy on every instance of the run: compared by the prompt hash in
   each ``edge`` record.
2. The GPU run (float32) against the CPU run of the first 77 questions
   (``results/compare200-partial``): answers to the prompts both made, and the
   orders the scoring strategies chose.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rag_position.data import place_gold
from rag_position.eval.rows.catalog import available_strategies
from rag_position.eval.tasks.datasets import load_multidoc

HERE = Path(__file__).parent


def records(path: Path) -> Iterator[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            yield json.loads(line)


def framework_orders(gpu: list[dict[str, Any]]) -> None:
    edge = {r["instance"]: r for r in gpu if r["strategy"] == "edge"}
    found = available_strategies()
    names = ["langchain_reorder", "llamaindex_reorder", "edge"]
    missing = [n for n in names if n not in found]
    if missing:
        raise SystemExit(f"not installed: {missing} (run scripts/setup.sh --dev)")
    same = dict.fromkeys(names, 0)
    instances = load_multidoc(None, docs=10, questions=len(edge)).instances
    for instance in instances:
        record = edge[instance.id]
        placed = place_gold(instance, record["fields"]["position"])
        for name in names:
            prompt = found[name].prepare(placed, None, seed=0).prompt or ""
            digest = hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:24]
            same[name] += digest == record["prompt_sha"]
    print(f"same prompt as the run's edge record, of {len(instances)} instances: {same}")


def cpu_against_gpu(gpu: list[dict[str, Any]], cpu: list[dict[str, Any]]) -> None:
    by_prompt_gpu = {(r["instance"], r["prompt_sha"]): r for r in gpu}
    by_prompt_cpu = {(r["instance"], r["prompt_sha"]): r for r in cpu}
    shared = sorted(set(by_prompt_gpu) & set(by_prompt_cpu))
    same = sum(by_prompt_gpu[k]["prediction"] == by_prompt_cpu[k]["prediction"] for k in shared)
    print(f"prompts answered on both: {len(shared)}; identical answers: {same}")
    chosen_gpu = {(r["strategy"], r["instance"]): r["prompt_sha"] for r in gpu}
    chosen_cpu = {(r["strategy"], r["instance"]): r["prompt_sha"] for r in cpu}
    for name in ("likelihood_selection", "convex_score", "convex_score_profile"):
        both = [k for k in chosen_cpu if k[0] == name and k in chosen_gpu]
        agree = sum(chosen_cpu[k] == chosen_gpu[k] for k in both)
        print(f"{name}: same order chosen on {agree} of {len(both)} questions run on both")


if __name__ == "__main__":
    gpu = [r for r in records(HERE / "predictions.jsonl.gz") if r["task"] == "compare"]
    partial = HERE.parent / "compare200-partial" / "predictions.jsonl.gz"
    cpu = [r for r in records(partial) if r["task"] == "compare"]
    framework_orders(gpu)
    cpu_against_gpu(gpu, cpu)
