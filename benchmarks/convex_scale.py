"""ConvexScore's own cost as N grows, with a scorer that costs nothing (issue 30).

    OMP_NUM_THREADS=1 python benchmarks/convex_scale.py --out benchmarks/results/convex_scale.json

``convex_score`` renders one rotation set: N prompts, each holding all N passages
(N² passage renderings), and scores them in one call. With a scripted scorer that
answers at once (``rag_position.testing.scripted.ScriptedScorer``) what is left is the
library's own work: the design, rendering the prompts (inside ``question_likelihood``),
and the bookkeeping (the N x N likelihood table and the scores). Each size is timed
end to end (best of ``--repeats``) and by phase, and its peak traced memory
(``tracemalloc``: Python objects and numpy buffers, the prompt text included) is taken in
a separate run. Passages are ``--words`` words long (100: the Wikipedia chunks of the
"Lost in the Middle" data), each with a title.

Sizes over ``MAX_PASSAGES`` are refused with a ``ValueError`` before anything is
rendered: ``--refuse`` times that refusal. The JSON records the load average at start:
run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rag_position.strategies import convex_score
from rag_position.strategies._convex_score import (
    MAX_PASSAGES,
    MAX_PLACEMENTS,
    convex_design,
    convex_scores,
    likelihood_table,
)
from rag_position.strategies._question_likelihood import question_likelihood
from rag_position.testing.scripted import ScriptedScorer

QUESTION = "who wrote the play hamlet?"
SCRIPT = (-1.25, -2.5, -1.75, -3.0)  # cycled: a scorer that costs nothing


def make_passages(n: int, words: int) -> list[dict[str, str]]:
    return [
        {"title": f"Title {i}", "text": " ".join(f"w{i}t{j}" for j in range(words))}
        for i in range(n)
    ]


def best_of(repeats: int, run: Callable[[], Any]) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def phases(docs: Sequence[Any]) -> dict[str, float]:
    """Seconds per phase of one ``convex_score`` call, done step by step as it does them."""
    n = len(docs)
    t0 = time.perf_counter()
    orders = convex_design(n)
    t1 = time.perf_counter()
    gauge = question_likelihood(QUESTION, docs, ScriptedScorer(SCRIPT), orders=orders)
    t2 = time.perf_counter()
    table = likelihood_table(orders, gauge.scores, n)
    scores = convex_scores(table)[0]
    sorted(range(n), key=lambda d: (-scores[d], d))
    t3 = time.perf_counter()
    return {
        "design_s": round(t1 - t0, 4),
        "render_and_score_s": round(t2 - t1, 4),
        "bookkeeping_s": round(t3 - t2, 4),
    }


def measure(n: int, words: int, repeats: int) -> dict[str, Any]:
    docs = make_passages(n, words)
    seconds = best_of(repeats, lambda: convex_score(QUESTION, docs, ScriptedScorer(SCRIPT)))
    tracemalloc.start()
    result = convex_score(QUESTION, docs, ScriptedScorer(SCRIPT))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    gauge = question_likelihood(QUESTION, docs, ScriptedScorer(SCRIPT), orders=result.orders[:1])
    return {
        "n": n,
        "prompts": len(result.orders),
        "passage_renderings": len(result.orders) * n,
        "prompt_chars_total": len(gauge.prompts[0]) * len(result.orders),
        "seconds": round(seconds, 3),
        **phases(docs),
        "peak_traced_mb": round(peak / 2**20, 1),
    }


def refuse(n: int, words: int, **options: Any) -> dict[str, Any]:
    docs = make_passages(n, words)
    scorer = ScriptedScorer(SCRIPT)
    start = time.perf_counter()
    try:
        convex_score(QUESTION, docs, scorer, **options)
    except ValueError as error:
        seconds, message = time.perf_counter() - start, str(error)
    else:
        raise SystemExit(f"convex_score took {n} passages with {options}: expected a refusal")
    return {
        "n": n,
        "options": options,
        "refused_in_s": round(seconds, 5),
        "scorer_calls": scorer.calls,
        "message": message,
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default=f"100,250,{MAX_PASSAGES}", help="N to measure")
    parser.add_argument("--refuse", default="1000,2000,10000", help="N expected to be refused")
    parser.add_argument("--words", type=int, default=100, help="words per passage")
    parser.add_argument("--repeats", type=int, default=2, help="timings: best of this many")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/convex_scale.json"))
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]

    sizes = [int(x) for x in args.sizes.split(",") if x]
    too_big = [n for n in sizes if n > MAX_PASSAGES]
    if too_big:
        parser.error(f"--sizes {too_big} are over MAX_PASSAGES = {MAX_PASSAGES}: use --refuse")
    rows = []
    for n in sizes:
        rows.append(measure(n, args.words, args.repeats))
        print(json.dumps(rows[-1]), file=sys.stderr)
    refused = [refuse(int(n), args.words) for n in args.refuse.split(",") if n]
    authors_n = round(MAX_PLACEMENTS ** (1 / 3)) + 1  # N³ placements just over the cap
    refused.append(refuse(authors_n, args.words, design="authors"))

    per_rendering = [r["seconds"] / r["passage_renderings"] * 1e6 for r in rows]
    result = {
        "benchmark": "convex_score's own time and memory vs N, zero-cost scripted scorer",
        "command": " ".join(["python benchmarks/convex_scale.py", *(argv or sys.argv[1:])]),
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "numpy": np.__version__,
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        },
        "load_average_at_start": load,
        "max_passages": MAX_PASSAGES,
        "max_placements": MAX_PLACEMENTS,
        "words_per_passage": args.words,
        "repeats": args.repeats,
        "sizes": rows,
        "microseconds_per_passage_rendering": [round(x, 2) for x in per_rendering],
        "refused": refused,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
