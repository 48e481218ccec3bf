"""How long ``rag-position serve`` takes to answer, start after start (JSON out).

    python benchmarks/serve_start.py --starts 2 --out benchmarks/results/serve-start.json
    python benchmarks/serve_start.py --aot 1 --starts 2 \\
        --out benchmarks/results/serve-start-aot.json

Each start runs ``rag-position serve`` (the embedded model, float32, window 4096, as the
tests start it) until it prints its spec, then stops it with Ctrl-C; the seconds from the
command to the spec are what a user waits. The first start may compile the model (vLLM
keeps the result in ``~/.cache/vllm``); the later ones show whether that cache loads.
``--aot`` sets ``VLLM_USE_AOT_COMPILE`` for the runs (unset: what ``serve`` chooses, 0 on
a CPU), and each start's log is searched for vLLM's "load failure" warning.
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

from reuse import run_header, write_report

from rag_position.testing.serve_process import ServeProcess

FAILED_LOAD = "due to a load failure"


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--starts", type=int, default=2, help="starts, one after the other")
    parser.add_argument("--model", default="embedded", help="the model spec served")
    parser.add_argument("--aot", choices=["0", "1"], help="VLLM_USE_AOT_COMPILE for the runs")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/serve-start.json"))
    args = parser.parse_args(argv)
    if args.starts < 1:
        parser.error("--starts must be >= 1")
    if args.aot is not None:
        os.environ["VLLM_USE_AOT_COMPILE"] = args.aot
    load_start, started = os.getloadavg()[0], time.perf_counter()
    starts = []
    for _ in range(args.starts):
        t0 = time.perf_counter()
        server = ServeProcess(["--model", args.model]).start()
        seconds = time.perf_counter() - t0
        server.stop()
        log = server.log.read_text(errors="replace")
        failed = FAILED_LOAD in log
        starts.append({"seconds": round(seconds, 1), "compile_cache_load_failed": failed})
        print(f"start {len(starts)}: {seconds:.1f} s", flush=True)
    report = run_header("rag-position serve start-up", "serve_start.py", argv, load_start, started)
    report["VLLM_USE_AOT_COMPILE"] = args.aot or "unset (serve chooses)"
    report["model"] = args.model
    report["starts"] = starts
    return write_report(args.out, report)


if __name__ == "__main__":
    main()
