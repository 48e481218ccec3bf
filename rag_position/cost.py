"""What a model call or a strategy spent: LM calls, tokens and seconds."""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


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


class Tally:
    """The cost of the model calls made inside one :func:`metered` block.

    Thread-safe: calls that a backend spreads over worker threads add here too.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._total = Cost()
        self.records = 0

    @property
    def total(self) -> Cost:
        """What the calls made in the block (so far) cost."""
        with self._lock:
            return self._total

    def add(self, cost: Cost) -> None:
        with self._lock:
            self._total = self._total + cost
            self.records += 1


_TALLIES: contextvars.ContextVar[tuple[Tally, ...]] = contextvars.ContextVar(
    "rag_position_tallies", default=()
)


@contextmanager
def metered() -> Iterator[Tally]:
    """Count what the model calls made inside the block cost, and nothing else.

    Every backend reports each call it makes (:func:`record`); a call counts in
    every ``metered`` block open in the context that made it. Another thread's
    calls on the same model do not count, so the figure is right under concurrency
    (a backend's own worker threads run in a copy of the caller's context:
    :func:`in_context`). Blocks nest.

    Example:
        >>> with metered() as outer:
        ...     record(Cost(lm_calls=1, prompt_tokens=10))
        ...     with metered() as inner:
        ...         record(Cost(lm_calls=2))
        >>> outer.total.lm_calls, inner.total.lm_calls, outer.total.prompt_tokens
        (3, 2, 10)
        >>> record(Cost(lm_calls=5))  # outside any block: counted nowhere
        >>> outer.total.lm_calls
        3
    """
    tally = Tally()
    token = _TALLIES.set((*_TALLIES.get(), tally))
    try:
        yield tally
    finally:
        _TALLIES.reset(token)


class Spend:
    """What :func:`spent_by` measured: ``cost`` is set when the block ends; ``reported``
    says whether it came from reported calls (else from the model's ``usage`` change)."""

    def __init__(self) -> None:
        self.cost: Cost | None = None
        self.reported = False


@contextmanager
def spent_by(model: object) -> Iterator[Spend]:
    """The cost of the model calls made inside the block (on ``model``, or on any model
    it calls in turn), when it can be known.

    Our backends report every call (:func:`record`), so the figure is exact under
    concurrency, and it is the calls the block made, whichever backend made them. When
    nothing in the block reports a call, a ``model`` of the caller's own that keeps a
    ``usage`` total is measured by the change of that total (which counts other
    threads' calls too). ``spend.cost`` stays ``None`` for a model that keeps no
    ``usage``: the caller counts what it can (:func:`spent_or_sent`).

    Example:
        >>> class Counting:
        ...     usage = Cost()
        ...     def generate(self, prompts):
        ...         self.usage = self.usage + Cost(lm_calls=len(prompts))
        ...         return prompts
        >>> model = Counting()
        >>> with spent_by(model) as spend:
        ...     _ = model.generate(["a", "b"])
        >>> spend.cost.lm_calls
        2
    """
    spend = Spend()
    before = getattr(model, "usage", None)
    with metered() as tally:
        try:
            yield spend
        finally:
            after = getattr(model, "usage", None)
            if tally.records:
                spend.cost, spend.reported = tally.total, True
            elif isinstance(before, Cost) and isinstance(after, Cost):
                spend.cost = after - before


def spent_or_sent(spent: Cost | None, prompts: int, seconds: float) -> Cost:
    """What some model calls cost: ``spent`` when it is known (a meter counted the calls,
    :func:`spent_by`), else what any caller can count: the ``prompts`` sent and the
    wall-clock ``seconds`` they took.

    Example:
        >>> spent_or_sent(None, 2, 0.5)
        Cost(lm_calls=2, prompt_tokens=0, generated_tokens=0, seconds=0.5)
        >>> spent_or_sent(Cost(lm_calls=1, prompt_tokens=9), 2, 0.5).prompt_tokens
        9
    """
    if spent is not None:
        return spent
    return Cost(lm_calls=prompts, seconds=seconds)


def record(cost: Cost) -> None:
    """Add one call's own cost to every :func:`metered` block open in this context."""
    for tally in _TALLIES.get():
        tally.add(cost)


def in_context(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` bound to a copy of the current context: submit it to a worker thread so
    that the calls it makes count in the caller's :func:`metered` blocks."""
    context = contextvars.copy_context()

    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        return context.copy().run(fn, *args, **kwargs)

    return run


class UsageMeter(Tally):
    """A thread-safe running total of :class:`Cost`, kept by every backend as ``.usage``.

    Each :meth:`add` is also :func:`record`-ed, so it counts in the caller's
    :func:`metered` blocks.
    """

    def add(self, cost: Cost) -> None:
        super().add(cost)
        record(cost)

    @contextmanager
    def timed(self, lm_calls: int, prompt_tokens: int) -> Iterator[list[int]]:
        """Record one batch: yields a one-item list the caller sets to the generated-token count."""
        generated = [0]
        start = time.perf_counter()
        try:
            yield generated
        finally:
            self.add(Cost(lm_calls, prompt_tokens, generated[0], time.perf_counter() - start))
