"""What the synthetic long-context tasks (``multifact``, ``length``) share: filler text,
token counting, a per-call cost log, and the sizes that fit the model's window."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from rag_position.cost import Cost
from rag_position.data import load_qa
from rag_position.eval.common import EvalConfigError
from rag_position.eval.datasets import default_oracle_path

FILLER_PASSAGES = 2000
"""How many gold passages of the packaged NQ file feed the essay-like filler."""


def essay_filler(path: Any = None, *, limit: int = FILLER_PASSAGES) -> list[str]:
    """Essay-like filler: the Wikipedia passages of the packaged NQ oracle file."""
    records = load_qa(path or default_oracle_path(), limit=limit)
    return [p.text for r in records for p in r.passages]


def token_counter(model: Any) -> Callable[[str], int] | None:
    """The model's ``count_tokens`` when it has one."""
    counter = getattr(model, "count_tokens", None)
    return counter if callable(counter) else None


def check_fits(model: Any, tokens: Sequence[int], reserve: int, *, option: str) -> None:
    """Every size plus ``reserve`` tokens (prompt text, answer) must fit the model's window."""
    window = getattr(model, "max_context", None)
    if not isinstance(window, int):
        return
    too_big = [t for t in tokens if t + reserve > window]
    if too_big:
        raise EvalConfigError(
            f"{option}: {too_big} tokens plus about {reserve} for the prompt and the answer "
            f"exceed the model's context window of {window} tokens"
        )


class CallLog:
    """Wraps a generator and keeps the cost of each ``generate`` call, in order.

    Lets a task charge "FACT with at most i iterations" the cost of its first i calls.
    """

    def __init__(self, model: Any) -> None:
        self.model = model
        self.calls: list[Cost] = []
        self._count = token_counter(model)

    def generate(self, prompts: Sequence[str], **kwargs: Any) -> list[str]:
        start = time.perf_counter()
        texts: list[str] = self.model.generate(prompts, **kwargs)
        seconds = time.perf_counter() - start
        count = self._count
        self.calls.append(
            Cost(
                len(prompts),
                sum(count(p) for p in prompts) if count else 0,
                sum(count(t) for t in texts if t) if count else 0,
                seconds,
            )
        )
        return texts

    def cost(self, calls: int | None = None) -> Cost:
        """The cost of the first ``calls`` calls (all when ``None``)."""
        total = Cost()
        for cost in self.calls[:calls]:
            total = total + cost
        return total
