"""The three model operations everything in rag-position rests on, as small Protocols.

A backend object may satisfy several: ``load_model`` returns one object that is a
:class:`Generator` and, where the backend can score, a :class:`Scorer`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from rag_position.cost import Cost

Span = tuple[int, int]
"""A half-open character range ``(start, end)`` of a prompt, as the user wrote it."""


@dataclass(frozen=True)
class SpanScore:
    """Log-probability of the tokens covering a character span of a prompt.

    ``mean`` is ``sum / n_tokens``: the per-token log-likelihood used as the gauge.

    Example:
        >>> score = SpanScore(mean=-1.5, sum=-6.0, n_tokens=4)
        >>> score.mean == score.sum / score.n_tokens
        True
    """

    mean: float
    sum: float
    n_tokens: int


@runtime_checkable
class Generator(Protocol):
    """Generates text for a batch of prompts.

    Example:
        >>> class Echo:
        ...     def generate(self, prompts, *, max_new_tokens=100, temperature=0.0, seed=None,
        ...                  stop=None):
        ...         return [p.upper() for p in prompts]
        >>> isinstance(Echo(), Generator), Echo().generate(["paris"])
        (True, ['PARIS'])
    """

    def generate(
        self,
        prompts: Sequence[str],
        *,
        max_new_tokens: int = 100,
        temperature: float = 0.0,
        seed: int | None = None,
        stop: Sequence[str] | None = None,
    ) -> list[str]:
        """One completion per prompt. ``temperature == 0`` is greedy decoding."""
        ...


@runtime_checkable
class Scorer(Protocol):
    """Scores the log-likelihood of a character span of each prompt.

    Example:
        >>> class Flat:  # every token gets log-probability -1
        ...     def score_spans(self, prompts, spans):
        ...         return [SpanScore(-1.0, float(a - b), b - a) for a, b in spans]
        >>> isinstance(Flat(), Scorer), Flat().score_spans(["Who wrote Hamlet?"], [(4, 9)])
        (True, [SpanScore(mean=-1.0, sum=-5.0, n_tokens=5)])
    """

    def score_spans(self, prompts: Sequence[str], spans: Sequence[Span]) -> list[SpanScore]:
        """For prompt ``i``, the log-probability of the tokens covering ``spans[i]``."""
        ...


@runtime_checkable
class Embedder(Protocol):
    """Embeds texts as rows of an L2-normalised float32 matrix.

    An embedder may also have ``embed_query(text)``, one unit vector, for a model that embeds
    a question unlike a passage (instruction models such as E5 or BGE): the strategies that
    compare passages with the question (``similar=``, FACT) then use it for the question.
    The frameworks' adapters have it (LangChain's ``embed_query``, LlamaIndex's
    ``get_query_embedding``).

    Example:
        >>> class OneHot:
        ...     def embed(self, texts):
        ...         return np.eye(len(texts), 8, dtype=np.float32)
        >>> isinstance(OneHot(), Embedder), OneHot().embed(["a", "b"]).shape
        (True, (2, 8))
    """

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Shape ``(len(texts), dim)``; each row has unit norm."""
        ...


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens the way the model does (the eval uses it to fill token budgets).

    Example:
        >>> class Words:
        ...     def count_tokens(self, text):
        ...         return len(text.split())
        >>> isinstance(Words(), TokenCounter), Words().count_tokens("Who wrote Hamlet?")
        (True, 3)
    """

    def count_tokens(self, text: str) -> int:
        """Number of tokens of ``text`` without special tokens or chat template."""
        ...


@runtime_checkable
class Metered(Protocol):
    """A backend that keeps a running total of what it spent.

    Example:
        >>> class Spent:
        ...     usage = Cost(lm_calls=3, seconds=1.5)
        >>> isinstance(Spent(), Metered), Spent().usage.lm_calls
        (True, 3)
    """

    @property
    def usage(self) -> Cost:
        """Cumulative cost since the object was created."""
        ...


def check_span(prompt: str, span: Span, index: int) -> None:
    """``span`` must be a non-empty half-open character range inside ``prompt``.

    Example:
        >>> check_span("Question: why?", (10, 14), 0)
        >>> check_span("why?", (2, 2), 3)
        Traceback (most recent call last):
        ...
        ValueError: span (2, 2) of prompt 3 is empty (prompt has 4 characters; ...)
    """
    start, end = span
    if not 0 <= start < end <= len(prompt):
        what = "empty" if start >= end else "outside the prompt"
        raise ValueError(
            f"span {span} of prompt {index} is {what} (prompt has {len(prompt)} characters; "
            "a span is a non-empty half-open range (start, end) with 0 <= start < end <= len)"
        )


def check_generation(prompts: Sequence[str], max_new_tokens: int, temperature: float) -> None:
    """The checks every ``Generator.generate`` makes on its arguments."""
    if isinstance(prompts, str):
        raise TypeError("`prompts` must be a sequence of strings, not a single str")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")


def cut_at_stop(text: str, stop: Sequence[str] | None) -> str:
    """``text`` up to the first occurrence of any of ``stop`` (empty strings ignored).

    Example:
        >>> cut_at_stop("Paris. Question: next", ["Question:", "Answer:"])
        'Paris. '
        >>> cut_at_stop("Paris.", None)
        'Paris.'
    """
    if not stop:
        return text
    cut = min((i for i in (text.find(s) for s in stop if s) if i >= 0), default=len(text))
    return text[:cut]
