"""Result types and the helpers every ordering strategy shares.

A strategy never copies, drops, duplicates or mutates an item: ``result.passages``
holds the caller's own objects (``Passage``, ``str``, ``dict`` or anything
:func:`~rag_position.passages.as_passage` accepts), and ``result.order`` says where
each came from (``result.passages[i] is passages[result.order[i]]``).
"""

from __future__ import annotations

import math
import numbers
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import permutations
from typing import Any, Generic, TypeVar

from rag_position.cost import Cost, spent_by, spent_or_sent
from rag_position.errors import BackendError
from rag_position.models.protocols import Embedder, Scorer, Span, SpanScore
from rag_position.passages import Passage, as_passage, check_passage_texts, check_text

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class OrderingResult(Generic[T]):
    """A strategy's answer: the caller's passages in a new order, with what it cost.

    ``passages[i] is <input>[order[i]]``. What ``scores`` holds is said by each
    strategy (per input passage, or per candidate order). ``prompt`` is the prompt
    to answer with when the strategy prescribes one (the sandwich), else ``None``.

    Example:
        >>> from rag_position.strategies import edge_reorder
        >>> result = edge_reorder(["a", "b", "c"])
        >>> result.passages, result.order, result.cost.lm_calls
        (['a', 'c', 'b'], [0, 2, 1], 0)
    """

    passages: list[T]
    order: list[int]
    scores: list[float]
    cost: Cost
    prompt: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class AnswerResult:
    """What a strategy that answers by itself returns (FACT, recite-then-solve, medoid).

    ``answer`` is the final answer, ``cost`` what making it spent, ``trace`` how it
    was made (each strategy's own trace type). Subclasses add their own fields.

    Example::

        result = fact("Who wrote Hamlet?", docs, load_model("embedded"))
        result.answer, result.cost.lm_calls, result.trace.stopped_because
    """

    answer: str
    cost: Cost
    trace: Any


@dataclass(frozen=True, kw_only=True)
class GaugeResult:
    """Question likelihoods of one or many orders of the same passages.

    ``scores[i]`` is the mean log-likelihood of the question's tokens in
    ``prompts[i]``, the prompt of ``orders[i]``; ``spans[i]`` is the question's
    character span in it and ``span_scores[i]`` the scorer's full answer.

    Example::

        g = question_likelihood("Who wrote Hamlet?", docs, load_model("embedded"),
                                orders=[[0, 1], [1, 0]])
        g.scores[g.best], g.orders[g.best], g.span_scores[0].n_tokens, g.cost.lm_calls
    """

    scores: list[float]
    orders: list[list[int]]
    prompts: list[str]
    spans: list[Span]
    span_scores: list[SpanScore]
    cost: Cost

    @property
    def best(self) -> int | None:
        """Index of the most likely order (the first on ties), ``None`` when nothing was scored."""
        if not self.scores:
            return None
        return max(range(len(self.scores)), key=lambda i: (self.scores[i], -i))


def check_passages(passages: Sequence[T]) -> list[T]:
    """A private list of the caller's items (the input sequence is never touched)."""
    if isinstance(passages, (str, bytes, Mapping)):
        raise TypeError(
            "`passages` must be a sequence of passages, not a single "
            f"{type(passages).__name__}; wrap it in a list"
        )
    return list(passages)


def to_passages(items: Sequence[Any]) -> list[Passage]:
    """Text views of the items for rendering (a ``Passage`` is used as it is); each
    text and title must be valid Unicode (:func:`~rag_position.passages.check_text`)."""
    passages = [as_passage(x) for x in items]
    check_passage_texts(passages)
    return passages


def own_score(item: Any) -> float | None:
    """A passage's retriever score: ``Passage.score``, a mapping's ``"score"``, or ``.score``."""
    if isinstance(item, (Passage, str, Mapping)):
        return as_passage(item).score
    score = getattr(item, "score", None)
    return None if score is None else float(score)


NAN_HINT = "None for a missing score (or -inf to rank it last)"
"""What a NaN score's ``ValueError`` tells the caller to give instead."""


def refuse_nan(
    scores: Sequence[float | None], where: str, item: str = "passage", hint: str = NAN_HINT
) -> None:
    """``ValueError`` at the first NaN in ``scores``; ``where.format(i)`` names its item.

    A NaN compares false with every number, so a sort would put it (and the scores
    around it) anywhere: a caller's or a retriever's NaN is refused, never read as
    "no score" (``None`` is that). Infinities are numbers and pass.

    Example:
        >>> refuse_nan([0.3, float("nan")], "`scores[{}]`")
        Traceback (most recent call last):
        ...
        ValueError: `scores[1]` is NaN: give every passage a number; None for a missing score ...
    """
    for i, score in enumerate(scores):
        if score is not None and math.isnan(score):
            raise ValueError(f"{where.format(i)} is NaN: give every {item} a number; {hint}")


def given_scores(
    scores: Sequence[Any], n: int, *, missing: bool = False, hint: str = NAN_HINT
) -> list[float | None]:
    """A caller's ``scores``, checked: one per passage, each a real number (not a bool
    nor a string; ``None`` too where ``missing``), none NaN; as floats.

    Example:
        >>> given_scores([1, 0.5], 2)
        [1.0, 0.5]
        >>> given_scores(["0.1", 2.0], 2)
        Traceback (most recent call last):
        ...
        TypeError: `scores[0]` must be a number, got '0.1' (str)
    """
    if len(scores) != n:
        raise ValueError(f"got {len(scores)} scores for {n} passages")
    used: list[float | None] = []
    for i, score in enumerate(scores):
        if score is None and missing:
            used.append(None)
            continue
        if isinstance(score, bool) or not isinstance(score, numbers.Real):
            kind = type(score).__name__
            raise TypeError(f"`scores[{i}]` must be a number, got {score!r} ({kind})")
        used.append(float(score))
    refuse_nan(used, "`scores[{}]`", hint=hint)
    return used


def closest(embedder: Embedder, query: str, texts: Sequence[str]) -> list[int]:
    """The indices of ``texts``, closest to ``query`` first by cosine similarity (ties to the
    earlier text): one ``embed`` call of the query and the texts, or, where the embedder
    has ``embed_query`` (a model that embeds a question unlike a passage, as the
    frameworks' adapters say), the query through it and the texts through ``embed``. An
    array of the wrong shape, or a vector that is not finite, is a ``ValueError``.

    Example:
        >>> from rag_position.testing.scripted import ClosenessEmbedder
        >>> closest(ClosenessEmbedder([0.2, 0.9, 0.5]), "Who?", ["a", "b", "c"])
        [1, 2, 0]
    """
    import numpy as np

    embed_query = getattr(embedder, "embed_query", None)
    if callable(embed_query):
        asked = np.asarray(embed_query(query), dtype=np.float64).reshape(1, -1)
        rows = np.asarray(embedder.embed(list(texts)), dtype=np.float64)
        if rows.ndim != 2 or rows.shape[1] != asked.shape[1]:
            raise ValueError(
                f"the embedder returned an array of shape {rows.shape} for {len(texts)} texts, "
                f"and a query vector of {asked.shape[1]} values"
            )
        vectors = np.vstack([asked, rows])
    else:
        vectors = np.asarray(embedder.embed([query, *texts]), dtype=np.float64)
    if vectors.ndim != 2 or vectors.shape[0] != len(texts) + 1:
        raise ValueError(
            f"the embedder returned an array of shape {vectors.shape} for {len(texts) + 1} texts"
        )
    if not np.isfinite(vectors).all():
        raise ValueError("the embedder returned a vector that is not finite (NaN or inf)")
    norms = np.linalg.norm(vectors, axis=1)
    unit = vectors / np.where(norms == 0, 1.0, norms)[:, None]
    sims = unit[1:] @ unit[0]
    return sorted(range(len(texts)), key=lambda i: (-float(sims[i]), i))


def check_count(value: int | None, name: str) -> None:
    """``value`` must be ``None`` or an int >= 1."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"`{name}` must be an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"`{name}` must be >= 1, got {value}")


def check_fraction(value: object, name: str) -> None:
    """``value`` must be a number in (0, 1] (not a bool, not NaN)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value <= 1.0:
        raise ValueError(f"`{name}` must be a number in (0, 1], got {value!r}")


def check_question(question: object) -> None:
    if not isinstance(question, str):
        raise TypeError(f"`question` must be a str, got {type(question).__name__}")
    if not question.strip():
        raise ValueError(f"`question` must be a non-empty string, got {question!r}")
    check_text(question, "`question`")


def check_seed(seed: object) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"`seed` must be an int, got {type(seed).__name__}")
    return seed


def reordered(items: list[T], order: Sequence[int]) -> list[T]:
    return [items[i] for i in order]


def unchanged(items: list[T], **extra: Any) -> OrderingResult[T]:
    """The zero-cost answer for 0 or 1 passages."""
    return OrderingResult(
        passages=list(items), order=list(range(len(items))), scores=[], cost=Cost(), **extra
    )


def score_prompts(
    scorer: Scorer, prompts: list[str], spans: list[Span]
) -> tuple[list[SpanScore], Cost]:
    """One batched ``score_spans`` call and what it cost.

    The cost is that of the scorer's own calls when it keeps ``usage``
    (:func:`rag_position.cost.spent_by`: another thread's calls on a shared scorer
    do not count), else the prompts sent and the wall time
    (:func:`rag_position.cost.spent_or_sent`).
    """
    start = time.perf_counter()
    with spent_by(scorer) as spend:
        results = scorer.score_spans(prompts, spans)
    cost = spent_or_sent(spend.cost, len(prompts), time.perf_counter() - start)
    if len(results) != len(prompts):
        raise BackendError(f"the scorer returned {len(results)} scores for {len(prompts)} prompts")
    for i, result in enumerate(results):
        if not (math.isfinite(result.mean) and math.isfinite(result.sum)):
            # a NaN compares false with everything: it would win or lose an order silently
            raise BackendError(
                f"the scorer returned mean={result.mean}, sum={result.sum} for prompt {i}: "
                "not a finite number"
            )
    return list(results), cost


def distinct_orders(
    n: int, k: int, rng: random.Random, *, first: list[int] | None = None
) -> list[list[int]]:
    """``k`` distinct permutations of ``range(n)`` (all ``n!`` if there are fewer).

    ``first``, when given, is the first of them; the others are drawn from ``rng``.
    """
    total = math.factorial(n)
    k = min(k, total)
    chosen: list[list[int]] = [list(first)] if first is not None else []
    seen = {tuple(o) for o in chosen}
    if total <= 5040:  # n <= 7: enumerate, then draw without replacement
        pool = [list(p) for p in permutations(range(n)) if p not in seen]
        rng.shuffle(pool)
        return chosen + pool[: k - len(chosen)]
    while len(chosen) < k:
        o = list(range(n))
        rng.shuffle(o)
        if tuple(o) not in seen:
            seen.add(tuple(o))
            chosen.append(o)
    return chosen
