"""benchmarks/load.py's phases: calls alone, at each level in flight, the batch, faults, memory.

Imported by ``benchmarks/load.py`` (run as a script, its folder is on ``sys.path``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import statistics
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from load_support import (  # the corpus, pipelines, comparing, memory, servers
    Corpus,
    DoubleProcess,
    Pipelines,
    RSSPeak,
    compare,
    error_key,
    level_row,
    percentile,
    pipelines,
    rss_mb,
    run_calls,
    tally,
)

from rag_position.models import load_model
from rag_position.prompts import question_span, render_qa


# ---------------------------------------------------------------------- phases
class Clock:
    def __init__(self, limit: float) -> None:
        self.start = time.monotonic()
        self.limit = limit

    def left(self) -> float:
        return self.limit - (time.monotonic() - self.start)


def calls_at(args: argparse.Namespace, server: str, level: int) -> int:
    """Calls at a level: vLLM on this CPU answers a few requests a second, the double more."""
    if server == "vllm":
        return int(args.vllm_calls or max(16, level))
    return int(args.calls or max(64, 2 * level))


def cycle(n_queries: int, calls: int, rng: random.Random) -> list[int]:
    """``calls`` query indices: every query in turn, each round shuffled."""
    out: list[int] = []
    while len(out) < calls:
        block = list(range(n_queries))
        rng.shuffle(block)
        out += block
    return out[:calls]


async def alone(pipes: Pipelines, questions: Sequence[str], timeout: float) -> dict[str, Any]:
    """Every distinct query through each framework, one at a time: the references."""
    references: dict[str, dict[int, Any]] = {}
    info: dict[str, Any] = {}
    for name, call in pipes.calls.items():
        outcomes, wall = await run_calls(call, range(len(questions)), 1, timeout)
        bad = [o for o in outcomes if o.result is None]
        if bad:
            raise RuntimeError(f"{name}: an alone call failed: {bad[0].error or 'hung'}")
        references[name] = {o.query: o.result for o in outcomes}
        costs = [o.result["cost"] for o in outcomes]
        info[name] = {
            "calls": len(outcomes),
            "seconds": round(wall, 3),
            "latency_p50_s": round(percentile([o.seconds for o in outcomes], 50), 4),
            "lm_calls_per_call": sorted({c[0] for c in costs}),
            "prompt_tokens_per_call_mean": round(sum(c[1] for c in costs) / len(costs), 1),
        }
    return {"references": references, "info": info}


async def levels_phase(
    server: str,
    pipes: Pipelines,
    questions: Sequence[str],
    references: dict[str, dict[int, Any]],
    args: argparse.Namespace,
    clock: Clock,
    rng: random.Random,
    rows: dict[str, Any],
) -> None:
    """Fills ``rows``: framework -> level -> figures."""
    for name, call in pipes.calls.items():
        rows[name] = {}
        for level in args.levels:
            if clock.left() <= 0:
                rows[name][str(level)] = {"skipped": "the time limit was reached"}
                continue
            queries = cycle(len(questions), calls_at(args, server, level), rng)
            gc.collect()
            load = os.getloadavg()[0]
            cpu = time.process_time()
            with RSSPeak() as peak:
                outcomes, wall = await run_calls(call, queries, level, args.call_timeout)
            cpu = time.process_time() - cpu
            row = level_row(outcomes, wall, peak.peak, references[name], args.score_tolerance)
            row["client_cpu_ms_per_call"] = round(1000 * cpu / len(outcomes), 1)
            row["load_average_at_start"] = round(load, 2)
            rows[name][str(level)] = row
            print(
                f"  {name} x{level}: {row['throughput_calls_per_s']} calls/s, p50 "
                f"{row['latency_p50_s']} s, p99 {row['latency_p99_s']} s, peak RSS "
                f"{row['peak_rss_mb']} MB, mismatches {row['mismatches']}, errors "
                f"{row['errors']}, hung {row['hung']}",
                flush=True,
            )


def direct_batch(
    spec: str,
    corpus: Corpus,
    k: int,
    calls: int,
    references: dict[int, Any],
    rng: random.Random,
    tol: float,
    concurrency: int | None = None,
) -> dict[str, Any]:
    """The scoring requests of ``calls`` pipeline calls in one score_spans call, at the
    backend's own concurrency (or ``concurrency``)."""
    queries = cycle(len(corpus.questions), calls, rng)
    prompts, spans = [], []
    for q in queries:
        question = corpus.questions[q]
        for i, _ in corpus.top(question, k):
            prompt = render_qa(question, [corpus.passages[i]])
            prompts.append(prompt)
            spans.append(question_span(prompt, question))
    model = load_model(spec, **({"concurrency": concurrency} if concurrency else {}))
    model.score_spans(prompts[:1], spans[:1])  # the scoring probe, outside the timing
    start, cpu = time.perf_counter(), time.process_time()
    try:
        scores = model.score_spans(prompts, spans)
    finally:
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        model.close()
    # the scores equal the records' (the pipelines sent these very prompts)
    worst, at = 0.0, 0
    for q in queries:
        by_id = {m["id"]: m["rag_position"]["score"] for m in references[q]["metadata"]}
        for i, _ in corpus.top(corpus.questions[q], k):
            worst = max(worst, abs(scores[at].mean - by_id[i]))
            at += 1
    return {
        "calls": calls,
        "scoring_requests": len(prompts),
        "concurrency": getattr(model, "concurrency", None),
        "seconds": round(wall, 3),
        "throughput_calls_per_s": round(calls / wall, 3),
        "client_cpu_ms_per_call": round(1000 * cpu / calls, 1),
        "largest_score_difference_from_pipeline": worst,
        "scores_match_pipeline": worst <= tol,
    }


async def ratio_phase(
    label: str,
    pipes: Pipelines,
    spec: str,
    corpus: Corpus,
    references: dict[str, dict[int, Any]],
    levels: dict[str, Any],
    args: argparse.Namespace,
    clock: Clock,
    rng: random.Random,
    tol: float,
    rounds: int,
) -> dict[str, Any]:
    """Pipeline throughput at the top level over the direct batch's, in alternating rounds
    (the first reuses the level's row); medians. On the double also the direct batch at
    the pipeline's own requests in flight (executor threads x k)."""
    top = max(args.levels)
    n = calls_at(args, label, top)
    threads = args.executor_threads or min(32, (os.cpu_count() or 1) + 4)
    in_flight = min(top, threads) * args.k
    measured: dict[str, list[float]] = {name: [] for name in pipes.calls}
    measured["direct"], measured["direct_at_pipeline_in_flight"] = [], []
    first: dict[str, Any] = {}
    mismatches = 0
    for _ in range(rounds):
        if clock.left() <= 0:
            break
        r = len(measured["direct"])
        for name, call in pipes.calls.items():
            row = levels[name].get(str(top), {})
            if r == 0 and "throughput_calls_per_s" in row:
                measured[name].append(row["throughput_calls_per_s"])
                continue
            queries = cycle(len(corpus.questions), n, rng)
            outcomes, wall = await run_calls(call, queries, top, args.call_timeout)
            mismatches += tally(outcomes, references[name], tol)["mismatches"]
            answered = sum(1 for o in outcomes if o.result is not None)
            measured[name].append(round(answered / wall, 3))
        ref = references["langchain"]
        try:
            batch = await asyncio.to_thread(direct_batch, spec, corpus, args.k, n, ref, rng, tol)
        except Exception as exc:
            first = first or {"failed": f"{type(exc).__name__}: {exc}"}
            break
        measured["direct"].append(batch["throughput_calls_per_s"])
        first = first or batch
        if label != "vllm":
            spread = await asyncio.to_thread(
                direct_batch, spec, corpus, args.k, n, ref, rng, tol, in_flight
            )
            measured["direct_at_pipeline_in_flight"].append(spread["throughput_calls_per_s"])
    medians = {k: (round(statistics.median(v), 3) if v else None) for k, v in measured.items()}
    out: dict[str, Any] = {
        **first,
        "rounds": len(measured["direct"]),
        "throughput_calls_per_s_by_round": measured,
        "median_throughput_calls_per_s": medians,
        "pipeline_requests_in_flight": in_flight,
        "mismatches_in_extra_rounds": mismatches,
    }
    direct, wide = medians["direct"], medians["direct_at_pipeline_in_flight"]
    for name in pipes.calls:
        mine = medians[name]
        if mine and direct:
            out[f"ratio_{name}_at_{top}"] = round(mine / direct, 3)
        if mine and wide:
            out[f"ratio_{name}_at_{top}_vs_direct_at_{in_flight}"] = round(mine / wide, 3)
    shown = {k: v for k, v in out.items() if k.startswith(("ratio", "median"))}
    print(f"  direct batch: {json.dumps(shown)}", flush=True)
    return out


async def faults_phase(
    double: DoubleProcess,
    corpus: Corpus,
    references: dict[str, dict[int, Any]],
    args: argparse.Namespace,
    rng: random.Random,
) -> dict[str, Any]:
    out: dict[str, Any] = {"break_rate": args.break_rate, "break_kinds": args.break_kinds}
    for label, kwargs in (("default_retries", {}), ("max_retries_0", {"max_retries": 0})):
        pipes = pipelines(corpus, args.k, double.spec, kwargs)
        for call in pipes.calls.values():  # the scoring probe, before any break
            await call(0)
        before = double.control("stats")["breaks_queued"]
        double.control("breaks", {"rate": args.break_rate, "kinds": args.break_kinds})
        rows: dict[str, Any] = {}
        try:
            for name, call in pipes.calls.items():
                queries = cycle(len(corpus.questions), args.fault_calls, rng)
                outcomes, wall = await run_calls(
                    call, queries, args.fault_concurrency, args.call_timeout
                )
                row = tally(outcomes, references[name], 0.0)
                row.update(calls=len(outcomes), seconds=round(wall, 2))
                rows[name] = row
                print(
                    f"  faults {label} {name}: right {row['right']}, errors {row['errors']}, "
                    f"mismatches {row['mismatches']}, hung {row['hung']}",
                    flush=True,
                )
        finally:
            double.control("breaks", {"rate": 0.0, "kinds": []})
        after = double.control("stats")["breaks_queued"]
        rows["breaks_sent"] = {k: after.get(k, 0) - before.get(k, 0) for k in after}
        rows["inputs_untouched"] = pipes.inputs_untouched()
        rows["scorer_options"] = kwargs or {"max_retries": 4}
        out[label] = rows
    return out


async def memory_phase(
    pipes: Pipelines,
    questions: Sequence[str],
    references: dict[str, dict[int, Any]],
    args: argparse.Namespace,
    rng: random.Random,
) -> dict[str, Any]:
    """``--memory-calls`` calls (the frameworks in turn); RSS after gc at the checkpoint and end."""
    names = list(pipes.calls)

    turns = iter(range(10**9))

    async def mixed(q: int) -> Any:
        name = names[next(turns) % len(names)]
        return name, q, await pipes.calls[name](q)

    checkpoints = [args.memory_checkpoint, args.memory_calls]
    done, wrong, hung = 0, 0, 0
    readings: dict[str, float] = {}
    errors: Counter[str] = Counter()
    start = time.perf_counter()
    for target in checkpoints:
        queries = cycle(len(questions), target - done, rng)
        outcomes, _ = await run_calls(mixed, queries, args.memory_concurrency, args.call_timeout)
        for o in outcomes:
            if o.hung:
                hung += 1
            elif o.error is not None:
                errors[error_key(o.error)] += 1
            else:
                name, q, result = o.result
                wrong += not compare(result, references[name][q], args.score_tolerance)[1]
        done = target
        gc.collect()
        readings[str(done)] = round(rss_mb(), 1)
        print(f"  memory: RSS after {done} calls {readings[str(done)]} MB", flush=True)
    first, last = readings[str(checkpoints[0])], readings[str(checkpoints[-1])]
    return {
        "calls": done,
        "concurrency": args.memory_concurrency,
        "seconds": round(time.perf_counter() - start, 1),
        "rss_mb_after_gc": readings,
        "growth": round(last / first - 1, 4),
        "within_10_percent": abs(last / first - 1) <= 0.10,
        "mismatches": wrong,
        "errors": dict(errors),
        "hung": hung,
    }
