"""Scripted scorers for tests of the reorderers (core and both frameworks): for tests only.

The project's rule: fast unit tests may script a Scorer to pin an algorithm's logic;
the same reorderers also run on the embedded model elsewhere.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Sequence
from typing import TypeVar

from rag_position.errors import BackendError
from rag_position.models.protocols import Span, SpanScore

T = TypeVar("T")


class HashScorer:
    """Deterministic pseudo-random likelihoods from the prompt text (orders differ)."""

    def __init__(self) -> None:
        self.calls = 0
        self.nonfinite = False  # whether it ever answered NaN or an infinity

    def score_spans(self, prompts: Sequence[str], spans: Sequence[Span]) -> list[SpanScore]:
        self.calls += 1
        out = []
        for prompt, (start, end) in zip(prompts, spans, strict=True):
            assert 0 <= start < end <= len(prompt)
            value = -(zlib.crc32(prompt.encode("utf-8", "surrogatepass")) % 10_000) / 1000
            out.append(SpanScore(value, value * (end - start), end - start))
        return out


class ScriptedScorer(HashScorer):
    """Answers ``values`` in turn, cycling (NaN, infinities, ties: whatever is scripted)."""

    def __init__(self, values: Sequence[float]) -> None:
        super().__init__()
        self.values = list(values)
        self.at = 0

    def score_spans(self, prompts: Sequence[str], spans: Sequence[Span]) -> list[SpanScore]:
        self.calls += 1
        out = []
        for _ in prompts:
            value = self.values[self.at % len(self.values)]
            self.at += 1
            self.nonfinite |= not math.isfinite(value)
            out.append(SpanScore(value, value, 1))
        return out


def tolerating_nonfinite(scorer: HashScorer, call: Callable[[], T]) -> T | None:
    """``call()``; ``None`` when it refused the scorer's NaN/inf with a ``BackendError``.

    Every strategy refuses a non-finite score with a clear error naming it (a NaN
    compares false with everything and would win or lose an order silently), and
    only then; either way the inputs stay unchanged and, if it answers, the output is
    a permutation (checked by the caller).
    """
    try:
        result = call()
    except BackendError as error:
        assert scorer.nonfinite, f"a BackendError though every score was finite: {error}"
        assert "not a finite number" in str(error), error
        return None
    assert not scorer.nonfinite, "a non-finite score was used instead of refused"
    return result


__all__ = ["HashScorer", "ScriptedScorer", "tolerating_nonfinite"]
