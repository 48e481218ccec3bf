"""Question-span scoring speed and memory: naive full-logits scoring vs rag-position's scorer.

    python benchmarks/scoring.py --prompts 6 --out benchmarks/results/scoring.json

Both run on the embedded model over the same 10-passage NQ prompts (the published
qa prompt, about 1,350 tokens each with the chat template) and score the
question span. Naive: float32, the whole logits tensor, log-softmax over the
whole sequence, one prompt at a time. Ours: ``load_model("embedded")`` with its
defaults (bfloat16 where the CPU computes it natively; the LM head only at the
question's positions; on CPU one prompt at a time, which measured faster than
padded batches). Peak memory: sampled RSS above the loaded weights while scoring
the longest prompt, each way in a fresh process with glibc set to return freed
memory at once (timings are taken in the main process, with default malloc).
The matrix-product peak is measured in the same run, so the achieved fraction
is of this machine. The JSON records the load average at start: run it on a
quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psutil
import torch

from rag_position.data import ORACLE_FILE, default_data_dir, load_qa
from rag_position.models import SpanScore, load_model
from rag_position.models.transformers_backend import TransformersModel
from rag_position.prompts import question_span, render_qa


class PeakRSS:
    """Samples this process's resident memory in a thread; ``peak`` is the maximum seen."""

    def __init__(self, interval: float = 0.002) -> None:
        self._proc = psutil.Process()
        self._interval = interval
        self._stop = threading.Event()
        self.baseline = self._proc.memory_info().rss
        self.peak = self.baseline
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._proc.memory_info().rss)
            time.sleep(self._interval)

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def above_baseline_mb(self) -> float:
        return (self.peak - self.baseline) / 2**20


def matmul_peak_gflops(dtype: torch.dtype, n: int = 2048, repeats: int = 10) -> float:
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b  # warm up
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return 2 * n**3 * repeats / (time.perf_counter() - start) / 1e9


def forward_flops(model: TransformersModel, n_tokens: int, head_positions: int) -> float:
    """Matrix-product FLOPs of one forward pass: linear layers, attention, and the LM head."""
    cfg = model.model.config
    head = model.model.get_output_embeddings()
    linear = sum(
        m.weight.numel()
        for m in model.model.modules()
        if isinstance(m, torch.nn.Linear) and m is not head
    )
    attention = 4 * cfg.num_hidden_layers * cfg.hidden_size * n_tokens**2 / 2  # causal half
    return 2.0 * linear * n_tokens + attention + 2.0 * head.weight.numel() * head_positions


def naive_scores(
    model: TransformersModel, prompts: Sequence[str], spans: Sequence[tuple[int, int]]
) -> list[SpanScore]:
    """The textbook way: full logits for every position, log-softmax of all, then gather."""
    out = []
    for prompt, (lo, hi) in zip(prompts, spans, strict=True):
        text, shift = model.render(prompt)
        enc = model.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids = torch.tensor([enc["input_ids"]])
        with torch.no_grad():
            logp = torch.log_softmax(model.model(ids, use_cache=False).logits.float(), dim=-1)[0]
        picked = [
            logp[j - 1, ids[0, j]].item()
            for j, (a, b) in enumerate(enc["offset_mapping"])
            if j > 0 and a < hi + shift and b > lo + shift
        ]
        out.append(SpanScore(sum(picked) / len(picked), sum(picked), len(picked)))
    return out


def measure(
    name: str,
    model: TransformersModel,
    run: Callable[[], list[SpanScore]],
    peak_gflops: float,
    n_tokens: Sequence[int],
    head_positions: Sequence[int],
) -> tuple[dict[str, Any], list[SpanScore]]:
    start = time.perf_counter()
    scores = run()
    seconds = time.perf_counter() - start
    flops = sum(forward_flops(model, t, h) for t, h in zip(n_tokens, head_positions, strict=True))
    result = {
        "name": name,
        "dtype": str(model.dtype).removeprefix("torch."),
        "seconds": round(seconds, 3),
        "tokens_per_second": round(sum(n_tokens) / seconds, 1),
        "achieved_gflops": round(flops / seconds / 1e9, 1),
        "matmul_peak_gflops": round(peak_gflops, 1),
        "fraction_of_matmul_peak": round(flops / seconds / 1e9 / peak_gflops, 3),
    }
    return result, scores


def memory_probe(which: str, prompt: str, span: tuple[int, int]) -> float:
    """Peak RSS above the loaded weights while scoring one prompt, in MB (run in a child)."""
    dtype = "float32" if which == "naive" else "auto"
    model = load_model("embedded", dtype=dtype)
    run = {
        "naive": lambda: naive_scores(model, [prompt], [span]),
        "ours": lambda: model.score_spans([prompt], [span]),
    }[which]
    with PeakRSS() as mem:
        run()
    return mem.above_baseline_mb


def peak_memory_mb(which: str, prompt: str, span: tuple[int, int]) -> float:
    """Runs :func:`memory_probe` in a fresh process with glibc returning freed memory at once.

    By default glibc keeps freed blocks of up to 32 MB in the heap, so sampled RSS would
    hide transient tensors; with a low mmap threshold every large block is mapped and
    unmapped, RSS tracks live memory, and the timings (taken in this process) stay clean.
    """
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="65536")
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); from scoring import memory_probe; "
        "a = sys.argv; print(json.dumps(memory_probe(a[2], a[3], (int(a[4]), int(a[5])))))"
    )
    here = str(Path(__file__).resolve().parent)
    argv = [sys.executable, "-c", code, here, which, prompt, str(span[0]), str(span[1])]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout
    return float(json.loads(out.strip().splitlines()[-1]))


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--prompts", type=int, default=6, help="number of 10-passage prompts")
    parser.add_argument("--docs", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/scoring.json"))
    args = parser.parse_args(argv)

    # Ten consecutive oracle passages per prompt: the benchmark measures speed, not answers.
    records = load_qa_records(args.prompts * args.docs)
    prompts, spans = [], []
    for i in range(args.prompts):
        group = records[i * args.docs : (i + 1) * args.docs]
        question = group[args.docs // 2].question
        prompt = render_qa(question, [r.passages[0] for r in group])
        prompts.append(prompt)
        spans.append(question_span(prompt, question))

    naive_model = load_model("embedded", dtype="float32")
    ours_model = load_model("embedded")
    n_tokens = [len(naive_model.encode(p).ids) for p in prompts]
    for warm in (naive_model, ours_model):  # first-call overheads stay out of the timings
        warm.score_spans(prompts[:1], spans[:1])
    peaks = {
        torch.float32: matmul_peak_gflops(torch.float32),
        ours_model.dtype: matmul_peak_gflops(ours_model.dtype),
    }

    naive, naive_s = measure(
        "naive: fp32, full logits, log-softmax over the sequence, one prompt at a time",
        naive_model,
        lambda: naive_scores(naive_model, prompts, spans),
        peaks[torch.float32],
        n_tokens,
        n_tokens,
    )
    ours, ours_s = measure(
        "rag-position: load_model('embedded') defaults (bf16 here), LM head at the span only",
        ours_model,
        lambda: ours_model.score_spans(prompts, spans),
        peaks[ours_model.dtype],
        n_tokens,
        [s.n_tokens for s in naive_s],
    )
    # Memory: the longest prompt, each way, in its own process.
    longest = max(range(len(prompts)), key=lambda i: n_tokens[i])
    for entry, which in ((naive, "naive"), (ours, "ours")):
        entry["peak_memory_above_weights_mb"] = round(
            peak_memory_mb(which, prompts[longest], spans[longest]), 1
        )
    result = {
        "benchmark": "question-span scoring, embedded SmolLM2-135M-Instruct",
        "command": " ".join(["python benchmarks/scoring.py", *(argv or sys.argv[1:])]),
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "threads": torch.get_num_threads(),
        },
        "prompts": len(prompts),
        "mean_prompt_tokens": round(sum(n_tokens) / len(n_tokens), 1),
        "load_average_at_start": os.getloadavg()[0],
        "naive": naive,
        "ours": ours,
        "speedup_tokens_per_second": round(
            ours["tokens_per_second"] / naive["tokens_per_second"], 2
        ),
        "memory_ratio": round(
            ours["peak_memory_above_weights_mb"] / naive["peak_memory_above_weights_mb"], 3
        ),
        "max_abs_mean_logprob_difference": round(
            max(abs(a.mean - b.mean) for a, b in zip(naive_s, ours_s, strict=True)), 4
        ),
        "targets": {"speedup_at_least": 3.0, "memory_ratio_at_most": 0.5},
    }
    result["meets_targets"] = (
        result["speedup_tokens_per_second"] >= 3.0 and result["memory_ratio"] <= 0.5
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return result


def load_qa_records(n: int) -> list[Any]:
    return load_qa(default_data_dir() / ORACLE_FILE, limit=n)


if __name__ == "__main__":
    main()
