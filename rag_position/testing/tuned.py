"""Tuned files for tests: a valid :class:`~rag_position.tuned.TunedChoice` whose fields a
test changes one at a time (the core's and both frameworks' tests of tuned files)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rag_position.tuned import TunedChoice


def example_choice(
    strategy: str = "passage_likelihood", options: dict[str, Any] | None = None, **changes: Any
) -> TunedChoice:
    """A choice of ``strategy`` with ``options`` for the embedded model, measured on 60
    questions, no profile, no evidence; ``changes`` replace any field.

    Example:
        >>> example_choice("edge").strategy, example_choice(dtype=None).dtype
        ('edge', None)
    """
    fields: dict[str, Any] = {
        "model": "named-model",
        "spec": "embedded",
        "dtype": "float32",
        "strategy": strategy,
        "options": options or {},
        "profile": None,
        "evidence": (),
        "questions": {"data": "multidoc.jsonl.gz", "first": 0, "n": 60},
        "command": "rag-position tune --model embedded",
        "created": "2026-05-09T07:35:25+00:00",
    }
    fields.update(changes)
    return TunedChoice(**fields)


def example_file(
    folder: str | os.PathLike[str],
    strategy: str = "passage_likelihood",
    options: dict[str, Any] | None = None,
    **changes: Any,
) -> Path:
    """:func:`example_choice` written as ``tuned.json`` in ``folder``; its path."""
    return example_choice(strategy, options, **changes).write(Path(folder) / "tuned.json")
