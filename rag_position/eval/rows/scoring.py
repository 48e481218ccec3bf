"""Scoring shared between rows: the prompts several rows score (:class:`SharedScoring`) and
the one-passage prompts open-domain scores once across k (:class:`PromptScores`), with
each one's share of the cost.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from rag_position.cost import Cost, record, spent_by, spent_or_sent
from rag_position.errors import BackendError


class SharedScoring:
    """A model whose ``score_spans`` answers a repeated request from memory.

    Strategies of one seed group (:func:`seed_name`) score the same prompts for
    the same instance; the eval computes them once. A replayed call is charged what
    the original call cost: ``usage`` is the model's own plus every replayed cost,
    so each strategy still reports what it would cost on its own. Everything else
    (``generate``, ``name``, ...) is the wrapped model's. The memory keeps the last
    ``size`` requests (one instance's, in practice).

    Example:
        >>> from rag_position.models.protocols import SpanScore
        >>> class Counting:
        ...     calls = 0
        ...     def score_spans(self, prompts, spans):
        ...         self.calls += 1
        ...         return [SpanScore(-1.0, -1.0, 1) for _ in prompts]
        >>> model = Counting()
        >>> shared = SharedScoring(model)
        >>> shared.score_spans(["a b"], [(2, 3)]) == shared.score_spans(["a b"], [(2, 3)])
        True
        >>> model.calls, shared.usage.lm_calls
        (1, 2)
    """

    def __init__(self, model: Any, size: int = 8) -> None:
        self._model = model
        self._size = size
        self._memo: dict[tuple[tuple[str, ...], tuple[Any, ...]], tuple[list[Any], Cost]] = {}
        self._extra = Cost()  # replayed calls, and computed ones of an unmetered model
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    @property
    def usage(self) -> Cost:
        own = getattr(self._model, "usage", None)
        return (own if isinstance(own, Cost) else Cost()) + self._extra

    def score_spans(self, prompts: Sequence[str], spans: Sequence[Any]) -> list[Any]:
        key = (tuple(prompts), tuple(tuple(s) for s in spans))
        with self._lock:
            hit = self._memo.get(key)
            if hit is not None:
                self._extra = self._extra + hit[1]
        if hit is not None:
            record(hit[1])
            return list(hit[0])
        start = time.perf_counter()
        with spent_by(self._model) as spend:
            results = list(self._model.score_spans(prompts, spans))
        cost = spent_or_sent(spend.cost, len(prompts), time.perf_counter() - start)
        if spend.cost is None:  # a model that keeps no usage: count it here
            with self._lock:
                self._extra = self._extra + cost
            record(cost)
        elif not spend.reported:  # a model of the caller's own: count it where we are
            record(cost)
        with self._lock:
            self._memo[key] = (results, cost)
            while len(self._memo) > self._size:
                del self._memo[next(iter(self._memo))]
        return list(results)


class PromptScores(SharedScoring):
    """A model whose ``score_spans`` computes each (prompt, span) once, whatever the request.

    Where :class:`SharedScoring` replays a whole repeated request, this replays single
    prompts: the open-domain reader scores the top 5, 10, 20... chunks of a question,
    and each larger k repeats the smaller one's one-chunk prompts. A computed prompt is
    charged its share of the call that computed it (one LM call, the call's tokens and
    seconds split by prompt length); a replayed one is charged that share again, so each
    strategy still reports what it would cost on its own. The memory keeps the ``size``
    prompts used last (a request larger than ``size`` still gets all its scores).

    Example:
        >>> from rag_position.models.protocols import SpanScore
        >>> class Counting:
        ...     sent = 0
        ...     def score_spans(self, prompts, spans):
        ...         self.sent += len(prompts)
        ...         return [SpanScore(-1.0, -1.0, 1) for _ in prompts]
        >>> model = Counting()
        >>> cached = PromptScores(model)
        >>> _ = cached.score_spans(["a b", "c d"], [(2, 3), (2, 3)])
        >>> _ = cached.score_spans(["a b", "c d", "e f"], [(2, 3), (2, 3), (2, 3)])
        >>> model.sent, cached.usage.lm_calls
        (3, 5)
    """

    def __init__(self, model: Any, size: int = 4096) -> None:
        super().__init__(model, size)
        self._prompts: dict[tuple[str, tuple[Any, ...]], tuple[Any, Cost]] = {}

    def score_spans(self, prompts: Sequence[str], spans: Sequence[Any]) -> list[Any]:
        keys = [(p, tuple(s)) for p, s in zip(prompts, spans, strict=True)]
        with self._lock:  # what this request reads: held here, whatever is dropped later
            have = {k: self._prompts[k] for k in keys if k in self._prompts}
        missing = list(dict.fromkeys(k for k in keys if k not in have))
        if missing:
            start = time.perf_counter()
            with spent_by(self._model) as spend:
                results = list(self._model.score_spans([k[0] for k in missing],
                                                       [k[1] for k in missing]))  # fmt: skip
            if len(results) != len(missing):
                raise BackendError(
                    f"the scorer returned {len(results)} scores for {len(missing)} prompts"
                )
            cost = spent_or_sent(spend.cost, len(missing), time.perf_counter() - start)
            if spend.cost is None:
                with self._lock:
                    self._extra = self._extra + cost
                record(cost)
            elif not spend.reported:
                record(cost)
            shares = cost_shares(cost, [len(k[0]) for k in missing])
            computed = dict(zip(missing, zip(results, shares, strict=True), strict=True))
        else:
            computed = {}
        fresh = set(missing)
        out = []
        replayed = Cost()
        with self._lock:
            for key in keys:
                found = computed[key] if key in computed else have[key]
                self._prompts.pop(key, None)
                self._prompts[key] = found  # the most recently used last
                result, share = found
                out.append(result)
                if key in fresh:
                    fresh.discard(key)  # computed now: already counted
                else:
                    replayed = replayed + share
            self._extra = self._extra + replayed
            while len(self._prompts) > self._size:  # only after this request has its scores
                del self._prompts[next(iter(self._prompts))]
        if replayed != Cost():
            record(replayed)
        return out


def cost_shares(cost: Cost, lengths: Sequence[int]) -> list[Cost]:
    """``cost`` split over prompts of these lengths: one LM call each, the tokens (whole,
    summing to the total) and seconds by length."""
    total = sum(lengths) or 1
    tokens = [cost.prompt_tokens * n // total for n in lengths]
    for i in range(cost.prompt_tokens - sum(tokens)):
        tokens[i % len(tokens)] += 1
    return [
        Cost(lm_calls=1, prompt_tokens=t, seconds=cost.seconds * n / total)
        for t, n in zip(tokens, lengths, strict=True)
    ]
