"""vLLM's KV block size through ``rag-position serve`` on a CPU: what it does to answers,
to scoring, and to a query whose passages the prefix cache holds (issue 41).

    OMP_NUM_THREADS=1 python benchmarks/serve_blocks.py --block-sizes 128 32 --repeats 2 \\
        --out benchmarks/results/serve-blocks.json
    OMP_NUM_THREADS=1 python benchmarks/serve_blocks.py --block-sizes 32 \\
        --spin-seconds vllm 0.05 0.005 --repeats 2 --out benchmarks/results/serve-spin.json

Each repeat starts one fresh server per block size, in turn (128, 32, 128, 32: a shared
machine's load drifts, so the sizes alternate), ``VLLMServer("embedded",
dtype=bfloat16)`` with ``--block-size`` (``serve``'s other defaults), and on it:

- ``answers``: ``--prompts`` ten-passage QA prompts (as ``benchmarks/serving.py`` builds
  them) answered in one batch, greedy, ``--max-new-tokens`` at most: wall seconds, and
  the answers (equal across block sizes or not).
- ``scoring``: the same prompts' question spans scored cold, by forced generation (what
  the backend does with ten-passage prompts, under ``READ_MIN_SHARE``), then the next
  ``--prompts`` prompts read from their prompt log-probabilities (``READ_MIN_SHARE`` set
  to 0 here alone): what the rule chooses between.
- ``held``: ``--queries`` ``select_and_place`` queries of ten dev passages each, cold;
  then each again with another question: every passage's prefix held by the cache.
  The seconds of each, and the spans whose head the cache held (forced).

``--spin-seconds`` crosses each block size with values of ``RAG_POSITION_VLLM_SPIN_SECONDS``
(``vllm``: empty, vLLM's own 1 s spin; ``serve`` sets 0.005 on a CPU): how long vLLM's
processes busy-loop after a message, which should not change the server's speed.

The answers come first (their chat-formatted prompts share no prefix with the raw
scoring prompts, nor the two scoring sets with each other). Warm-ups outside the
measured prompts run first, so compilation is not timed. The JSON records the command,
the load average at start and end, and the thread count.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from reuse import dev_pool, quantiles, run_header, write_report
from serving import build_prompts, timed

from rag_position.data import ORACLE_FILE, default_data_dir, load_qa
from rag_position.models import _openai_replies, _openai_scoring, load_model
from rag_position.passages import Passage
from rag_position.serving import SPIN_ENV, VLLMServer
from rag_position.strategies import select_and_place


class HeadCounter:
    """Counts the read spans whose head the cache held (the reply parser wrapped)."""

    def __init__(self) -> None:
        self.read = self.heads = 0
        self._parse = _openai_replies.parse_prompt_logprobs

    def __call__(self, data: Any, prompts: Any, spans: Any) -> Any:
        got = self._parse(data, prompts, spans)
        self.read += len(spans)
        self.heads += sum(len(v) < b - a for v, (a, b) in zip(got[0], spans, strict=True))
        return got


def held_queries(n: int) -> list[tuple[str, str, list[Passage]]]:
    """``n`` queries: two dev questions each, and ten dev passages (distinct across queries)."""
    records = load_qa(default_data_dir() / ORACLE_FILE)
    pool = dev_pool(records)
    return [
        (records[2 * k].question, records[2 * k + 1].question, pool[10 * k : 10 * k + 10])
        for k in range(n)
    ]


def one_server(block: int, spin: str | None, args: argparse.Namespace) -> dict[str, Any]:
    prompts, spans = build_prompts(2 * args.prompts + 1)
    warm = (prompts.pop(), spans.pop())
    extra = [f"--block-size={block}"]
    row: dict[str, Any] = {"block_size": block, "spin_seconds": spin}
    given = os.environ.pop(SPIN_ENV, None)
    if spin is not None:
        os.environ[SPIN_ENV] = "" if spin == "vllm" else spin
    server = VLLMServer("embedded", port=0, dtype="bfloat16", extra_args=extra)
    try:
        server.start()
    finally:
        os.environ.pop(SPIN_ENV, None)
        if given is not None:
            os.environ[SPIN_ENV] = given
    with server:
        model = load_model(server.spec, concurrency=args.concurrency, scoring="forced")
        model.generate([warm[0]], max_new_tokens=4)
        model.score_spans([warm[0]], [warm[1]])  # a forced reply: the backend may read now
        answers, s = timed(
            lambda: model.generate(prompts[: args.prompts], max_new_tokens=args.max_new_tokens)
        )
        row["answers"] = {"seconds": round(s, 2), "texts": answers}
        first = slice(0, args.prompts)
        _, forced_s = timed(lambda: model.score_spans(prompts[first], spans[first]))
        second = slice(args.prompts, 2 * args.prompts)
        share = _openai_scoring.READ_MIN_SHARE
        _openai_scoring.READ_MIN_SHARE = 0.0  # this benchmark alone: read ten-passage prompts
        try:
            _, read_s = timed(lambda: model.score_spans(prompts[second], spans[second]))
        finally:
            _openai_scoring.READ_MIN_SHARE = share
        row["scoring"] = {"forced_seconds": round(forced_s, 2), "read_seconds": round(read_s, 2)}
        counter = HeadCounter()
        _openai_scoring.parse_prompt_logprobs = counter
        cold, held = [], []
        try:
            for question, again, passages in held_queries(args.queries):
                cold.append(timed(partial(select_and_place, question, passages, model))[1])
                held.append(timed(partial(select_and_place, again, passages, model))[1])
        finally:
            _openai_scoring.parse_prompt_logprobs = counter._parse
        row["held"] = {
            "cold_seconds": quantiles(cold),
            "held_seconds": quantiles(held),
            "spans_read": counter.read,
            "heads_forced": counter.heads,
        }
    print({k: v for k, v in row.items() if k != "answers"}, row["answers"]["seconds"], flush=True)
    return row


def label(block: int, spin: str | None) -> str:
    """A setting's key in the summary: ``"32"``, or ``"32, spin 0.05"``."""
    return str(block) if spin is None else f"{block}, spin {spin}"


def summary(rows: Sequence[dict[str, Any]], settings: Sequence[tuple[int, Any]]) -> dict[str, Any]:
    """Per setting (block size, spin): the median over repeats of each timing."""
    out: dict[str, Any] = {}
    for block, spin in settings:
        mine = [r for r in rows if (r["block_size"], r["spin_seconds"]) == (block, spin)]
        out[label(block, spin)] = {
            "answers_seconds": statistics.median(r["answers"]["seconds"] for r in mine),
            "forced_scoring_seconds": statistics.median(
                r["scoring"]["forced_seconds"] for r in mine
            ),
            "read_scoring_seconds": statistics.median(r["scoring"]["read_seconds"] for r in mine),
            "held_query_p50": statistics.median(r["held"]["held_seconds"]["p50"] for r in mine),
            "cold_query_p50": statistics.median(r["held"]["cold_seconds"]["p50"] for r in mine),
        }
    texts = [r["answers"]["texts"] for r in rows]
    out["answers_equal_to_the_first_run"] = [
        sum(a == b for a, b in zip(texts[0], t, strict=True)) for t in texts
    ]
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--block-sizes", type=int, nargs="+", default=[128, 32])
    parser.add_argument(
        "--spin-seconds",
        nargs="+",
        default=None,
        help=f"{SPIN_ENV} values to compare (vllm: vLLM's own; default: serve's)",
    )
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--prompts", type=int, default=24, help="ten-passage prompts")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--queries", type=int, default=6, help="held: select_and_place queries")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    load_start = os.getloadavg()[0]
    started = time.perf_counter()
    settings = [(b, s) for b in args.block_sizes for s in (args.spin_seconds or [None])]
    rows = [one_server(b, s, args) for _ in range(args.repeats) for b, s in settings]
    report = {
        **run_header(
            "vLLM block size through serve: answers, scoring, held passages",
            "serve_blocks.py",
            argv,
            load_start,
            started,
        ),
        "prompts": args.prompts,
        "max_new_tokens": args.max_new_tokens,
        "summary": summary(rows, settings),
        "runs": rows,
    }
    return write_report(args.out, report)


if __name__ == "__main__":
    main()
