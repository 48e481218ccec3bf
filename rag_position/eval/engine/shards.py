"""Splitting a run by question: ``--shard K/N`` parsed and checked."""

from __future__ import annotations

from rag_position.eval.engine.common import (
    EvalConfigError,
)


def check_shard(shard: tuple[int, int] | None) -> tuple[int, int] | None:
    """``shard`` checked: None, or ``(k, n)`` with ``1 <= k <= n``."""
    if shard is None:
        return None
    k, n = shard
    if not (isinstance(k, int) and isinstance(n, int) and 1 <= k <= n):
        raise EvalConfigError(f"shard must be k/n with 1 <= k <= n, got {k}/{n}")
    return (k, n)


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/4"`` -> ``(2, 4)``; a clear error for anything else."""
    parts = text.split("/")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise EvalConfigError(f"--shard takes k/n (e.g. 1/2), got {text!r}")
    shard = check_shard((int(parts[0]), int(parts[1])))
    assert shard is not None
    return shard
