"""Scoring with passage reuse: ``select_and_place`` on a query stream, with and without the
prefix cache (issue 41).

    OMP_NUM_THREADS=1 python benchmarks/reuse.py stream --queries 300 --warmup 100 \\
        --cache-mb 2048 --out benchmarks/results/reuse-local.json
    OMP_NUM_THREADS=1 python benchmarks/reuse.py bound --queries 5000 --cache-mb 128 \\
        --dtype bfloat16 --out benchmarks/results/reuse-bound.json

The pool: the distinct passages of the packaged dev file (1,967 of its 2,000 questions'
gold passages). Each passage gets a popularity rank (a seeded shuffle of the pool) and
each query draws its ten passages without replacement with probability proportional to
``1 / rank ** s`` (Zipf, ``--zipf 1.0``); its question is a dev question drawn uniformly
(the cost of scoring does not depend on whether the passages answer it). Every query
goes through ``select_and_place`` (the core strategy) on the embedded model loaded with
``--cache-mb`` (on) and without (off, the baseline), in each ``--dtypes``.

``stream``: per dtype, the cached model runs the whole stream from an empty cache; its
first ``--warmup`` queries are the cold phase, the rest the steady state (warm). The
uncached model runs ``--baseline-queries`` queries spread evenly over the same stream
(the uncached cost does not depend on what came before); on those queries the two
runs' scores and kept passages are compared. Then, cheaply, ``--integrations`` more
queries go through LangChain's ``SelectAndPlace`` compressor and LlamaIndex's
``SelectAndPlace`` postprocessor on the warm cached model, and as many through the
uncached one. Seconds are wall seconds of the call (rendering, tokenising, scoring).

``bound``: one dtype, the cached model alone, ``--queries`` queries; after every query the
cache's bytes held are checked against its bound (the JSON records the largest seen).

The JSON records the command, the load average at start and end (the 2-core machine may
be shared), and the thread count.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import torch

from rag_position.data import ORACLE_FILE, default_data_dir, load_qa
from rag_position.models import load_model
from rag_position.passages import Passage
from rag_position.strategies import select_and_place

Query = tuple[str, list[Passage]]


def build_stream(n: int, zipf: float, seed: int) -> tuple[list[Query], int]:
    """``n`` queries (question, ten passages) over the dev pool, and the pool's size."""
    records = load_qa(default_data_dir() / ORACLE_FILE)
    pool: dict[tuple[str, str], Passage] = {}
    for r in records:
        for p in r.passages:
            pool.setdefault((p.title, p.text), p)
    passages = list(pool.values())
    rng = np.random.default_rng(seed)
    rank = rng.permutation(len(passages)) + 1  # passage i's popularity rank
    weights = 1.0 / rank.astype(np.float64) ** zipf
    weights /= weights.sum()
    stream = []
    for _ in range(n):
        question = records[int(rng.integers(len(records)))].question
        chosen = rng.choice(len(passages), size=10, replace=False, p=weights)
        stream.append((question, [passages[int(i)] for i in chosen]))
    return stream, len(passages)


def quantiles(seconds: Sequence[float]) -> dict[str, float | int]:
    """p50 and p95 (nearest rank) of ``seconds``, and the count."""
    if not seconds:
        return {"n": 0}
    ordered = sorted(seconds)
    p95 = ordered[min(len(ordered) - 1, int(np.ceil(0.95 * len(ordered))) - 1)]
    return {
        "n": len(ordered),
        "p50": round(statistics.median(ordered), 4),
        "p95": round(p95, 4),
        "mean": round(statistics.fmean(ordered), 4),
    }


def cache_stats(model: Any) -> dict[str, Any]:
    s = model.prefix_cache.stats()
    return {
        "hits": s.hits,
        "misses": s.misses,
        "hit_rate": round(s.hit_rate, 4),
        "entries": s.entries,
        "bytes_held": s.bytes_held,
        "max_bytes_held": s.max_bytes_held,
        "capacity_bytes": s.capacity_bytes,
        "evictions": s.evictions,
        "too_large": s.too_large,
        "tokens_reused": s.tokens_reused,
    }


def run_queries(
    model: Any, stream: Sequence[Query], *, check_bound: bool = False, every: int = 50
) -> list[dict[str, Any]]:
    """Each query through ``select_and_place``: wall seconds, hits and misses, the result."""
    rows = []
    cache = getattr(model, "prefix_cache", None)
    start = time.perf_counter()
    for k, (question, passages) in enumerate(stream):
        before = cache.stats() if cache is not None else None
        t0 = time.perf_counter()
        result = select_and_place(question, passages, model)
        seconds = time.perf_counter() - t0
        row: dict[str, Any] = {
            "seconds": seconds,
            "order": result.order,
            "dropped": result.details["dropped"],
            "scores": result.scores,
        }
        if cache is not None and before is not None:
            after = cache.stats()
            row["hits"], row["misses"] = after.hits - before.hits, after.misses - before.misses
            row["bytes_held"] = after.bytes_held
            if check_bound and after.max_bytes_held > after.capacity_bytes:
                raise AssertionError(f"query {k}: {after.max_bytes_held} bytes held, over bound")
        rows.append(row)
        if (k + 1) % every == 0:
            hits = sum(r.get("hits", 0) for r in rows[-every:])
            print(
                f"  {k + 1}/{len(stream)} queries, {time.perf_counter() - start:.0f} s, "
                f"last {every}: p50 {statistics.median(r['seconds'] for r in rows[-every:]):.3f}"
                f" s, {hits} hits",
                flush=True,
            )
    return rows


def phase(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"seconds_per_query": quantiles([r["seconds"] for r in rows])}
    if rows and "hits" in rows[0]:
        hits, misses = sum(r["hits"] for r in rows), sum(r["misses"] for r in rows)
        out["hit_rate"] = round(hits / max(1, hits + misses), 4)
        out["hits"], out["misses"] = hits, misses
    return out


def compare(cached: Sequence[dict[str, Any]], plain: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """How the cached run's results differ from the uncached run's on the same queries."""
    diffs = [
        abs(a - b)
        for c, p in zip(cached, plain, strict=True)
        for a, b in zip(c["scores"], p["scores"], strict=True)
    ]
    return {
        "queries": len(plain),
        "max_abs_mean_logprob_difference": float(f"{max(diffs):.3g}"),
        "same_kept_passages_and_order": sum(
            c["order"] == p["order"] and c["dropped"] == p["dropped"]
            for c, p in zip(cached, plain, strict=True)
        ),
    }


def integration_runs(model: Any, stream: Sequence[Query]) -> dict[str, Any]:
    """The same kind of queries through the LangChain compressor and LlamaIndex postprocessor."""
    out: dict[str, Any] = {}
    try:
        from langchain_core.documents import Document
        from langchain_rag_position import SelectAndPlace as LangChainSelect
        from llama_index.core.schema import NodeWithScore, TextNode
        from llama_index.postprocessor.rag_position import SelectAndPlace as LlamaSelect
    except ImportError as exc:
        return {"skipped": f"not installed: {exc.name}"}
    lc = LangChainSelect(scorer=model)
    li = LlamaSelect(scorer=model)
    calls: dict[str, Callable[[str, list[Passage]], object]] = {
        "langchain_compressor": lambda q, ps: lc.compress_documents(
            [Document(page_content=p.text, metadata={"title": p.title}) for p in ps], q
        ),
        "llamaindex_postprocessor": lambda q, ps: li.postprocess_nodes(
            [NodeWithScore(node=TextNode(text=p.text, metadata={"title": p.title})) for p in ps],
            query_str=q,
        ),
    }
    cache = getattr(model, "prefix_cache", None)
    half = len(stream) // 2  # each framework its own queries, so neither warms the other's
    for k, (name, call) in enumerate(calls.items()):
        before = cache.stats() if cache is not None else None
        seconds = []
        for question, passages in stream[k * half : (k + 1) * half]:
            t0 = time.perf_counter()
            call(question, passages)
            seconds.append(time.perf_counter() - t0)
        out[name] = {"seconds_per_query": quantiles(seconds)}
        if cache is not None and before is not None:
            after = cache.stats()
            hits, misses = after.hits - before.hits, after.misses - before.misses
            out[name]["hit_rate"] = round(hits / max(1, hits + misses), 4)
    return out


def stream_mode(args: argparse.Namespace) -> dict[str, Any]:
    total = args.queries + 2 * args.integrations
    stream, pool = build_stream(total, args.zipf, args.seed)
    main, extra = stream[: args.queries], stream[args.queries :]
    picks = sorted(set(np.linspace(0, args.queries - 1, args.baseline_queries).astype(int)))
    report: dict[str, Any] = {"pool_passages": pool, "by_dtype": {}}
    for dtype in args.dtypes:
        print(f"{dtype}: cached, {len(main)} queries", flush=True)
        cached = load_model("embedded", dtype=dtype, prefix_cache_mb=args.cache_mb)
        rows = run_queries(cached, main)
        row: dict[str, Any] = {
            "cache_on": {
                "cold": phase(rows[: args.warmup]),
                "warm": phase(rows[args.warmup :]),
                "cache": cache_stats(cached),
                "rss_mb_after": round(psutil.Process().memory_info().rss / 2**20),
            }
        }
        print(f"{dtype}: uncached, {len(picks)} queries", flush=True)
        plain = load_model("embedded", dtype=dtype)
        plain_rows = run_queries(plain, [main[i] for i in picks], every=10)
        row["cache_off"] = phase(plain_rows)
        row["equality"] = compare([rows[i] for i in picks], plain_rows)
        cold = row["cache_on"]["cold"]["seconds_per_query"]["p50"]
        warm = row["cache_on"]["warm"]["seconds_per_query"]["p50"]
        off = row["cache_off"]["seconds_per_query"]["p50"]
        row["warm_p50_over_uncached_p50"] = round(warm / off, 3)
        row["cold_p50_over_uncached_p50"] = round(cold / off, 3)
        if extra:
            print(f"{dtype}: integrations, {len(extra)} queries each", flush=True)
            row["integrations"] = {
                "cache_on_warm": integration_runs(cached, extra),
                "cache_off": integration_runs(plain, extra),
            }
        report["by_dtype"][dtype] = row
        del cached, plain
    return report


def bound_mode(args: argparse.Namespace) -> dict[str, Any]:
    stream, pool = build_stream(args.queries, args.zipf, args.seed)
    cached = load_model("embedded", dtype=args.dtype, prefix_cache_mb=args.cache_mb)
    rows = run_queries(cached, stream, check_bound=True, every=250)
    stats = cache_stats(cached)
    return {
        "pool_passages": pool,
        "dtype": args.dtype,
        "queries": len(rows),
        "largest_bytes_held_after_a_query": max(r["bytes_held"] for r in rows),
        "cache": stats,
        "within_bound": stats["max_bytes_held"] <= stats["capacity_bytes"],
        "hit_rate": phase(rows).get("hit_rate"),
        "seconds_per_query": quantiles([r["seconds"] for r in rows]),
    }


def replay_mode(args: argparse.Namespace) -> dict[str, Any]:
    """The stream's lookups replayed through :class:`PrefixCache` with entries of the real
    sizes (each passage's prefix tokens x bytes a token) but no model: the hit rate each
    bound reaches, and the bound checked after every store, over ``--queries`` queries."""
    from rag_position.models.prefix_cache import PrefixCache
    from rag_position.prompts import question_span, render_qa

    stream, pool = build_stream(args.queries, args.zipf, args.seed)
    model = load_model("embedded", dtype="float32")
    cfg = model.model.config
    per_token_elements = (
        cfg.num_hidden_layers
        * 2
        * cfg.num_key_value_heads
        * (getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads)
    )
    prefix_tokens: dict[tuple[str, str], int] = {}
    for question, passages in stream:
        for p in passages:
            if (p.title, p.text) not in prefix_tokens:
                prompt = render_qa(question, [p])
                lo = question_span(prompt, question)[0]
                enc = model.encode(prompt)
                first = next(j for j, (a, b) in enumerate(enc.offsets) if b > lo + enc.prompt_start)
                prefix_tokens[(p.title, p.text)] = first - 1
    layers = cfg.num_hidden_layers
    rows: dict[str, Any] = {}
    for dtype, item in (("float32", 4), ("bfloat16", 2)):
        per_layer = per_token_elements // (2 * layers)  # one tensor's elements a token
        for mb in args.sizes_mb:
            cache = PrefixCache(mb)
            hits_after = misses_after = 0
            largest = 0
            for k, (_, passages) in enumerate(stream):
                for p in passages:
                    key = (p.title, p.text)
                    before = cache.stats()
                    if cache.get(key) is None:
                        n = prefix_tokens[key]
                        fake = torch.zeros((), dtype=torch.float32 if item == 4 else torch.bfloat16)
                        t = fake.expand(1, 1, n, per_layer)  # nbytes of the real size, no memory
                        cache.put(key, tuple((t, t) for _ in range(layers)))
                    after = cache.stats()
                    largest = max(largest, after.bytes_held)
                    if k >= args.warmup:
                        hits_after += after.hits - before.hits
                        misses_after += after.misses - before.misses
            s = cache.stats()
            rows[f"{dtype}/{mb:g}"] = {
                "dtype": dtype,
                "cache_mb": mb,
                "entries_at_end": s.entries,
                "hit_rate_after_warmup": round(hits_after / max(1, hits_after + misses_after), 4),
                "hit_rate_all": round(s.hit_rate, 4),
                "max_bytes_held": s.max_bytes_held,
                "capacity_bytes": s.capacity_bytes,
                "within_bound": s.max_bytes_held <= s.capacity_bytes
                and largest <= s.capacity_bytes,
                "evictions": s.evictions,
            }
            print(f"  {dtype} {mb:g} MiB: {rows[f'{dtype}/{mb:g}']}", flush=True)
    tokens = list(prefix_tokens.values())
    return {
        "pool_passages": pool,
        "queries": len(stream),
        "warmup": args.warmup,
        "bytes_per_token": {"float32": per_token_elements * 4, "bfloat16": per_token_elements * 2},
        "prefix_tokens": {
            "distinct_passages_seen": len(tokens),
            "mean": round(statistics.fmean(tokens), 1),
            "p95": quantiles([float(t) for t in tokens])["p95"],
        },
        "by_size": rows,
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mode", choices=["stream", "bound", "replay"])
    parser.add_argument("--queries", type=int, default=300, help="queries in the stream")
    parser.add_argument("--cache-mb", type=float, default=2048, help="the cache's bound, MiB")
    parser.add_argument("--warmup", type=int, default=100, help="stream: the cold queries")
    parser.add_argument("--baseline-queries", type=int, default=40, help="stream: uncached")
    parser.add_argument("--integrations", type=int, default=20, help="stream: per framework")
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--dtype", default="bfloat16", help="bound: the model's dtype")
    parser.add_argument("--zipf", type=float, default=1.0, help="popularity exponent s")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--sizes-mb",
        type=float,
        nargs="+",
        default=[256, 512, 1024, 2048, 4096, 8192],
        help="replay: the bounds to replay",
    )
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.mode != "bound" and not 0 < args.warmup < args.queries:
        parser.error("--warmup must be between 0 and --queries")
    load_start = os.getloadavg()[0]
    started = time.perf_counter()
    body = {"stream": stream_mode, "bound": bound_mode, "replay": replay_mode}[args.mode](args)
    report = {
        "benchmark": f"prefix cache reuse ({args.mode}), select_and_place on the embedded model",
        "command": "OMP_NUM_THREADS={} python benchmarks/reuse.py {}".format(
            os.environ.get("OMP_NUM_THREADS", "unset"),
            " ".join(sys.argv[1:] if argv is None else argv),
        ),
        "machine": {
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
        },
        "load_average_at_start": round(load_start, 2),
        "load_average_at_end": round(os.getloadavg()[0], 2),
        "wall_seconds": round(time.perf_counter() - started, 1),
        "zipf_s": args.zipf,
        "seed": args.seed,
        **({} if args.mode == "replay" else {"cache_mb": args.cache_mb}),
        **body,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return report


if __name__ == "__main__":
    main()
