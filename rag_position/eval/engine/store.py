"""The prediction file: one JSON object a line, appended and flushed as predictions come.

Each record holds its key (task, model, strategy, instance, setting), the decoding
settings, the prediction, whether it is correct, what it cost and the task's own
fields. A run reads the file first and skips every key it holds, so a run killed at
any moment and started again recomputes nothing it already has. A line cut short by
a kill (the last one) is dropped and the file truncated back to the last whole line.

One process writes a file at a time: two concurrent runs into one folder are not
supported.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rag_position.errors import DataFormatError
from rag_position.eval.engine.common import Decoding, EvalConfigError, Key

logger = logging.getLogger(__name__)

PREDICTIONS_FILE = "predictions.jsonl"
KEY_FIELDS = ("task", "model", "strategy", "instance", "setting")


class PredictionStore:
    """Append-only JSONL of predictions keyed by :class:`Key`.

    Example::

        store = PredictionStore("runs/quick/predictions.jsonl")
        store.get(key)  # the stored record, or None
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._records: dict[str, dict[str, Any]] = {}
        self._by_prompt: dict[tuple[str, str, str], dict[str, Any]] = {}
        if self.path.exists():
            self._load()

    def __len__(self) -> int:
        return len(self._records)

    def __contains__(self, key: Key) -> bool:
        return key.as_str() in self._records

    def get(self, key: Key) -> dict[str, Any] | None:
        """The stored record for ``key``, or ``None``."""
        return self._records.get(key.as_str())

    def check_decoding(self, key: Key, decoding: Decoding) -> None:
        """Refuse to reuse a record made with other decoding settings (say what to do)."""
        record = self.get(key)
        if record is not None and record.get("decoding") != decoding.as_dict():
            raise EvalConfigError(
                f"{self.path} already holds a prediction for {key.as_str()} made with "
                f"{record.get('decoding')}, not {decoding.as_dict()}; use the same settings "
                "to resume, or another output folder"
            )

    def by_prompt(self, model: str, prompt_sha: str, decoding: Decoding) -> dict[str, Any] | None:
        """A stored record of the same model, prompt and decoding, whatever its key."""
        return self._by_prompt.get((model, prompt_sha, _decoding_id(decoding.as_dict())))

    def append(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Write ``records`` at the end of the file, flushed and synced before returning."""
        lines = []
        for record in records:
            row = dict(record)
            missing = [f for f in KEY_FIELDS if not isinstance(row.get(f), str)]
            if missing:
                raise ValueError(f"a prediction record needs string fields {missing}")
            lines.append(json.dumps(row, ensure_ascii=False) + "\n")
            self._remember(row)
        if not lines:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as fout:
            fout.write("".join(lines))
            fout.flush()
            os.fsync(fout.fileno())

    def records(self) -> list[dict[str, Any]]:
        """Every stored record, in file order."""
        return list(self._records.values())

    # --- internals -----------------------------------------------------------------

    def _remember(self, row: dict[str, Any]) -> None:
        key = Key(*(row[f] for f in KEY_FIELDS))
        self._records[key.as_str()] = row
        sha = row.get("prompt_sha")
        if isinstance(sha, str):
            decoding = _decoding_id(row.get("decoding"))
            self._by_prompt.setdefault((row["model"], sha, decoding), row)

    def _load(self) -> None:
        data = self.path.read_bytes()
        end = data.rfind(b"\n") + 1
        if end < len(data):
            logger.warning(
                "%s: dropping an incomplete last line (%d bytes) left by an interrupted run",
                self.path,
                len(data) - end,
            )
            with open(self.path, "r+b") as fout:
                fout.truncate(end)
            data = data[:end]
        for number, raw in enumerate(data.decode("utf-8").splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                row = json.loads(raw)
            except (ValueError, RecursionError) as exc:  # a huge integer, deep nesting
                why = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
                raise DataFormatError(
                    f"{self.path}: line {number}: not valid JSON ({why}); is this a "
                    "predictions file of rag-position eval?"
                ) from None
            if not isinstance(row, dict):
                raise DataFormatError(f"{self.path}: line {number}: expected a JSON object")
            for name in KEY_FIELDS:
                if not isinstance(row.get(name), str):
                    raise DataFormatError(f"{self.path}: line {number}: missing field '{name}'")
            key = Key(*(row[f] for f in KEY_FIELDS)).as_str()
            first = self._records.get(key)
            if first is not None:
                if _answer(first) != _answer(row):
                    raise DataFormatError(
                        f"{self.path}: line {number}: a second prediction for {key} that "
                        "differs from the first (prediction, prompt or decoding); were two "
                        "runs' files joined? keep one of the two lines"
                    )
                continue  # the same prediction again (shard files joined): the first counts
            self._remember(row)


def _answer(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """What makes two records of one key the same prediction (their costs may differ)."""
    return (row.get("prediction"), row.get("prompt_sha"), _decoding_id(row.get("decoding")))


def _decoding_id(decoding: Any) -> str:
    return json.dumps(decoding, sort_keys=True)
