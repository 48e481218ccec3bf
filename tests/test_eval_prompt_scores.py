"""Open-domain's per-prompt score memory (``PromptScores``) past its size.

A 200-question open-domain run with selection stopped with a ``KeyError`` after about
4,000 one-chunk prompts: a request whose older prompts were dropped by its own newly
computed ones found them gone. Each request now reads what it holds before anything
is dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rag_position.eval.rows.scoring import PromptScores
from rag_position.models.protocols import SpanScore


class Counting:
    """Scores a prompt by its length; remembers what it was sent."""

    def __init__(self) -> None:
        self.sent: list[list[str]] = []

    def score_spans(self, prompts: Sequence[str], spans: Sequence[Any]) -> list[SpanScore]:
        self.sent.append(list(prompts))
        return [SpanScore(-float(len(p)), -1.0, 1) for p in prompts]


def _scores(cached: PromptScores, prompts: list[str]) -> list[float]:
    return [s.mean for s in cached.score_spans(prompts, [(0, 1)] * len(prompts))]


def test_a_request_keeps_its_older_prompts_when_new_ones_overflow_the_memory() -> None:
    model = Counting()
    cached = PromptScores(model, size=2)
    assert _scores(cached, ["a", "bb"]) == [-1.0, -2.0]
    # "a" and "bb" are held; two new prompts push the memory past 2 within this request
    assert _scores(cached, ["a", "ccc", "dddd", "bb"]) == [-1.0, -3.0, -4.0, -2.0]
    assert model.sent == [["a", "bb"], ["ccc", "dddd"]]  # the held ones not sent again
    assert len(cached._prompts) == 2


def test_a_request_larger_than_the_memory_gets_every_score() -> None:
    model = Counting()
    cached = PromptScores(model, size=3)
    prompts = [c * (i + 1) for i, c in enumerate("abcdefgh")]
    assert _scores(cached, prompts) == [-float(len(p)) for p in prompts]
    assert _scores(cached, prompts[-3:]) == [-6.0, -7.0, -8.0]
    assert model.sent == [prompts]  # the last three used were kept


def test_the_memory_drops_the_least_recently_used() -> None:
    model = Counting()
    cached = PromptScores(model, size=2)
    _scores(cached, ["a", "b"])
    _scores(cached, ["a"])  # "a" used last
    _scores(cached, ["c"])  # drops "b"
    _scores(cached, ["a", "b"])
    assert model.sent == [["a", "b"], ["c"], ["b"]]
