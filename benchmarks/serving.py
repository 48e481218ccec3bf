"""Scoring passes and answers per second: the local backend vs vLLM on the same CPU.

    python benchmarks/serving.py --out benchmarks/results/serving.json
    python benchmarks/serving.py --compare 10 --out benchmarks/results/serving.json

Both sides run the embedded model in bfloat16 on the same machine, one after the other
(never at once), over the same prompts: ``--prompts`` 10-passage NQ prompts in the
published qa prompt (the question of one record, the gold passages of the next ten,
as ``benchmarks/scoring.py`` builds them).

- Local: ``load_model("embedded", dtype="bfloat16")``, the eval's CPU defaults (scoring
  one prompt at a time with the LM head only at the span; one generate call per prompt,
  the eval's batch size 1 on CPU).
- vLLM: ``VLLMServer("embedded", dtype="bfloat16")`` (what ``rag-position serve
  --dtype bfloat16`` starts), the ``openai:`` backend with ``--concurrency`` requests in
  flight; scoring both ways the backend has: ``forced`` (the span generated under a
  forcing logits processor, the prefix cache in use) and ``echo`` (every prompt token's
  log-probability).

A scoring pass is one prompt's span scored; an answer is one greedy completion of
``--max-new-tokens`` tokens at most. Start-up (loading, vLLM's compilation) is timed
apart and not counted. ``--compare N`` also runs ``rag-position eval compare`` on N
questions with the scoring strategies, once per backend, and reports questions per
hour (the targets: vLLM at least the local backend's scoring passes per second, and
at least twice its compare questions per hour).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rag_position.data import ORACLE_FILE, default_data_dir, load_qa
from rag_position.models import find_backend, load_model
from rag_position.prompts import question_span, render_qa
from rag_position.serving import VLLMServer

COMPARE_STRATEGIES = "retriever,likelihood_selection,convex_score,convex_score:n_base_orders=4"


def build_prompts(n: int, docs: int = 10) -> tuple[list[str], list[tuple[int, int]]]:
    records = load_qa(default_data_dir() / ORACLE_FILE, limit=n * (docs + 1))
    prompts, spans = [], []
    for i in range(n):
        question = records[i * (docs + 1)].question
        group = records[i * (docs + 1) + 1 : (i + 1) * (docs + 1)]
        prompt = render_qa(question, [r.passages[0] for r in group])
        prompts.append(prompt)
        spans.append(question_span(prompt, question))
    return prompts, spans


def timed(fn: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def side(
    model: Any,
    prompts: list[str],
    spans: list[Any],
    warm: tuple[str, Any],
    max_new: int,
    generate: str | None,
) -> dict[str, Any]:
    """Score every prompt, then (``generate``: "one_by_one" or "batch") answer every prompt.

    The warm-up uses a prompt outside the measured ones, so that a server's prefix
    cache holds none of them when the timing starts.
    """
    model.score_spans([warm[0]], [warm[1]])
    model.generate([warm[0]], max_new_tokens=4)
    scores, score_s = timed(lambda: model.score_spans(prompts, spans))
    row: dict[str, Any] = {
        "scoring_seconds": round(score_s, 2),
        "scoring_passes_per_second": round(len(prompts) / score_s, 3),
        "scores": [s.mean for s in scores],
    }
    if generate == "one_by_one":
        answers, gen_s = timed(
            lambda: [model.generate([p], max_new_tokens=max_new)[0] for p in prompts]
        )
    elif generate == "batch":
        answers, gen_s = timed(lambda: model.generate(prompts, max_new_tokens=max_new))
    else:
        return row
    row.update(
        generation_seconds=round(gen_s, 2),
        answers_per_second=round(len(prompts) / gen_s, 3),
        answers=answers,
    )
    return row


def compare_run(model: str, questions: int, out: Path, concurrency: int) -> dict[str, Any]:
    backend = find_backend(model)
    local = [] if backend is not None and not backend.local else ["--dtype", "bfloat16"]
    command = [
        sys.executable, "-m", "rag_position.cli", "eval", "compare",
        "--model", model, *local, "--docs", "10", "--gold", "random",
        "--questions", str(questions), "--strategies", COMPARE_STRATEGIES,
        "--concurrency", str(concurrency), "--no-progress", "--out", str(out),
    ]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"eval compare failed:\n{done.stderr[-3000:]}")
    return {
        "command": " ".join(command[2:]).replace("rag_position.cli", "rag-position"),
        "seconds": round(seconds, 1),
        "questions_per_hour": round(questions * 3600 / seconds, 1),
        "report": (out / "report.md").read_text().split("**Accuracy (%)")[1][:2500],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=24, help="10-passage prompts")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight to vLLM")
    parser.add_argument(
        "--compare", type=int, default=0, help="also time eval compare on N questions"
    )
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    prompts, spans = build_prompts(args.prompts + 1)
    warm = (prompts.pop(), spans.pop())
    report: dict[str, Any] = {
        "benchmark": "scoring passes and answers per second, local backend vs vLLM, same CPU",
        "command": "python benchmarks/serving.py " + " ".join(sys.argv[1:]),
        "machine": {"cpu": platform.machine(), "threads": os.cpu_count()},
        "load_average_at_start": os.getloadavg()[0],
        "prompts": len(prompts),
        "max_new_tokens": args.max_new_tokens,
    }

    local, load_s = timed(lambda: load_model("embedded", dtype="bfloat16"))
    report["prompt_tokens_mean"] = round(
        sum(local.count_tokens(p) for p in prompts) / len(prompts), 1
    )
    print(f"local: loaded in {load_s:.0f} s", flush=True)
    report["local"] = {
        "startup_seconds": round(load_s, 1),
        **side(local, prompts, spans, warm, args.max_new_tokens, "one_by_one"),
    }
    print(
        json.dumps({k: v for k, v in report["local"].items() if k not in ("scores", "answers")}),
        flush=True,
    )
    del local

    server = VLLMServer("embedded", port=0, dtype="bfloat16")  # its log: kept in memory
    _, start_s = timed(server.start)
    print(f"vLLM: ready in {start_s:.0f} s", flush=True)
    try:
        for scoring in ("forced", "echo"):
            remote = load_model(server.spec, concurrency=args.concurrency, scoring=scoring)
            # answers once, in the first row: a second pass over the same prompts would
            # find them in the prefix cache (the forced scoring sends the raw prompt,
            # generation the chat-formatted one, so they share no prefix)
            generate = "batch" if scoring == "forced" else None
            row = side(remote, prompts, spans, warm, args.max_new_tokens, generate)
            row["startup_seconds"] = round(start_s, 1)
            report[f"vllm_{scoring}"] = row
            print(
                scoring,
                json.dumps({k: v for k, v in row.items() if k not in ("scores", "answers")}),
                flush=True,
            )
        if args.compare:
            with tempfile.TemporaryDirectory() as tmp:
                report["compare_vllm"] = compare_run(
                    server.spec, args.compare, Path(tmp) / "v", args.concurrency
                )
    finally:
        server.stop()
    if args.compare:
        with tempfile.TemporaryDirectory() as tmp:
            report["compare_local"] = compare_run("embedded", args.compare, Path(tmp) / "l", 1)

    local_row, forced = report["local"], report["vllm_forced"]
    report["score_difference_max"] = round(
        max(abs(a - b) for a, b in zip(local_row["scores"], forced["scores"], strict=True)), 4
    )
    report["answers_equal"] = sum(
        a == b for a, b in zip(local_row["answers"], forced["answers"], strict=True)
    )
    report["speedup"] = {
        "scoring_forced": round(
            forced["scoring_passes_per_second"] / local_row["scoring_passes_per_second"], 2
        ),
        "scoring_echo": round(
            report["vllm_echo"]["scoring_passes_per_second"]
            / local_row["scoring_passes_per_second"],
            2,
        ),
        "answers": round(forced["answers_per_second"] / local_row["answers_per_second"], 2),
    }
    if args.compare:
        report["speedup"]["compare_questions_per_hour"] = round(
            report["compare_vllm"]["questions_per_hour"]
            / report["compare_local"]["questions_per_hour"],
            2,
        )
    report["targets"] = {"scoring_speedup_at_least": 1.0, "compare_speedup_at_least": 2.0}
    speed = report["speedup"]
    report["meets_targets"] = {
        "scoring": speed["scoring_forced"] >= 1.0,
        "compare": speed.get("compare_questions_per_hour", 0.0) >= 2.0 if args.compare else None,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["speedup"]), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
