"""Scripted scorers (and an embedder) for tests of the reorderers (core and both
frameworks): for tests only.

The project's rule: fast unit tests may script a Scorer to pin an algorithm's logic;
the same reorderers also run on the embedded model elsewhere.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

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


__all__ = ["ClosenessEmbedder", "HashScorer", "ScriptedScorer", "tolerating_nonfinite"]


class OnePassageScorer:
    """A scorer of one-passage prompts (passage likelihood, select-and-place): each prompt
    must hold exactly one of the known texts, and the scored span must be ``question``.

    ``totals[text]`` is the question's summed log-likelihood after that text alone, over
    ``n_tokens`` question tokens (the mean is ``total / n_tokens``). ``calls`` records the
    prompts of each ``score_spans`` call.

    Example:
        >>> scorer = OnePassageScorer("Who?", {"Ann did.": -1.0, "Bob.": -3.0}, n_tokens=2)
        >>> prompt = "Ann did.\\nQuestion: Who?"
        >>> scorer.score_spans([prompt], [(prompt.index("Who"), len(prompt))])[0].mean
        -0.5
    """

    def __init__(self, question: str, totals: Mapping[str, float], n_tokens: int = 1) -> None:
        self.question = question
        self.totals = dict(totals)
        self.n_tokens = n_tokens
        self.calls: list[list[str]] = []

    def score_spans(self, prompts: Sequence[str], spans: Sequence[Any]) -> list[SpanScore]:
        self.calls.append(list(prompts))
        out = []
        for prompt, (start, end) in zip(prompts, spans, strict=True):
            assert prompt[start:end].strip() == self.question, prompt[start:end]
            found = [text for text in self.totals if text in prompt]
            assert len(found) == 1, f"a prompt with {len(found)} of the known texts"
            total = self.totals[found[0]]
            out.append(SpanScore(total / self.n_tokens, total, self.n_tokens))
        return out


class ClosenessEmbedder:
    """An embedder of a question and its passages: unit rows in the plane, the question along
    the first axis and passage ``i`` at cosine ``closeness[i]`` to it (``rows`` cuts the
    array short, to test a caller's checks). ``calls`` records the texts of each call.

    Example:
        >>> ClosenessEmbedder([1.0, 0.0]).embed(["Who?", "Ann did.", "Bob."]).tolist()
        [[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]
    """

    def __init__(self, closeness: Sequence[float], rows: int | None = None) -> None:
        self.closeness, self.rows = list(closeness), rows
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> Any:
        import numpy as np

        self.calls.append(list(texts))
        vectors = [[1.0, 0.0]] + [[c, math.sqrt(1 - c * c)] for c in self.closeness]
        return np.asarray(vectors[: self.rows or len(vectors)], dtype=np.float32)
