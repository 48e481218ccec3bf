"""ConvexScore: our N-pass design against the authors' N² design, in cost and gold identification.

    python benchmarks/ordering.py cost --n 10 20 --questions 3 --device cuda --dtype float32 \
        --out benchmarks/results/ordering_cost_h100.json
    python benchmarks/ordering.py gold --n 10 --questions 200 --device cuda --dtype float32 \
        --out benchmarks/results/ordering_gold_h100.json
    python benchmarks/ordering.py cost --n 10 --questions 1 \
        --out benchmarks/results/ordering_cost_cpu.json

    python benchmarks/ordering.py tables --model openai:http://127.0.0.1:8000/v1/NAME \
        --questions 200 --base-orders 4 --shard 1/2 --out results/ordering-tables/tables.jsonl
    python benchmarks/ordering.py designs --tables results/ordering-tables/tables.jsonl \
        --out benchmarks/results/ordering_designs.json

Instances are the eval's (``load_multidoc``: dense-retrieved distractors from the
packaged oracle file, cached), the gold passage at a seeded uniformly random position
per question.

``cost``: per question, ``convex_score`` with the N rotations of one base order
against ``design="authors"`` (N shuffles x N rotations), on the embedded model:
forward passes, prompt tokens, wall time and peak RSS above the loaded weights
(sampled), after one warm-up pass. Targets (issue 4): passes ratio exactly 1/N,
wall-time ratio <= 1.2/N.

``tables``: the raw material of every ordering design, kept per question so that a
design is judged offline, without a model: the mean log-likelihood of the question
after each of the first R·N prompts of the authors' design (R random distinct
cyclic base orders, each with its N rotations; ``--base-orders R``), the question's
mean log-likelihood after each passage alone (the QA prompt with one document: N
short prompts), and the prompt tokens each kind cost. One JSON line per question,
appended as it is done: a rerun resumes, ``--shard K/N`` splits the questions over
processes (or servers), and any model spec scores (``openai:`` for a vLLM server).

``designs``: identification rate (top-1 = the gold) of every design computed from
the tables, with its scoring cost in full prompts' worth of tokens.

``gold``: per question the authors' design is scored ONCE (N² prompts) and every
variant is computed from a prefix of those prompts: R base orders = the first R·N
prompts (R random distinct cyclic base orders, each with its N rotations: the same
design ``convex_score(n_base_orders=R)`` draws, from another random stream), N² =
all. For each, the top-1 rate of the score definitions (E + C, E alone, C alone, the
authors' +/-LL variant), with a 95% Wilson interval, beside its passes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import torch

from rag_position.data import QAInstance, place_gold
from rag_position.eval.tasks.datasets import load_multidoc
from rag_position.models import find_backend, load_model
from rag_position.strategies import convex_score, question_likelihood
from rag_position.strategies._convex_score import (
    authors_scores,
    convex_design,
    convex_scores,
    likelihood_table,
)

SCORE_DEFINITIONS = {"E+C": (1.0, 1.0), "E": (1.0, 0.0), "C": (0.0, 1.0)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["cost", "gold", "tables", "designs"])
    parser.add_argument("--model", default="embedded", help="model spec (tables)")
    parser.add_argument("--shard", default="1/1", help="K/N: every N-th question from the K-th")
    parser.add_argument("--tables", type=Path, nargs="+", help="tables JSONL files (designs)")
    parser.add_argument("--lingua", type=Path, help="ordering_lingua.py's JSONL (designs)")
    parser.add_argument("--n", type=int, nargs="+", default=[10], help="passages per prompt")
    parser.add_argument("--questions", type=int, default=2)
    parser.add_argument("--base-orders", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtype", default="auto", help="model dtype (auto: bf16 where native)")
    parser.add_argument("--device", default="cpu", help="model device: cpu, cuda, cuda:1...")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.what == "tables":
        _tables(args)
        return
    if args.what == "designs":
        from ordering_designs import evaluate  # benchmarks/ordering_designs.py

        lingua = None
        if args.lingua is not None:
            lines = [json.loads(x) for x in args.lingua.read_text().splitlines() if x.strip()]
            lingua = {x["question"]: x["ranking"] for x in lines}
        report = evaluate([row for path in args.tables for row in _read_tables(path)], lingua)
        report["command"] = "python benchmarks/ordering.py designs --tables " + " ".join(
            str(p) for p in args.tables
        )
        if args.lingua is not None:
            report["command"] += f" --lingua {args.lingua}"
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        _plot_designs(report, args.out.with_suffix(".png"))
        print(json.dumps(report["rows"], indent=1))
        return
    model = load_model("embedded", dtype=args.dtype, device=args.device)
    report: dict[str, Any] = {
        "benchmark": f"ordering.{args.what}",
        "model": model.name,
        "dtype": str(model.dtype).removeprefix("torch."),
        "device": _device_name(model.device),
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                    "load_average_at_start": os.getloadavg()[0]},
        "seed": args.seed,
        "questions": args.questions,
        "results": [],
    }  # fmt: skip
    for n in args.n:
        instances = _instances(n, args.questions, args.seed)
        question_likelihood(instances[0].question, list(instances[0].passages), model)  # warm-up
        if args.what == "cost":
            report["results"].append(_cost(model, instances, n, args.seed))
        else:
            report["results"].append(_gold(model, instances, n, args.base_orders, args.seed))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(report["results"], indent=2))


def _tables(args: argparse.Namespace) -> None:
    """Append one JSON line per question of this shard not yet in ``--out`` (module doc)."""
    from rag_position.prompts import question_span, render_qa
    from rag_position.strategies._base import score_prompts, to_passages

    k_of, n_shards = (int(x) for x in args.shard.split("/"))
    if not 1 <= k_of <= n_shards:
        raise SystemExit(f"--shard must be K/N with 1 <= K <= N, got {args.shard}")
    backend = find_backend(args.model)
    local = backend is None or backend.local
    kwargs = {"dtype": args.dtype, "device": args.device} if local else {}
    model = load_model(args.model, **kwargs)
    (n,) = args.n
    (r,) = args.base_orders
    done = {row["question"] for row in _read_tables(args.out)} if args.out.exists() else set()
    instances = _instances(n, args.questions, args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for k, inst in enumerate(instances):
        if k in done or k % n_shards != k_of - 1:
            continue
        start = time.perf_counter()
        orders = convex_design(n, seed=args.seed + k, design="authors")[: r * n]
        gauge = question_likelihood(inst.question, list(inst.passages), model, orders=orders)
        docs = to_passages(list(inst.passages))
        alone_prompts = [render_qa(inst.question, [d]) for d in docs]
        spans = [question_span(p, inst.question) for p in alone_prompts]
        alone, alone_cost = score_prompts(model, alone_prompts, spans)
        row = {
            "question": k,
            "n": n,
            "gold": inst.gold_index,
            "orders": orders,
            "scores": gauge.scores,
            "alone": [a.mean for a in alone],
            "full_prompt_tokens": gauge.cost.prompt_tokens / len(orders),
            "alone_prompt_tokens": alone_cost.prompt_tokens,
            "model": model.name,
            "seconds": round(time.perf_counter() - start, 2),
        }
        with args.out.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
        print(f"question {k}: {row['seconds']} s", flush=True)


def _plot_designs(report: dict[str, Any], path: Path) -> None:
    """Identification rate against scoring tokens: each design, and the N² benchmark's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, row in enumerate(report["rows"]):
        x, y = row["full_prompts_of_tokens"], 100 * row["top1"]
        low, high = (100 * v for v in row["ci95"])
        ax.errorbar([x], [y], yerr=[[y - low], [high - y]], fmt="o", capsize=3)
        ax.annotate(
            row["design"],
            (x, y),
            textcoords="offset points",
            xytext=(5, 3 - 9 * (i % 2)),
            fontsize=7,
        )
    reference = Path(__file__).parent / "results" / "ordering_gold_h100.json"
    if reference.exists():
        (result,) = json.loads(reference.read_text())["results"]
        rows = [r for r in result["rows"] if r["score"] == "E+C"]
        ax.plot(
            [r["passes"] for r in rows], [100 * r["top1"] for r in rows], "k--", lw=0.8,
            label="ConvexScore R=1, 2, 4, N² (ordering_gold_h100.json, 200 q)",
        )  # fmt: skip
        ax.legend(fontsize=7, loc="lower right")
    ax.axhline(100 * report["chance"], color="grey", lw=0.5)
    ax.set_xscale("log")
    ax.set_xlabel("scoring tokens, in full prompts (log)")
    ax.set_ylabel("gold identified (top-1), %")
    ax.set_title(f"{report['model']}: {report['questions']} questions, N = {report['n']}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _read_tables(path: Path) -> list[dict[str, Any]]:
    rows = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:  # a line cut by a kill: that question is redone
                continue
            rows[row["question"]] = row
    return [rows[k] for k in sorted(rows)]


def _device_name(device: Any) -> str:
    if device.type == "cuda":
        return f"{device} ({torch.cuda.get_device_name(device)})"
    return str(device)


def _instances(n: int, questions: int, seed: int) -> list[QAInstance]:
    # The eval's loader: its embedder loads only where the distractor cache lacks a question.
    built = load_multidoc(None, docs=n, questions=questions).instances
    rng = random.Random(seed)
    return [place_gold(inst, rng.randrange(n)) for inst in built]


def _cost(model: Any, instances: list[QAInstance], n: int, seed: int) -> dict[str, Any]:
    rows = []
    for k, inst in enumerate(instances):
        row: dict[str, Any] = {"question": k, "gold_at": inst.gold_index}
        for label, design in (("ours", "rotations"), ("authors", "authors")):
            on_gpu = model.device.type == "cuda"
            if on_gpu:
                torch.cuda.synchronize(model.device)
                torch.cuda.reset_peak_memory_stats(model.device)
                gpu_start = torch.cuda.memory_allocated(model.device)
            with PeakRSS() as rss:
                start = time.perf_counter()
                r = convex_score(inst.question, list(inst.passages), model, seed=seed + k,
                                 design=design)  # type: ignore[arg-type]  # fmt: skip
                seconds = time.perf_counter() - start
            row[label] = {
                "passes": r.cost.lm_calls,
                "prompt_tokens": r.cost.prompt_tokens,
                "seconds": round(seconds, 3),
                "peak_rss_above_start_mb": round(rss.above_baseline_mb, 1),
                "gold_found": r.gold == inst.gold_index,
            }
            if on_gpu:
                peak = torch.cuda.max_memory_allocated(model.device) - gpu_start
                row[label]["peak_gpu_above_start_mb"] = round(peak / 2**20, 1)
        row["passes_ratio"] = row["ours"]["passes"] / row["authors"]["passes"]
        row["seconds_ratio"] = round(row["ours"]["seconds"] / row["authors"]["seconds"], 4)
        rows.append(row)
    ratios = [r["seconds_ratio"] for r in rows]
    return {
        "n": n,
        "target_passes_ratio": 1 / n,
        "target_max_seconds_ratio": round(1.2 / n, 4),
        "mean_seconds_ratio": round(sum(ratios) / len(ratios), 4),
        "per_question": rows,
    }


def _gold(
    model: Any, instances: list[QAInstance], n: int, base_orders: list[int], seed: int
) -> dict[str, Any]:
    designs = {f"R={r}": r * n for r in sorted(set(base_orders)) if r < n} | {"N^2": n * n}
    hits = {(d, s): 0 for d in designs for s in [*SCORE_DEFINITIONS, "authors"]}
    seconds = 0.0
    for k, inst in enumerate(instances):
        orders = convex_design(n, seed=seed + k, design="authors")
        start = time.perf_counter()
        gauge = question_likelihood(inst.question, list(inst.passages), model, orders=orders)
        seconds += time.perf_counter() - start
        for label, m in designs.items():
            table = likelihood_table(orders[:m], gauge.scores[:m], n)
            for name, (ew, cw) in SCORE_DEFINITIONS.items():
                hits[label, name] += _top1(convex_scores(table, ew, cw)[0]) == inst.gold_index
            authors = authors_scores(orders[:m], gauge.scores[:m], n)
            hits[label, "authors"] += _top1(authors) == inst.gold_index
    q = len(instances)
    return {
        "n": n,
        "chance": 1 / n,
        "scoring_seconds_per_question_n2": round(seconds / q, 2),
        "rows": [
            {"design": d, "passes": designs[d], "score": s, "top1": hits[d, s] / q,
             "ci95": _wilson(hits[d, s], q), "questions": q}
            for d, s in hits
        ],
    }  # fmt: skip


def _top1(scores: list[float]) -> int:
    return max(range(len(scores)), key=lambda d: (scores[d], -d))


def _wilson(hits: int, total: int, z: float = 1.96) -> list[float]:
    p = hits / total
    centre = (p + z * z / (2 * total)) / (1 + z * z / total)
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / (1 + z * z / total)
    return [round(centre - half, 4), round(centre + half, 4)]


class PeakRSS:
    """Samples this process's resident memory in a thread; ``peak`` is the maximum seen."""

    def __init__(self, interval: float = 0.005) -> None:
        self._proc = psutil.Process()
        self._interval = interval
        self._stop = threading.Event()
        self.baseline: int = self._proc.memory_info().rss
        self.peak: int = self.baseline
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
        return float(self.peak - self.baseline) / 2**20


if __name__ == "__main__":
    main()
