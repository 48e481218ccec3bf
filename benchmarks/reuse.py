"""Scoring with passage reuse: ``select_and_place`` on a query stream, with and without the
prefix cache (issue 41).

    OMP_NUM_THREADS=1 python benchmarks/reuse.py stream --queries 300 --warmup 150 \\
        --baseline-queries 30 --integrations 10 --cache-mb 2048 --dtypes bfloat16 float32 \\
        --out benchmarks/results/reuse-local.json
    OMP_NUM_THREADS=1 python benchmarks/reuse.py bound --queries 300 --cache-mb 128 \\
        --dtype bfloat16 --out benchmarks/results/reuse-bound.json
    OMP_NUM_THREADS=1 python benchmarks/reuse.py replay --queries 5000 --warmup 1000 \\
        --out benchmarks/results/reuse-replay.json
    OMP_NUM_THREADS=1 python benchmarks/reuse.py dev --queries 200 --bfloat16-questions 50 \\
        --cache-mb 2048 --out benchmarks/results/reuse-dev.json
    OMP_NUM_THREADS=1 python benchmarks/reuse.py served --queries 300 --warmup 150 \\
        --settings on off --out benchmarks/results/reuse-served-300.json
    OMP_NUM_THREADS=1 python benchmarks/reuse.py served --queries 300 --warmup 150 \\
        --settings on off --seed 1 --out benchmarks/results/reuse-served-300-seed1.json

The pool: the distinct passages of the packaged dev file (1,967 of its 2,000 questions'
gold passages). Each passage gets a popularity rank (a seeded shuffle of the pool) and
each query draws its ten passages without replacement with probability proportional to
``1 / rank ** s`` (Zipf, ``--zipf 1.0``); its question is a dev question drawn uniformly
(the cost of scoring does not depend on whether the passages answer it). Every query
goes through ``select_and_place`` (the core strategy) on the embedded model loaded with
``--cache-mb`` (on) and without (off, the baseline), in each ``--dtypes``.

``stream``: per dtype, the cached model runs the whole stream from an empty cache; its
first ``--warmup`` queries are the cold phase, the rest the steady state (warm). The
uncached model runs ``--baseline-queries`` of the same queries, spread evenly over the
stream, each right after the cached model ran it (the uncached cost does not depend on
what came before, and a shared machine's load changes: the timings are paired); on
those queries the two runs' scores and kept passages are compared. Then
``--integrations`` more queries go through LangChain's ``SelectAndPlace`` compressor,
and as many others through LlamaIndex's ``SelectAndPlace`` postprocessor, each with the
warm cache and then without. Seconds are wall seconds of the call (rendering,
tokenising, scoring). Both models warm up on one query outside the pool first.

``bound``: one dtype, the cached model alone, ``--queries`` queries; after every query the
cache's bytes held are checked against its bound (the JSON records the largest seen).

``replay``: no model computes; the stream's lookups go through the real
:class:`~rag_position.models.prefix_cache.PrefixCache` with entries of each passage's
real size (its prefix tokens, as the embedded model tokenises its one-passage prompt,
x bytes a token), at each ``--sizes-mb``: the hit rate after ``--warmup`` queries, and
the bound checked after every store, over thousands of queries in seconds.

``dev``: the first ``--queries`` dev questions with their ten passages (as the eval
builds them), each through ``select_and_place`` with the cache and then without, in
float32; on the first ``--bfloat16-questions`` also in bfloat16, both ways compared with
float32 without the cache (how far bfloat16 moves the choice, with and without it).

``served``: the stream through ``rag-position serve``'s vLLM (``VLLMServer``, the
``openai:`` backend, forced scoring), with vLLM's prefix caching on (as ``serve`` starts
it) and off (``--no-enable-prefix-caching``), each with the backend's prompt
log-probabilities read from the cache (``serve``'s default) and with forced generation
alone (``--no-enable-prompt-tokens-details``: the backend cannot tell what a read
skipped, so it does not read); vLLM's own counters (``/metrics``) give the prompt tokens
its prefix cache served. The ratio is warm against the faster uncached setting.

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

from rag_position.data import ORACLE_FILE, QAInstance, default_data_dir, load_qa
from rag_position.models import load_model
from rag_position.passages import Passage
from rag_position.strategies import select_and_place

Query = tuple[str, list[Passage]]


def dev_pool(records: Sequence[QAInstance] | None = None) -> list[Passage]:
    """The dev file's distinct passages (the stream's pool), in the file's order
    (``records``: the file, when already read)."""
    pool: dict[tuple[str, str], Passage] = {}
    for r in load_qa(default_data_dir() / ORACLE_FILE) if records is None else records:
        for p in r.passages:
            pool.setdefault((p.title, p.text), p)
    return list(pool.values())


def build_stream(n: int, zipf: float, seed: int) -> tuple[list[Query], int]:
    """``n`` queries (question, ten passages) over the dev pool, and the pool's size."""
    records = load_qa(default_data_dir() / ORACLE_FILE)
    passages = dev_pool(records)
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


def one_query(model: Any, query: Query) -> dict[str, Any]:
    """One query through ``select_and_place``: wall seconds, hits and misses, the result."""
    cache = getattr(model, "prefix_cache", None)
    before = cache.stats() if cache is not None else None
    t0 = time.perf_counter()
    result = select_and_place(query[0], query[1], model)
    row: dict[str, Any] = {
        "seconds": time.perf_counter() - t0,
        "order": result.order,
        "dropped": result.details["dropped"],
        "scores": result.scores,
    }
    if cache is not None and before is not None:
        after = cache.stats()
        row["hits"], row["misses"] = after.hits - before.hits, after.misses - before.misses
        row["bytes_held"], row["max_bytes_held"] = after.bytes_held, after.max_bytes_held
        row["capacity_bytes"] = after.capacity_bytes
    return row


def progress(rows: Sequence[dict[str, Any]], total: int, start: float, every: int) -> None:
    if len(rows) % every == 0:
        last = rows[-every:]
        print(
            f"  {len(rows)}/{total} queries, {time.perf_counter() - start:.0f} s, last {every}: "
            f"p50 {statistics.median(r['seconds'] for r in last):.3f} s, "
            f"{sum(r.get('hits', 0) for r in last)} hits",
            flush=True,
        )


def run_queries(
    model: Any, stream: Sequence[Query], *, check_bound: bool = False, every: int = 50
) -> list[dict[str, Any]]:
    """Each query through ``select_and_place`` (:func:`one_query`)."""
    rows: list[dict[str, Any]] = []
    start = time.perf_counter()
    for k, query in enumerate(stream):
        rows.append(one_query(model, query))
        if check_bound and rows[-1]["max_bytes_held"] > rows[-1]["capacity_bytes"]:
            raise AssertionError(f"query {k}: {rows[-1]['max_bytes_held']} bytes held, over bound")
        progress(rows, len(stream), start, every)
    return rows


def phase(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"seconds_per_query": quantiles([r["seconds"] for r in rows])}
    if rows and "hits" in rows[0]:
        hits, misses = sum(r["hits"] for r in rows), sum(r["misses"] for r in rows)
        out["hit_rate"] = round(hits / max(1, hits + misses), 4)
        out["hits"], out["misses"] = hits, misses
    return out


def compare(cached: Sequence[dict[str, Any]], plain: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """How one run's results differ from another's on the same queries: the largest
    difference of a passage's mean log-likelihood, and in how many queries the kept
    passages and their order (and the dropped ones' ranking), the kept set alone, and
    the likeliest passage are the same."""
    pairs = list(zip(cached, plain, strict=True))
    diffs = [abs(a - b) for c, p in pairs for a, b in zip(c["scores"], p["scores"], strict=True)]
    return {
        "queries": len(plain),
        "max_abs_mean_logprob_difference": float(f"{max(diffs):.3g}"),
        "same_kept_passages_and_order": sum(
            c["order"] == p["order"] and c["dropped"] == p["dropped"] for c, p in pairs
        ),
        "same_kept_set": sum(set(c["order"]) == set(p["order"]) for c, p in pairs),
        "same_likeliest_passage": sum(c["order"][-1] == p["order"][-1] for c, p in pairs),
    }


def integration_runs(cached: Any, plain: Any, stream: Sequence[Query]) -> dict[str, Any]:
    """Queries through the LangChain compressor and the LlamaIndex postprocessor, each
    query with the cache (warm) then without, one after the other."""
    try:
        from langchain_core.documents import Document
        from langchain_rag_position import SelectAndPlace as LangChainSelect
        from llama_index.core.schema import NodeWithScore, TextNode
        from llama_index.postprocessor.rag_position import SelectAndPlace as LlamaSelect
    except ImportError as exc:
        return {"skipped": f"not installed: {exc.name}"}

    def langchain(model: Any) -> Callable[[Query], object]:
        select = LangChainSelect(scorer=model)
        return lambda q: select.compress_documents(
            [Document(page_content=p.text, metadata={"title": p.title}) for p in q[1]], q[0]
        )

    def llamaindex(model: Any) -> Callable[[Query], object]:
        select = LlamaSelect(scorer=model)
        return lambda q: select.postprocess_nodes(
            [NodeWithScore(node=TextNode(text=p.text, metadata={"title": p.title})) for p in q[1]],
            query_str=q[0],
        )

    out: dict[str, Any] = {}
    half = len(stream) // 2  # each framework its own queries, so neither warms the other's
    for k, (name, make) in enumerate((("langchain_compressor", langchain),
                                      ("llamaindex_postprocessor", llamaindex))):  # fmt: skip
        calls = {"cache_on": make(cached), "cache_off": make(plain)}
        seconds: dict[str, list[float]] = {setting: [] for setting in calls}
        before = cached.prefix_cache.stats()
        for query in stream[k * half : (k + 1) * half]:
            for setting, call in calls.items():
                t0 = time.perf_counter()
                call(query)
                seconds[setting].append(time.perf_counter() - t0)
        after = cached.prefix_cache.stats()
        hits, misses = after.hits - before.hits, after.misses - before.misses
        out[name] = {setting: {"seconds_per_query": quantiles(v)} for setting, v in seconds.items()}
        out[name]["cache_on"]["hit_rate"] = round(hits / max(1, hits + misses), 4)
    return out


def stream_mode(args: argparse.Namespace) -> dict[str, Any]:
    """The stream with the cache; the baseline queries also without it, right after (the
    same moment's load on a shared machine: the timings are paired)."""
    total = args.queries + 2 * args.integrations
    stream, pool = build_stream(total, args.zipf, args.seed)
    main, extra = stream[: args.queries], stream[args.queries :]
    picks = set(np.linspace(0, args.queries - 1, args.baseline_queries).astype(int).tolist())
    outside = ("warm-up question", [Passage("A passage outside the pool.", title="Warm-up")] * 2)
    report: dict[str, Any] = {"pool_passages": pool, "by_dtype": {}}
    for dtype in args.dtypes:
        cached = load_model("embedded", dtype=dtype, prefix_cache_mb=args.cache_mb)
        plain = load_model("embedded", dtype=dtype)
        for model in (cached, plain):  # first-call overheads stay out of the timings
            one_query(model, outside)
        cached.prefix_cache.clear()
        print(f"{dtype}: {len(main)} queries, {len(picks)} of them also uncached", flush=True)
        rows: list[dict[str, Any]] = []
        paired: dict[int, dict[str, Any]] = {}
        start = time.perf_counter()
        for k, query in enumerate(main):
            rows.append(one_query(cached, query))
            if k in picks:
                paired[k] = one_query(plain, query)
            progress(rows, len(main), start, 50)
        row: dict[str, Any] = {
            "cache_on": {
                "cold": phase(rows[: args.warmup]),
                "warm": phase(rows[args.warmup :]),
                "cache": cache_stats(cached),
                "rss_mb_after": round(psutil.Process().memory_info().rss / 2**20),
            },
            "cache_off": phase(list(paired.values())),
            "equality": compare(
                [rows[k] for k in sorted(paired)], [paired[k] for k in sorted(paired)]
            ),
        }
        for name, ks in (("cold", [k for k in paired if k < args.warmup]),
                         ("warm", [k for k in paired if k >= args.warmup])):  # fmt: skip
            ratios = [rows[k]["seconds"] / paired[k]["seconds"] for k in ks]
            row[f"{name}_paired"] = {
                "queries": len(ks),
                "uncached_seconds_per_query": quantiles([paired[k]["seconds"] for k in ks]),
                "cached_seconds_per_query": quantiles([rows[k]["seconds"] for k in ks]),
                "median_cached_over_uncached": round(statistics.median(ratios), 3),
            }
        off = row["cache_off"]["seconds_per_query"]["p50"]
        for name in ("cold", "warm"):
            on = row["cache_on"][name]["seconds_per_query"]["p50"]
            row[f"{name}_p50_over_uncached_p50"] = round(on / off, 3)
        if extra:
            print(f"{dtype}: integrations, {len(extra) // 2} queries each", flush=True)
            row["integrations"] = integration_runs(cached, plain, extra)
        report["by_dtype"][dtype] = row
        del cached, plain
    return report


def dev_mode(args: argparse.Namespace) -> dict[str, Any]:
    """The first ``--queries`` dev questions (ten passages each, as the eval builds them):
    ``select_and_place`` in float32 with the cache and without, question by question;
    on the first ``--bfloat16-questions`` of them, bfloat16 with and without the cache,
    each compared with float32 without it."""
    from rag_position.eval.tasks.datasets import load_multidoc

    instances = load_multidoc(None, docs=10, questions=args.queries).instances
    queries: list[Query] = [(i.question, list(i.passages)) for i in instances]
    report: dict[str, Any] = {"questions": len(queries)}
    runs: dict[str, list[dict[str, Any]]] = {}
    for dtype, count in (("float32", len(queries)), ("bfloat16", args.bfloat16_questions)):
        if not count:
            continue
        cached = load_model("embedded", dtype=dtype, prefix_cache_mb=args.cache_mb)
        plain = load_model("embedded", dtype=dtype)
        print(f"{dtype}: {count} dev questions, with and without the cache", flush=True)
        on: list[dict[str, Any]] = []
        off: list[dict[str, Any]] = []
        start = time.perf_counter()
        for query in queries[:count]:
            on.append(one_query(cached, query))
            off.append(one_query(plain, query))
            progress(on, count, start, 25)
        runs[f"{dtype}_on"], runs[f"{dtype}_off"] = on, off
        report[dtype] = {
            "questions": count,
            "cache_on": phase(on),
            "cache_off": phase(off),
            "cache": cache_stats(cached),
            "with_against_without": compare(on, off),
        }
        del cached, plain
    if "bfloat16_on" in runs:
        reference = runs["float32_off"][: args.bfloat16_questions]
        report["bfloat16"]["against_float32_without"] = {
            "without_cache": compare(runs["bfloat16_off"], reference),
            "with_cache": compare(runs["bfloat16_on"], reference),
        }
    return report


def bound_mode(args: argparse.Namespace) -> dict[str, Any]:
    stream, pool = build_stream(args.queries, args.zipf, args.seed)
    cached = load_model("embedded", dtype=args.dtype, prefix_cache_mb=args.cache_mb)
    rows = run_queries(cached, stream, check_bound=True, every=50)
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


def vllm_prefix_counters(server: Any) -> dict[str, float]:
    """vLLM's prefix-cache counters from ``/metrics``: prompt tokens looked up, and hit."""
    import urllib.request

    root = server.base_url.removesuffix("/v1")
    with urllib.request.urlopen(f"{root}/metrics", timeout=30) as reply:
        text = reply.read().decode("utf-8")
    out = {"queries": 0.0, "hits": 0.0}
    for line in text.splitlines():
        for name in out:
            if line.startswith(f"vllm:prefix_cache_{name}_total"):
                out[name] += float(line.rsplit(" ", 1)[1])
    return out


SERVED_SETTINGS = {
    "on": [],  # serve's defaults: prompt log-probabilities read the cache
    "on, forced only": ["--no-enable-prompt-tokens-details"],  # no reads: forced generation
    "off": ["--no-enable-prefix-caching"],
    "off, forced only": ["--no-enable-prefix-caching", "--no-enable-prompt-tokens-details"],
}


def served_mode(args: argparse.Namespace) -> dict[str, Any]:
    """The stream through ``rag-position serve``'s vLLM (the ``openai:`` backend, forced
    scoring), with vLLM's prefix caching on (as ``serve`` starts it) and off."""
    from rag_position.serving import VLLMServer

    stream, pool = build_stream(args.queries, args.zipf, args.seed)
    warmup = ("warm-up question", [Passage("A passage outside the pool.", title="Warm-up")] * 2)
    report: dict[str, Any] = {"pool_passages": pool, "dtype": args.dtype, "by_setting": {}}
    report |= {"vllm_args": list(args.vllm_arg), "concurrency": args.concurrency}
    report["kv_cache_gib"] = os.environ.get("VLLM_CPU_KVCACHE_SPACE", "2")  # serve's default
    for setting, extra in SERVED_SETTINGS.items():
        if setting not in args.settings:
            continue
        print(f"vLLM, prefix caching {setting}: {len(stream)} queries", flush=True)
        extra = [*extra, *args.vllm_arg]
        with VLLMServer("embedded", port=0, dtype=args.dtype, extra_args=extra) as server:
            model = load_model(server.spec, scoring=args.scoring, concurrency=args.concurrency)
            run_queries(model, [warmup])  # the first requests' compilation stays out
            counters = [vllm_prefix_counters(server)]
            cold = run_queries(model, stream[: args.warmup])
            counters.append(vllm_prefix_counters(server))
            warm = run_queries(model, stream[args.warmup :])
            counters.append(vllm_prefix_counters(server))
        row: dict[str, Any] = {"cold": phase(cold), "warm": phase(warm)}
        for k, name in enumerate(("cold", "warm")):
            looked = counters[k + 1]["queries"] - counters[k]["queries"]
            hit = counters[k + 1]["hits"] - counters[k]["hits"]
            rate = round(hit / looked, 4) if looked else None
            row[name] |= {"vllm_prompt_tokens_looked_up": looked, "vllm_prompt_tokens_hit": hit,
                          "vllm_token_hit_rate": rate}  # fmt: skip
        report["by_setting"][setting] = row
    p50 = {s: row["warm"]["seconds_per_query"]["p50"] for s, row in report["by_setting"].items()}
    off = min((p50[s] for s in ("off", "off, forced only") if s in p50), default=None)
    for on, key in (("on", "on_over_off"), ("on, forced only", "forced_only_on_over_off")):
        if off and on in p50:  # against the faster uncached way
            report[f"warm_p50_{key}"] = round(p50[on] / off, 3)
    return report


def run_header(
    title: str, script: str, argv: Sequence[str] | None, load_start: float, started: float
) -> dict[str, Any]:
    """What every benchmark JSON of this script (and ``pipeline_latency.py``) starts with:
    the title, the command, the machine, the load average at start and end, the wall time."""
    return {
        "benchmark": title,
        "command": "OMP_NUM_THREADS={} python benchmarks/{} {}".format(
            os.environ.get("OMP_NUM_THREADS", "unset"),
            script,
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
    }


def write_report(out: Path, report: dict[str, Any]) -> dict[str, Any]:
    """``report`` as indented JSON at ``out`` (its folder made), said on stdout."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return report


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mode", choices=["stream", "bound", "replay", "served", "dev"])
    parser.add_argument("--queries", type=int, default=300, help="queries in the stream")
    parser.add_argument("--cache-mb", type=float, default=2048, help="the cache's bound, MiB")
    parser.add_argument("--warmup", type=int, default=100, help="stream: the cold queries")
    parser.add_argument("--baseline-queries", type=int, default=40, help="stream: uncached")
    parser.add_argument("--integrations", type=int, default=20, help="stream: per framework")
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--dtype", default="bfloat16", help="bound, served: the model's dtype")
    parser.add_argument("--scoring", default="forced", help="served: the backend's scoring")
    parser.add_argument(
        "--vllm-arg", action="append", default=[], help="served: a vLLM argument (repeat)"
    )
    settings = list(SERVED_SETTINGS)
    parser.add_argument("--settings", nargs="+", choices=settings, default=settings)
    parser.add_argument("--concurrency", type=int, default=8, help="served: requests in flight")
    parser.add_argument(
        "--bfloat16-questions", type=int, default=0, help="dev: also in bfloat16, on this many"
    )
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
    if args.mode not in ("bound", "dev") and not 0 < args.warmup < args.queries:
        parser.error("--warmup must be between 0 and --queries")
    load_start = os.getloadavg()[0]
    started = time.perf_counter()
    modes = {"stream": stream_mode, "bound": bound_mode, "replay": replay_mode}
    body = {**modes, "served": served_mode, "dev": dev_mode}[args.mode](args)
    report = {
        **run_header(
            f"prefix cache reuse ({args.mode}), select_and_place on the embedded model",
            "reuse.py",
            argv,
            load_start,
            started,
        ),
        "zipf_s": args.zipf,
        "seed": args.seed,
        **({} if args.mode in ("replay", "served") else {"cache_mb": args.cache_mb}),
        **body,
    }
    return write_report(args.out, report)


if __name__ == "__main__":
    main()
