"""Concurrent pipeline calls through LangChain and LlamaIndex: throughput, latency, memory, faults.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/load.py --out benchmarks/results/load.json
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/load.py --quick --out /tmp/load-quick.json

One pipeline call is ``await PositionAwareRetriever.ainvoke(query)`` (LangChain,
``langchain_rag_position``) or ``await PositionAwareRetriever.aretrieve(query)``
(LlamaIndex): a keyword retriever over a fixed corpus (the gold passages of the first
``--queries`` questions of the packaged NQ file, cut to ``--passage-words`` words, with
their titles) keeps ``--k`` passages, and ``passage_likelihood`` reorders them with an
``openai:`` scorer pointing at a server this script starts on 127.0.0.1 (``--k``
scoring requests a call). Two servers, one after the other, never at once:

- **vLLM**: ``rag-position serve --port 0 --dtype float32 --max-model-len 4096`` (as the
  test suite starts it), the embedded model; start-up is timed apart.
- **the double** (``rag_position.testing.openai_double``) in a child process, over a
  small random-weight model with the embedded model's tokenizer (``--double-model
  tiny``, the default: a reply costs milliseconds, so the client's own cost shows and
  5,000 calls fit the time; ``embedded`` serves the real weights). Broken replies come
  from its ``break_next`` (a handler subclass queues one before a ``/v1/completions``
  request with probability ``--break-rate``).

Per server: every distinct query is first called **alone** (sequentially): the
reference. Then, at each level of ``--levels`` calls in flight (an ``asyncio``
semaphore), ``--calls`` calls cycling over the queries, each bounded by
``asyncio.wait_for(--call-timeout)``: throughput (calls/s), p50/p99 latency, the peak
RSS of this process (sampled every 20 ms), and every result compared with its alone
reference: the passages, their order, the metadata records (scores included), the
node scores, and the call's own cost (``rag_position.cost.metered`` around the call:
LM calls and prompt tokens). A difference is a mismatch (target 0); on vLLM a score
within ``--score-tolerance`` of the reference is equal (vLLM's batching changes the
last digits) and the largest difference is reported.

Then the same scoring requests as the top level's calls, sent at once through the
backend's own batch call (``OpenAICompatibleModel.score_spans`` on all the prompts,
its default concurrency): the pipeline's throughput over that one (target >= 0.8).

On the double only: **faults**, ``--fault-calls`` calls per framework at
``--fault-concurrency`` in flight with ``--break-rate`` of the replies broken, once with
the backend's default retries and once with ``max_retries=0``: each call is right
(equal to its reference), a clear exception (counted by type and message), wrong, or
hung (past ``--call-timeout``); wrong and hung must be 0. And **memory**:
``--memory-calls`` calls (LangChain and LlamaIndex in turn) at
``--memory-concurrency``, RSS after ``gc.collect()`` at ``--memory-checkpoint`` calls
and at the end (target: within 10%).

Traffic goes only to the servers started here, on 127.0.0.1. ``--time-limit`` bounds
the whole run: a phase that would start after it is skipped (and said so), and a
watchdog ends the process (servers stopped) 120 s after it. The exit status is 1 when a
target is missed (the summary's ``targets_missed`` says which), 3 when the watchdog ends it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import re
import resource
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from load_phases import (  # the phases
    Clock,
    alone,
    calls_at,
    faults_phase,
    levels_phase,
    memory_phase,
    ratio_phase,
)
from load_support import (  # the corpus, pipelines, comparing, memory, servers
    PARTIAL_REPORT,
    ROOT,
    STARTED_SERVERS,
    STRATEGY,
    Corpus,
    DoubleProcess,
    ServeProcess,
    build_corpus,
    pipelines,
)


async def server_phase(
    label: str,
    spec: str,
    corpus: Corpus,
    args: argparse.Namespace,
    clock: Clock,
    tol: float,
) -> dict[str, Any]:
    rng = random.Random(args.seed)
    pipes = pipelines(corpus, args.k, spec, {})
    report: dict[str, Any] = {"spec": spec}
    PARTIAL_REPORT[label] = report
    print(f"{label}: alone calls", flush=True)
    ref = await alone(pipes, corpus.questions, args.call_timeout)
    references = ref["references"]
    report["alone"] = ref["info"]
    report["levels"] = {}
    await levels_phase(
        label, pipes, corpus.questions, references, args, clock, rng, report["levels"]
    )
    rounds = args.vllm_ratio_rounds if label == "vllm" else args.ratio_rounds
    report["direct_batch"] = await ratio_phase(
        label, pipes, spec, corpus, references, report["levels"], args, clock, rng, tol, rounds
    )
    report["inputs_untouched"] = pipes.inputs_untouched()
    report["_references"] = references
    report["_pipes"] = pipes
    return report


async def run(args: argparse.Namespace) -> dict[str, Any]:
    clock = Clock(args.time_limit)
    corpus = build_corpus(args.queries, args.passage_words)
    loop = asyncio.get_running_loop()
    if args.executor_threads:
        loop.set_default_executor(ThreadPoolExecutor(args.executor_threads))
    report: dict[str, Any] = {
        "benchmark": "concurrent pipeline calls through LangChain and LlamaIndex",
        "command": "python benchmarks/load.py " + " ".join(sys.argv[1:]),
        "machine": {"cpu": platform.machine(), "threads": os.cpu_count()},
        "load_average_at_start": os.getloadavg()[0],
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "strategy": STRATEGY,
        "queries": len(corpus.questions),
        "k": args.k,
        "levels": args.levels,
        "calls_per_level": {
            server: {str(lv): calls_at(args, server, lv) for lv in args.levels}
            for server in ("vllm", "double")
        },
        "default_executor_threads": args.executor_threads or min(32, (os.cpu_count() or 1) + 4),
        "score_tolerance_vllm": args.score_tolerance,
    }
    PARTIAL_REPORT["report"] = report
    # the double first: its phases take a known time; vLLM's start-up and speed vary more
    parts = [("double", double_part)] if args.double else []
    parts += [("vllm", vllm_part)] if args.vllm or args.vllm_spec else []
    for label, part in parts:
        try:
            report[label] = await part(args, corpus, clock)
        except Exception as exc:  # what was measured, and why the rest was not
            row = {k: v for k, v in PARTIAL_REPORT.get(label, {}).items() if not k.startswith("_")}
            row["failed"] = f"{type(exc).__name__}: {exc}"
            report[label] = row
            print(f"{label} failed: {row['failed']}", flush=True)
    return report


async def vllm_part(args: argparse.Namespace, corpus: Corpus, clock: Clock) -> dict[str, Any]:
    """The pipelines against a vLLM server started here (or ``--vllm-spec``)."""
    if args.vllm_spec:  # a server already running (development), not started here
        row = await server_phase("vllm", args.vllm_spec, corpus, args, clock, args.score_tolerance)
        row.pop("_references"), row.pop("_pipes")
        return row
    if clock.left() <= 0:
        return {"skipped": "the time limit was reached"}
    server = ServeProcess()
    start = time.perf_counter()
    try:
        server.start(timeout=min(900.0, max(60.0, clock.left())))
        startup = time.perf_counter() - start
        print(f"vLLM ready in {startup:.0f} s: {server.spec}", flush=True)
        try:
            row = await server_phase("vllm", server.spec, corpus, args, clock, args.score_tolerance)
        finally:
            PARTIAL_REPORT["vllm"]["server_log_tail"] = server.log_tail()
        row["startup_seconds"] = round(startup, 1)
        row["seconds"] = round(time.perf_counter() - start, 1)
        row.pop("_references"), row.pop("_pipes")
        return row
    finally:
        server.stop()


async def double_part(args: argparse.Namespace, corpus: Corpus, clock: Clock) -> dict[str, Any]:
    """The pipelines against the double: levels, direct batch, faults, memory."""
    if clock.left() <= 0:
        return {"skipped": "the time limit was reached"}
    double = DoubleProcess(args.double_model, args.seed)
    start = time.perf_counter()
    try:
        double.start()
        print(f"double ready in {time.perf_counter() - start:.0f} s: {double.spec}", flush=True)
        row = await server_phase("double", double.spec, corpus, args, clock, 0.0)
        references, pipes = row.pop("_references"), row.pop("_pipes")
        row["model"] = args.double_model
        if not args.fault_calls:
            row["faults"] = {"skipped": "--fault-calls 0"}
        elif clock.left() > 0:
            print("double: faults", flush=True)
            row["faults"] = await faults_phase(double, corpus, references, args, random.Random(1))
        else:
            row["faults"] = {"skipped": "the time limit was reached"}
        if not args.memory_calls:
            row["memory"] = {"skipped": "--memory-calls 0"}
        elif clock.left() > 0:
            print("double: memory", flush=True)
            row["memory"] = await memory_phase(
                pipes, corpus.questions, references, args, random.Random(2)
            )
        else:
            row["memory"] = {"skipped": "the time limit was reached"}
        row["inputs_untouched"] = pipes.inputs_untouched()
        row["server_peak_rss_mb"] = double.rss_mb()
        row["seconds"] = round(time.perf_counter() - start, 1)
        return row
    finally:
        double.stop()


def summary(report: dict[str, Any]) -> dict[str, Any]:
    """The headline figures: mismatches, hung calls, the ratio, memory growth."""
    out: dict[str, Any] = {}
    mismatches = hung = 0
    for server in ("vllm", "double"):
        row = report.get(server) or {}
        for levels in (row.get("levels") or {}).values():
            for level in levels.values():
                mismatches += level.get("mismatches", 0)
                hung += level.get("hung", 0)
        ratios = {k: v for k, v in (row.get("direct_batch") or {}).items() if k.startswith("ratio")}
        if ratios:
            out[f"{server}_ratio_vs_direct_batch"] = ratios
    faults = (report.get("double") or {}).get("faults") or {}
    for label in ("default_retries", "max_retries_0"):
        for name in ("langchain", "llama_index"):
            row = (faults.get(label) or {}).get(name) or {}
            mismatches += row.get("mismatches", 0)
            hung += row.get("hung", 0)
    memory = (report.get("double") or {}).get("memory") or {}
    mismatches += memory.get("mismatches", 0)
    hung += memory.get("hung", 0)
    untouched = [
        row.get("inputs_untouched")
        for row in (report.get("vllm") or {}, report.get("double") or {}, *faults.values())
        if isinstance(row, dict) and "inputs_untouched" in row
    ]
    out.update(
        mismatches=mismatches,
        hung=hung,
        memory_growth=memory.get("growth"),
        inputs_untouched=all(untouched) if untouched else None,
    )
    out["targets"] = {
        "mismatches": "0",
        "hung": "0",
        "ratio_vs_direct_batch_at_least": 0.8,
        "memory_growth_within": 0.10,
    }
    ratios = [v for key in out if key.endswith("_ratio_vs_direct_batch") for v in out[key].values()]
    missed = []
    if mismatches:
        missed.append(f"{mismatches} mismatches")
    if hung:
        missed.append(f"{hung} hung calls")
    if out["inputs_untouched"] is False:
        missed.append("a shared input document or node was changed")
    if any(r < 0.8 for r in ratios):
        missed.append(f"throughput ratio {min(ratios)} < 0.8")
    if memory.get("growth") is not None and memory["growth"] > 0.10:
        missed.append(f"memory growth {memory['growth']:.1%} > 10%")
    out["targets_missed"] = missed  # the exit status is 1 when any is
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/load.json")
    parser.add_argument("--quick", action="store_true", help="a smoke run of about a minute")
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 8, 32, 64])
    parser.add_argument(
        "--calls", type=int, default=0, help="calls per level, double (default max(64, 2 x level))"
    )
    parser.add_argument(
        "--vllm-calls", type=int, default=0, help="calls per level, vLLM (default max(16, level))"
    )
    parser.add_argument("--queries", type=int, default=32, help="distinct queries (the corpus)")
    parser.add_argument("--k", type=int, default=2, help="passages a call keeps and scores")
    parser.add_argument("--passage-words", type=int, default=40)
    parser.add_argument(
        "--vllm",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run against vLLM too (default: yes, except with --quick)",
    )
    parser.add_argument(
        "--vllm-spec",
        default=None,
        help="the openai: spec of a vLLM server already running on 127.0.0.1 (for development: "
        "started with --dtype float32 --max-model-len 4096), used instead of starting one",
    )
    parser.add_argument("--double", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--double-model", choices=("tiny", "embedded"), default="tiny")
    parser.add_argument("--break-rate", type=float, default=0.1)
    parser.add_argument(
        "--break-kinds",
        nargs="+",
        default=["truncated-json", "html", "not-an-object", "null-text", "no-choices",
                 "nan-logprob", "null-logprob", "short-logprobs", "short-offsets",
                 "short-arrays"],
    )  # fmt: skip
    parser.add_argument("--fault-calls", type=int, default=300, help="per framework and setting")
    parser.add_argument("--fault-concurrency", type=int, default=32)
    parser.add_argument("--memory-calls", type=int, default=5000)
    parser.add_argument("--memory-checkpoint", type=int, default=500)
    parser.add_argument("--memory-concurrency", type=int, default=32)
    parser.add_argument(
        "--call-timeout", type=float, default=300.0, help="seconds per call, queueing included"
    )
    parser.add_argument(
        "--score-tolerance",
        type=float,
        default=1e-4,
        help="|score difference| counted as equal on vLLM",
    )
    parser.add_argument(
        "--executor-threads",
        type=int,
        default=0,
        help="the event loop's default executor size (0: asyncio's default)",
    )
    parser.add_argument("--time-limit", type=float, default=1080.0, help="seconds, the whole run")
    parser.add_argument(
        "--ratio-rounds",
        type=int,
        default=2,
        help="rounds of (pipelines at the top level, direct batch), alternating, on the double",
    )
    parser.add_argument("--vllm-ratio-rounds", type=int, default=2, help="the same rounds on vLLM")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.quick:
        args.queries = min(args.queries, 8)
        args.calls = args.calls or 16
        args.vllm_calls = args.vllm_calls or 8
        args.ratio_rounds = 1
        args.fault_calls = min(args.fault_calls, 24)
        args.memory_calls = min(args.memory_calls, 200)
        args.memory_checkpoint = min(args.memory_checkpoint, 40)
        args.time_limit = min(args.time_limit, 240.0)
    if args.vllm is None:
        args.vllm = not args.quick
    if args.vllm_spec and not re.match(r"openai:http://127\.0\.0\.1:\d+/", args.vllm_spec):
        parser.error("--vllm-spec must be an openai: spec of a server on 127.0.0.1")
    if args.memory_calls and not 0 < args.memory_checkpoint < args.memory_calls:
        parser.error("--memory-checkpoint must be between 0 and --memory-calls")

    def watchdog() -> None:
        time.sleep(args.time_limit + 120)
        print("the time limit passed by 120 s: stopping", file=sys.stderr, flush=True)
        for server in STARTED_SERVERS:
            server.stop()
        try:  # what was measured so far
            partial = dict(PARTIAL_REPORT.get("report", {}))
            for label in ("double", "vllm"):
                if label in PARTIAL_REPORT and not isinstance(partial.get(label), dict):
                    row = dict(PARTIAL_REPORT[label])
                    row.pop("_references", None), row.pop("_pipes", None)
                    partial[label] = row
            partial["stopped"] = f"by the watchdog, {args.time_limit + 120:.0f} s after the start"
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(partial, indent=2, default=str) + "\n")
        finally:
            os._exit(3)

    threading.Thread(target=watchdog, daemon=True).start()
    start = time.perf_counter()
    report = asyncio.run(run(args))
    report["seconds"] = round(time.perf_counter() - start, 1)
    report["client_max_rss_mb"] = round(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1
    )
    report["torch_imported_by_client"] = "torch" in sys.modules
    report["summary"] = summary(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, default=str) + "\n")
    print(json.dumps(report["summary"], indent=2), flush=True)
    if report["summary"]["targets_missed"]:
        print("targets missed: " + "; ".join(report["summary"]["targets_missed"]), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
