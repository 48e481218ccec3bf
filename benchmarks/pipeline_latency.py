"""The scorer's added latency against the reader's time to first token, in the README's
LangChain pipeline (issue 41, target 4).

    OMP_NUM_THREADS=1 python benchmarks/pipeline_latency.py --queries 120 --warmup 80 \\
        --cache-mb 2048 --out benchmarks/results/pipeline-latency.json
    OMP_NUM_THREADS=1 python benchmarks/pipeline_latency.py --queries 100 --warmup 20 \\
        --prime 2000 --cache-mb 8192 --scorer-threads 2 \\
        --out benchmarks/results/pipeline-latency-primed-threads2.json

The README's pipeline: a ``PositionAwareRetriever`` with ``strategy="select_and_place"``
and a small local scorer (``ChatRagPosition`` around the embedded model, loaded with
the scoring prefix cache) in front of a reader served by ``rag-position serve`` (vLLM,
the embedded model or ``--reader``'s, prefix caching on, as ``serve`` starts it), the
prompt built by ``QuerySandwich``; the reader is LangChain's ``ChatOpenAI`` (``max_tokens=16``,
streaming). The queries are ``benchmarks/reuse.py``'s Zipf stream over the dev pool
(ten passages a query, ``--zipf 1.0``); the base retriever returns each query's ten
passages as documents (its own time is measured and is near zero).

For each query, one after the other on the same CPU: the retriever's call (the base
retriever plus the scorer: the **scorer's added latency** is the difference), then the
reader's time to first token on the kept documents' prompt (what the pipeline sends),
then on the prompt of all ten documents (what the pipeline would send without
selection). The first ``--warmup`` queries fill the cache (cold); the rest are the
steady state (warm), where the target compares p50s: the scorer's added latency
against the reader's time to first token. Reader and scorer share the CPU, as they
would on one machine (one after the other: each reply is read to its end, and
``--scorer-threads 2`` gives the scorer both cores while the reader waits); the
timings are paired per query. ``--prime N`` first scores the
pool's first N passages once, ten a call, untimed (``--prime 2000``: the whole pool): the
state a long stream reaches when the cache is sized to hold its corpus (docs/models.md,
"Sizing"); the hit rate of the warm phase is reported on its own.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))  # benchmarks/reuse.py, as a sibling

from reuse import Query, build_stream, dev_pool, quantiles, run_header, write_report

from rag_position.models import load_model
from rag_position.serving import VLLMServer


def first_token_seconds(reader: Any, prompt: Any) -> float:
    """Seconds from the request to the reader's first streamed chunk with content. The
    rest of the reply is read to its end, untimed, as a pipeline reads its answer: a reply
    left streaming would keep the server decoding into the next query's scoring."""
    t0 = time.perf_counter()
    first = None
    for chunk in reader.stream(prompt):
        if first is None and chunk.content:
            first = time.perf_counter() - t0
    return time.perf_counter() - t0 if first is None else first  # none: the whole reply's


def prime(retriever: Any, current: list[Any], question: str, passages: int) -> dict[str, Any]:
    """Score the first ``passages`` passages of the pool once, ten a call, before the
    stream: the state a long stream reaches when the cache holds the corpus (a passage's
    cached prefix does not depend on the question). Not timed as a query."""
    from langchain_core.documents import Document

    pool = dev_pool()[:passages]
    started = time.perf_counter()
    for start in range(0, len(pool), 10):
        group = pool[start : start + 10]
        current[0] = [Document(page_content=p.text, metadata={"title": p.title}) for p in group]
        retriever.invoke(question)
    return {"passages": len(pool), "seconds": round(time.perf_counter() - started, 1)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from langchain_openai import ChatOpenAI
    from langchain_rag_position import ChatRagPosition, PositionAwareRetriever, QuerySandwich

    stream, pool = build_stream(args.queries, args.zipf, args.seed)
    current: list[list[Document]] = [[]]  # the query being run: its ten documents

    class StreamRetriever(BaseRetriever):
        """The current query's ten passages as documents (a stand-in for a vector store)."""

        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            return list(current[0])

    scorer_model = load_model("embedded", dtype=args.dtype, prefix_cache_mb=args.cache_mb)
    base = StreamRetriever()
    retriever = PositionAwareRetriever(
        retriever=base, strategy="select_and_place", scorer=ChatRagPosition(model=scorer_model)
    )
    sandwich = QuerySandwich()
    rows: list[dict[str, Any]] = []
    with VLLMServer(args.reader, port=0, dtype=args.reader_dtype) as server:
        reader = ChatOpenAI(
            base_url=server.base_url,
            model=server.served_model_name,
            api_key="EMPTY",  # type: ignore[arg-type]
            max_tokens=16,
            temperature=0.0,
        )
        primed = prime(retriever, current, stream[0][0], args.prime)
        warm_up: Query = stream[0]
        for k, (question, passages) in enumerate([warm_up, *stream]):
            docs = [Document(page_content=p.text, metadata={"title": p.title}) for p in passages]
            current[0] = docs
            t0 = time.perf_counter()
            base.invoke(question)
            base_seconds = time.perf_counter() - t0
            t0 = time.perf_counter()
            kept = retriever.invoke(question)
            retriever_seconds = time.perf_counter() - t0
            selected = sandwich.invoke({"documents": kept, "question": question})
            full = sandwich.invoke({"documents": docs, "question": question})
            row = {
                "base_retriever_seconds": base_seconds,
                "scorer_added_seconds": retriever_seconds - base_seconds,
                "kept": len(kept),
                "reader_ttft_selected": first_token_seconds(reader, selected),
                "reader_ttft_full": first_token_seconds(reader, full),
            }
            if k:  # the first (outside the stream) warms both up
                rows.append(row)
            if k == args.warmup:  # the warm phase's hits and misses from here on
                at_warm = scorer_model.prefix_cache.stats()
            if k and k % 20 == 0:
                last = rows[-20:]
                print(
                    f"  {k}/{len(stream)}: scorer p50 "
                    f"{quantiles([r['scorer_added_seconds'] for r in last])['p50']} s, reader "
                    f"TTFT p50 {quantiles([r['reader_ttft_selected'] for r in last])['p50']} s",
                    flush=True,
                )
    cache = scorer_model.prefix_cache.stats()
    out: dict[str, Any] = {"pool_passages": pool, "primed": primed, "phases": {}}
    for name, part in (("cold", rows[: args.warmup]), ("warm", rows[args.warmup :])):
        out["phases"][name] = {
            key: quantiles([r[key] for r in part])
            for key in (
                "scorer_added_seconds",
                "base_retriever_seconds",
                "reader_ttft_selected",
                "reader_ttft_full",
            )
        } | {"kept_mean": round(sum(r["kept"] for r in part) / max(1, len(part)), 2)}
    warm = out["phases"]["warm"]
    scorer_p50 = warm["scorer_added_seconds"]["p50"]
    out["warm_scorer_p50_over_reader_ttft_p50"] = round(
        scorer_p50 / warm["reader_ttft_selected"]["p50"], 3
    )
    out["warm_scorer_p50_over_reader_ttft_full_p50"] = round(
        scorer_p50 / warm["reader_ttft_full"]["p50"], 3
    )
    out["target_met"] = scorer_p50 < warm["reader_ttft_selected"]["p50"]
    hits, misses = cache.hits - at_warm.hits, cache.misses - at_warm.misses
    out["cache"] = {
        "hit_rate": round(cache.hit_rate, 4),  # priming and the cold phase included
        "warm_hit_rate": round(hits / max(1, hits + misses), 4),
        "bytes_held": cache.bytes_held,
        "entries": cache.entries,
    }
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--queries", type=int, default=120, help="queries in the stream")
    parser.add_argument("--warmup", type=int, default=80, help="the cold queries")
    parser.add_argument("--cache-mb", type=float, default=2048, help="the scorer's cache, MiB")
    parser.add_argument("--dtype", default="bfloat16", help="the scorer's dtype")
    parser.add_argument(
        "--reader",
        default="embedded",
        help="the model `rag-position serve` serves as the reader (embedded:qwen2.5-coder-0.5b: "
        "a reader larger than the scorer)",
    )
    parser.add_argument("--reader-dtype", default="auto", help="vLLM's --dtype for the reader")
    parser.add_argument("--zipf", type=float, default=1.0, help="popularity exponent s")
    parser.add_argument(
        "--prime",
        type=int,
        default=0,
        help="score the pool's first N passages once before the stream (all: 2000)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--scorer-threads",
        type=int,
        default=None,
        help="the scorer's torch threads (default: OMP_NUM_THREADS's); the served reader "
        "keeps its own",
    )
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.scorer_threads is not None:
        import torch

        torch.set_num_threads(args.scorer_threads)
    if not 0 < args.warmup < args.queries:
        parser.error("--warmup must be between 0 and --queries")
    load_start = os.getloadavg()[0]
    started = time.perf_counter()
    body = run(args)
    report = {
        **run_header(
            "scorer's added latency vs the reader's time to first token (LangChain)",
            "pipeline_latency.py",
            argv,
            load_start,
            started,
        ),
        "zipf_s": args.zipf,
        "seed": args.seed,
        "cache_mb": args.cache_mb,
        "scorer_dtype": args.dtype,
        "reader": args.reader,
        "reader_dtype": args.reader_dtype,
        **body,
    }
    return write_report(args.out, report)


if __name__ == "__main__":
    main()
