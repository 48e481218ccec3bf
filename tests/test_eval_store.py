"""The prediction file: joined shard files load, two differing answers to one key do not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_position.errors import DataFormatError
from rag_position.eval.engine.store import PredictionStore


def _row(instance: str, prediction: str, seconds: float) -> str:
    return json.dumps(
        {
            "task": "compare", "instance": instance, "setting": "s", "strategy": "edge",
            "model": "m", "prediction": prediction, "prompt_sha": "abc",
            "decoding": {"max_new_tokens": 8}, "cost": {"seconds": seconds},
        }
    ) + "\n"  # fmt: skip


def test_the_same_prediction_twice_loads_once(tmp_path: Path) -> None:
    """Shard folders that each resumed from one file, joined: every shared line twice."""
    path = tmp_path / "predictions.jsonl"
    path.write_text(
        _row("q:1", "Paris", 1.0) + _row("q:2", "Rome", 1.0) + _row("q:1", "Paris", 2.5)
    )
    store = PredictionStore(path)
    assert [r["instance"] for r in store.records()] == ["q:1", "q:2"]
    assert store.records()[0]["cost"] == {"seconds": 1.0}  # the first counts


def test_two_different_predictions_for_one_key_are_an_error(tmp_path: Path) -> None:
    path = tmp_path / "predictions.jsonl"
    path.write_text(_row("q:1", "Paris", 1.0) + _row("q:1", "Lyon", 1.0))
    with pytest.raises(DataFormatError, match=r"line 2: a second prediction for .*q:1.* differs"):
        PredictionStore(path)
