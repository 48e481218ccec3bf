"""The predictions of every ordering row on the embedded model, pinned (issue 40, target 9).

``eval compare`` on the embedded model in float32 (1 question, 5 passages, the gold at a
random position, 12 new tokens) over the ordering rows and the eval's bounds: each record's
prompt, answer, kept passages and token cost must equal the snapshot's
(``tests/snapshots/compare-embedded-f32.json``). A meant change regenerates it in the same
commit (``python tests/test_prediction_snapshot.py``), where the diff shows what moved.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

SNAPSHOT = Path(__file__).with_name("snapshots") / "compare-embedded-f32.json"
STRATEGIES = (
    "retriever", "gold_first", "gold_last", "gold_alone", "random", "edge", "sandwich",
    "likelihood_selection", "convex_score", "convex_score_sandwich", "passage_likelihood",
    "passage_likelihood:placement=last", "select_and_place", "select_and_place:mass=0.99",
)  # fmt: skip
KEEP = ("strategy", "instance", "setting", "prompt_sha", "prediction", "correct", "info")
COST = ("prompt_tokens", "generated_tokens")


def predictions(model: Any, out: Path) -> list[dict[str, Any]]:
    """The snapshot's records: the run's predictions, less what varies (seconds)."""
    from rag_position.eval import run_compare

    run_compare(
        model, docs=5, questions=1, gold=("random",), strategies=list(STRATEGIES),
        max_new_tokens=12, out=str(out), workers=1, progress=False,
    )  # fmt: skip
    lines = (out / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
    found = [
        {**{k: r.get(k) for k in KEEP}, **{k: r["cost"][k] for k in COST}}
        for r in map(json.loads, lines)
    ]
    return sorted(found, key=lambda r: (r["strategy"], r["instance"], r["setting"]))


@pytest.mark.slow
def test_the_predictions_are_the_snapshot(embedded_fp32: Any, tmp_path: Path) -> None:
    want = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    got = predictions(embedded_fp32, tmp_path / "run")
    assert len(got) == len(want) == len(STRATEGIES)
    moved = [(w["strategy"], w["instance"]) for w, g in zip(want, got, strict=True) if w != g]
    assert not moved, f"predictions changed for {moved}: {SNAPSHOT} (see its test's docstring)"


if __name__ == "__main__":  # regenerate: python tests/test_prediction_snapshot.py
    import tempfile

    from rag_position.models import load_model

    with tempfile.TemporaryDirectory() as tmp:
        records = predictions(load_model("embedded", dtype="float32"), Path(tmp) / "run")
    SNAPSHOT.write_text(json.dumps(records, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{SNAPSHOT}: {len(records)} records", file=sys.stderr)
