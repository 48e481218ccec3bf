"""The cookbooks as a user opens them: default settings, every cell timed.

    python benchmarks/cookbooks.py --out benchmarks/results/cookbooks.json
    python benchmarks/cookbooks.py 01 05 --out /tmp/cookbooks.json   # some of them

Each notebook runs top to bottom in a fresh kernel whose working directory is the
notebook's folder (as Jupyter starts it), with none of the ``COOKBOOK_*`` variables set,
so every cell runs at the notebook's own defaults (the test suite runs them in a small
setting instead: ``cookbooks/test_cookbooks.py``). Outputs go where a user's would,
under ``cookbooks/runs/`` (ignored by git), which is emptied first: a first run is what
is measured (an eval run resumes, so a rerun over earlier outputs takes seconds). The
JSON records, per notebook, each code cell's wall seconds and first line, whether it
raised, and the slowest cell; the target is no cell over 180 s in float32 on the
project's 2-core CPU (issue 40: a notebook demonstrates; a long measurement is read from
its committed results). ``RAG_POSITION_DTYPE=float32`` runs them as on a CPU without
bfloat16 (recorded as ``dtype``). Exit status 1 when a notebook failed or a cell went
over the target.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import nbclient
import nbformat

ROOT = Path(__file__).resolve().parents[1]
COOKBOOKS = ROOT / "cookbooks"
TARGET_SECONDS = 180.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("which", nargs="*", help="notebook prefixes such as 01 05 (default: all)")
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    args = parser.parse_args()
    paths = sorted(COOKBOOKS.glob("*.ipynb"))
    if args.which:
        paths = [p for p in paths if any(p.name.startswith(w) for w in args.which)]
    if not paths:
        parser.error(f"no notebook matches {args.which}")
    env_set = sorted(k for k in os.environ if k.startswith("COOKBOOK_"))
    if env_set:
        parser.error(f"unset {', '.join(env_set)}: this measures the notebooks' own defaults")
    results = []
    for path in paths:
        print(f"{path.name} ...", flush=True)
        results.append(run_notebook(path))
        row = results[-1]
        print(
            f"  {row['seconds']:.0f} s, slowest cell {row['slowest_cell_seconds']:.0f} s, "
            f"{'ok' if row['ok'] else 'FAILED: ' + row['error']}",
            flush=True,
        )
    report = {
        "machine": {
            "cpus": os.cpu_count(),
            "processor": platform.processor() or platform.machine(),
            "load_average_at_start": os.getloadavg(),
        },
        "dtype": os.environ.get("RAG_POSITION_DTYPE") or "auto",
        "target_seconds_per_cell": TARGET_SECONDS,
        "notebooks": results,
        "all_ok": all(r["ok"] and r["slowest_cell_seconds"] <= TARGET_SECONDS for r in results),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0 if report["all_ok"] else 1


def run_notebook(path: Path) -> dict[str, Any]:
    shutil.rmtree(COOKBOOKS / "runs", ignore_errors=True)  # no earlier run to resume
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=None, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    cells: list[dict[str, Any]] = []
    error = ""
    start = time.perf_counter()
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            began = time.perf_counter()
            try:
                client.execute_cell(cell, index)
            except nbclient.exceptions.CellExecutionError as exc:
                error = str(exc).strip().splitlines()[-1][:300]
            cells.append(
                {
                    "cell": index,
                    "first_line": cell.source.strip().splitlines()[0][:80] if cell.source else "",
                    "seconds": round(time.perf_counter() - began, 1),
                }
            )
            if error:
                break
    return {
        "notebook": path.name,
        "ok": not error,
        "error": error,
        "seconds": round(time.perf_counter() - start, 1),
        "slowest_cell_seconds": max((c["seconds"] for c in cells), default=0.0),
        "cells": cells,
    }


if __name__ == "__main__":
    sys.exit(main())
