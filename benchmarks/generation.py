"""Greedy answers per second on the local backend: one prompt at a time vs batches of 8.

    python benchmarks/generation.py --prompts 16 --dtype float32

Two prompt sets from the packaged NQ oracle file: ``closed-book`` (the question
alone, about 40 tokens with the chat template, answers of up to 100 tokens: decoding
dominates) and ``10-passage`` (the published qa prompt over ten passages, about 1,330
tokens: the prefill dominates, as in ``eval quick``). Each set is answered three ways
on the embedded model, greedy, at most 100 new tokens:

- ``hf-batch-1``: ``model.generate`` of transformers, one prompt at a time (the
  backend's path before batched CPU decoding, and its path on accelerators);
- ``batch-1``: the backend, one prompt a call;
- ``batch-8``: the backend, 8 prompts a call (each prefilled alone, decoded together).

The JSON holds answers per second for each, the speed-up of batch 8 over batch 1,
whether every answer is identical to ``hf-batch-1``, and the load average at start
(run it on a quiet machine). Target (issue 31): batch 8 at least 3 times batch 1.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from rag_position.data import ORACLE_FILE, default_data_dir, load_qa
from rag_position.models import load_model
from rag_position.models.transformers_backend import TransformersModel, cpu_supports_bf16
from rag_position.prompts import render_qa

MAX_NEW_TOKENS = 100
BATCH = 8


def prompt_sets(n: int) -> dict[str, list[str]]:
    records = load_qa(default_data_dir() / ORACLE_FILE, limit=10 * n)
    long = []
    for i in range(n):
        group = records[i * 10 : (i + 1) * 10]
        long.append(render_qa(group[5].question, [r.passages[0] for r in group]))
    return {"closed-book": [r.question for r in records[:n]], "10-passage": long}


def timed(run: Callable[[], list[str]]) -> tuple[list[str], float]:
    start = time.perf_counter()
    out = run()
    return out, time.perf_counter() - start


def measure(model: TransformersModel, prompts: list[str]) -> dict[str, Any]:
    def one_by_one() -> list[str]:
        return [model.generate([p], max_new_tokens=MAX_NEW_TOKENS)[0] for p in prompts]

    def batched() -> list[str]:
        out: list[str] = []
        for i in range(0, len(prompts), BATCH):
            out += model.generate(prompts[i : i + BATCH], max_new_tokens=MAX_NEW_TOKENS)
        return out

    model.split_prefill = False
    reference, hf_s = timed(one_by_one)
    model.split_prefill = True
    single, single_s = timed(one_by_one)
    batch, batch_s = timed(batched)
    n = len(prompts)
    lengths = [len(model.encode(p).ids) for p in prompts]
    generated = [len(model.tokenizer(a, add_special_tokens=False).input_ids) for a in reference]
    return {
        "prompts": n,
        "mean_prompt_tokens": sum(lengths) / n,
        "mean_answer_tokens": sum(generated) / n,
        "hf-batch-1": {"seconds": hf_s, "answers_per_second": n / hf_s},
        "batch-1": {"seconds": single_s, "answers_per_second": n / single_s},
        f"batch-{BATCH}": {"seconds": batch_s, "answers_per_second": n / batch_s},
        "speedup_batch_8_over_batch_1": single_s / batch_s,
        "speedup_batch_8_over_hf_batch_1": hf_s / batch_s,
        "identical_to_hf_batch_1": {
            "batch-1": sum(a == b for a, b in zip(reference, single, strict=True)),
            f"batch-{BATCH}": sum(a == b for a, b in zip(reference, batch, strict=True)),
            "of": n,
        },
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--prompts", type=int, default=16, help="prompts per set")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "auto"])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/generation.json"))
    args = parser.parse_args(argv)

    load = os.getloadavg()[0]
    model = load_model("embedded", dtype=args.dtype)
    assert isinstance(model, TransformersModel)
    sets = prompt_sets(args.prompts)
    model.generate(sets["closed-book"][:2], max_new_tokens=4)  # first-call overheads
    results = {name: measure(model, prompts) for name, prompts in sets.items()}
    out = {
        "benchmark": "greedy answers per second, batch 1 vs batch 8, embedded model",
        "command": "python " + " ".join([sys.argv[0], *(argv or sys.argv[1:])]),
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "cpu_bf16": cpu_supports_bf16(),
        },
        "dtype": str(model.dtype).removeprefix("torch."),
        "max_new_tokens": MAX_NEW_TOKENS,
        "load_average_at_start": load,
        "sets": results,
        "target": "batch 8 at least 3x the answers per second of batch 1, answers identical",
        "meets_target": {
            name: r["speedup_batch_8_over_batch_1"] >= 3.0
            and r["identical_to_hf_batch_1"][f"batch-{BATCH}"] == r["prompts"]
            for name, r in results.items()
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
