"""What a model call or a strategy spent: LM calls, tokens and seconds."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields


@dataclass(frozen=True)
class Cost:
    """Resources spent. ``lm_calls`` counts prompts sent to a model (a batch of 8 is 8 calls)."""

    lm_calls: int = 0
    prompt_tokens: int = 0
    generated_tokens: int = 0
    seconds: float = 0.0

    def __add__(self, other: Cost) -> Cost:
        return Cost(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def __sub__(self, other: Cost) -> Cost:
        return Cost(*(getattr(self, f.name) - getattr(other, f.name) for f in fields(self)))

    def as_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


class UsageMeter:
    """A thread-safe running total of :class:`Cost`, kept by every backend as ``.usage``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._total = Cost()

    @property
    def total(self) -> Cost:
        with self._lock:
            return self._total

    def add(self, cost: Cost) -> None:
        with self._lock:
            self._total = self._total + cost

    @contextmanager
    def timed(self, lm_calls: int, prompt_tokens: int) -> Iterator[list[int]]:
        """Record one batch: yields a one-item list the caller sets to the generated-token count."""
        generated = [0]
        start = time.perf_counter()
        try:
            yield generated
        finally:
            self.add(Cost(lm_calls, prompt_tokens, generated[0], time.perf_counter() - start))
