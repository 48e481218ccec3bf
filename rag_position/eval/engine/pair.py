"""A scorer in front of a reader: the strategies score with one model, answers come from another.

This is how users run selection: a small local model scores the passages
(``SelectAndPlace(scorer=...)``) in front of their own, larger reader behind vLLM or an
API. ``--scorer SPEC`` on ``eval compare``, ``open-domain``, ``multifact`` and ``tune``
builds a :class:`ReaderScorer`: every strategy's ``score_spans`` goes to the scorer,
every ``generate`` (the answer, and a strategy's own generation such as FACT's) to the
reader. What the scorer spent while a job was prepared is counted apart
(:func:`scorer_metered`), so a report splits each question's cost into the scorer's and
the reader's.

A strategy that runs the scorer by other means (LongLLMLingua's forward pass, an LLM
reranker's generation) finds it with :func:`scoring_model` and reports what it spent
with :func:`charge_scorer`.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from rag_position.cost import Cost, Tally, metered

_SCORER_TALLIES: contextvars.ContextVar[tuple[Tally, ...]] = contextvars.ContextVar(
    "rag_position_scorer_tallies", default=()
)


@contextmanager
def scorer_metered() -> Iterator[Tally]:
    """Count what the scorer spent inside the block (calls made through :class:`ReaderScorer`
    and those charged with :func:`charge_scorer`).

    Example:
        >>> with scorer_metered() as tally:
        ...     charge_scorer(Cost(lm_calls=2, prompt_tokens=30))
        >>> tally.total.prompt_tokens
        30
    """
    tally = Tally()
    token = _SCORER_TALLIES.set((*_SCORER_TALLIES.get(), tally))
    try:
        yield tally
    finally:
        _SCORER_TALLIES.reset(token)


def charge_scorer(cost: Cost) -> None:
    """Count ``cost`` as the scorer's in every open :func:`scorer_metered` block."""
    for tally in _SCORER_TALLIES.get():
        tally.add(cost)


class ReaderScorer:
    """The reader, whose ``score_spans`` is the scorer's.

    Everything but ``score_spans`` (``generate``, ``name``, ``count_tokens``, ...) is the
    reader's; ``scoring_model`` is the scorer. Each scoring call is metered and charged
    to the scorer (:func:`charge_scorer`) as well as counted as usual.

    Example:
        >>> from rag_position.models.protocols import SpanScore
        >>> class Scorer:
        ...     name = "small"
        ...     def score_spans(self, prompts, spans):
        ...         from rag_position.cost import record
        ...         record(Cost(lm_calls=len(prompts), prompt_tokens=5))
        ...         return [SpanScore(-1.0, -1.0, 1) for _ in prompts]
        >>> class Reader:
        ...     name = "large"
        >>> pair = ReaderScorer(Reader(), Scorer())
        >>> with scorer_metered() as tally:
        ...     _ = pair.score_spans(["a b"], [(2, 3)])
        >>> pair.name, scoring_model(pair).name, tally.total.lm_calls
        ('large', 'small', 1)
    """

    def __init__(self, reader: Any, scorer: Any) -> None:
        self._reader = reader
        self.scoring_model = scorer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reader, name)

    def score_spans(self, prompts: Sequence[str], spans: Sequence[Any]) -> list[Any]:
        with metered() as tally:
            results = list(self.scoring_model.score_spans(prompts, spans))
        charge_scorer(tally.total)
        return results


def scoring_model(model: Any) -> Any:
    """The model a strategy scores with: a :class:`ReaderScorer`'s scorer, else ``model``."""
    return model.scoring_model if isinstance(model, ReaderScorer) else model


__all__ = ["ReaderScorer", "charge_scorer", "scorer_metered", "scoring_model"]
