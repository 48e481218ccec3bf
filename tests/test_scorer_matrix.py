"""``results/scorer-matrix.json`` (docs/measurements.md, "A small scorer in front of your
reader") is what ``scripts/scorer_matrix.py`` makes from the committed run folders."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CELLS = {  # cell -> its run folders under results/
    "SmolLM2 → SmolLM2": "select200 compare200-alone ucurve200 peers-smollm2 llm-rerank-smollm2 "
    "select-similar-smollm2",
    "Gemma → Gemma": "gemma-compare200 gemma-ucurve200",
    "SmolLM2 → Gemma": "scorer-smollm2-reader-gemma scorer-smollm2-reader-gemma-llm-rerank "
    "select-similar-gemma",
    "SmolLM2 → Qwen 0.5B": "scorer-smollm2-reader-qwen05 scorer-smollm2-reader-qwen05-llm-rerank "
    "select-similar-qwen05",
}


def test_the_committed_matrix_is_what_the_script_makes(tmp_path: Path) -> None:
    args = [
        a
        for name, folders in CELLS.items()
        for a in ("--cell", name, *(f"results/{f}" for f in folders.split()))
    ]
    out = tmp_path / "matrix.json"
    subprocess.run(
        [sys.executable, "scripts/scorer_matrix.py", *args, "--out", str(out)],
        cwd=ROOT, check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    made = json.loads(out.read_text(encoding="utf-8"))
    assert made == json.loads((ROOT / "results/scorer-matrix.json").read_text(encoding="utf-8"))
    ceiling = {
        c["cell"]: c["oracle_versus"]["embeddings_filter"] for c in made if c.get("oracle_versus")
    }
    assert {k: (v["wins"], v["losses"]) for k, v in ceiling.items()} == {
        "SmolLM2 → SmolLM2": (7, 0),
        "SmolLM2 → Gemma": (6, 0),
        "SmolLM2 → Qwen 0.5B": (7, 0),
    }  # the oracle's margin over the filter (docs/measurements.md)
