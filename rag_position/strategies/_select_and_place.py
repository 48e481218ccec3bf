"""Select, then place: keep the passages the question trusts, put them where the model reads.

Placement alone has a ceiling: with every passage in the prompt, the embedded model
answers at best as well as with the gold passage last, while it answers far more
questions from the gold passage alone. The distractors cost more than the position.
:func:`select_and_place` scores each passage alone by the question's likelihood
(:func:`~rag_position.strategies.passage_likelihood`'s N one-passage prompts), keeps
the most likely ones and places them. What it keeps, by rule:

- ``mass``: the fewest top passages whose share of the posterior reaches ``mass``.
  The posterior is ``p(passage | question)`` under a uniform prior, the softmax of
  each passage's total question log-likelihood: sure rankings keep one passage,
  unsure ones keep more.
- ``top_n``: at most this many (a reranker's ``top_n``).
- ``similar``: besides, the ``similar`` passages closest to the question by an
  ``embedder`` (cosine similarity), whatever their likelihood: the likelihood's choice
  united with an embedding filter's top ``similar``. The two miss the gold passage on
  different questions (docs/measurements.md, "A small scorer in front of your reader").

``mass`` and ``top_n`` may both be given (the smaller set wins); at least one passage is
always kept. The idea of dropping whole documents by the question's likelihood is
LongLLMLingua's coarse compression (Jiang et al., ACL 2024), which keeps documents under a token
budget; here the rule comes from the scores, and what is kept is placed where the
model reads best. It is for questions one passage answers: a question that needs
several passages should use a reorderer, or a ``mass`` near 1 (docs/measurements.md,
"Measured: selection").
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Annotated, Any, TypeVar

from rag_position.cost import Cost
from rag_position.models.protocols import Embedder, Scorer
from rag_position.passages import embedding_text
from rag_position.strategies._base import (
    OrderingResult,
    check_passages,
    check_question,
    closest,
    reordered,
    to_passages,
)
from rag_position.strategies._options import LOOSE, PROFILE_DOC, TEMPLATE_DOC, opt
from rag_position.strategies._passage_likelihood import score_alone
from rag_position.strategies._question_likelihood import check_template
from rag_position.strategies.profiles import Placement, ProfileLike, check_placement, place

T = TypeVar("T")

DEFAULT_MASS = 0.9
"""The default share of the posterior kept (docs/measurements.md, "Measured: selection")."""


MASS_DOC = "Keep the fewest most likely passages holding this share of the posterior."
SIMILAR_DOC = (
    "Also keep this many passages closest to the question by the embedder (cosine), "
    "whatever their likelihood."
)


def posterior(log_likelihoods: Sequence[float]) -> list[float]:
    """The softmax of total log-likelihoods: ``p(passage | question)`` under a uniform prior.

    Example:
        >>> [round(p, 3) for p in posterior([-10.0, -10.0, -12.0])]
        [0.468, 0.468, 0.063]
    """
    top = max(log_likelihoods)
    weights = [math.exp(x - top) for x in log_likelihoods]
    total = sum(weights)
    return [w / total for w in weights]


def kept_count(
    shares: Sequence[float], ranked: Sequence[int], mass: float | None, top_n: int | None
) -> int:
    """How many of ``ranked`` (most likely first) the rules keep: at least one.

    Example:
        >>> kept_count([0.6, 0.3, 0.1], [0, 1, 2], mass=0.8, top_n=None)
        2
        >>> kept_count([0.6, 0.3, 0.1], [0, 1, 2], mass=0.8, top_n=1)
        1
    """
    n = len(ranked)
    keep = n
    if mass is not None:
        total, keep = 0.0, 0
        for i in ranked:
            total += shares[i]
            keep += 1
            if total >= mass - 1e-12:
                break
    if top_n is not None:
        keep = min(keep, top_n)
    return max(1, keep)


def select_and_place(
    question: str,
    passages: Sequence[T],
    scorer: Scorer,
    *,
    mass: Annotated[float | None, opt(MASS_DOC, gt=0, le=1)] = DEFAULT_MASS,
    top_n: Annotated[int | None, opt("Keep at most this many passages.", ge=1)] = None,
    placement: Annotated[
        Placement, opt("Where the most likely kept passage goes: 'first', 'last' or 'profile'.")
    ] = "last",
    profile: Annotated[ProfileLike | None, opt(PROFILE_DOC), LOOSE] = None,
    template: Annotated[str | None, opt(TEMPLATE_DOC)] = None,
    similar: Annotated[int, opt(SIMILAR_DOC, ge=0)] = 0,
    embedder: Embedder | None = None,
) -> OrderingResult[T]:
    """Keep the passages most likely to answer the question (by ``mass`` and ``top_n``); place them.

    Each passage is scored alone (N one-passage prompts in ONE ``score_spans``
    call; the scored span is the question, as in
    :func:`~rag_position.strategies.passage_likelihood`). The kept passages, most
    likely first, go ``"last"`` (default: the most likely next to the question, the
    others before it by falling score), ``"first"`` (the reverse), or ``"profile"``
    (down the ``profile`` interpolated to the number kept). ``result.passages``
    holds the kept ones only: ``result.order`` their input indices, and
    ``details["dropped"]`` the indices of the others, most likely first.
    ``result.scores``: each input passage's mean log-likelihood;
    ``details["posterior"]``: each one's share of the posterior;
    ``details["ranked"]``: every input index, most likely first; ``details["gold"]``:
    the most likely passage. ``similar=k`` (with an ``embedder``) keeps the ``k`` passages
    closest to the question as well (``details["similar"]``, closest first; the passage's
    title and text are embedded, as :func:`~rag_position.passages.embedding_text`); the
    kept passages are still ranked and placed by likelihood, and the embedding time is in
    ``result.cost.seconds``. Ties go to the earlier passage. 0 or 1 passages:
    returned as they are at zero cost. ``mass=None, top_n=None`` keeps every
    passage (:func:`~rag_position.strategies.passage_likelihood` with ``rest="scores"``).

    Example:
        >>> r = select_and_place("Who wrote Hamlet?", docs, model)  # N short prompts
        >>> r.passages[-1] is docs[r.details["gold"]], len(r.passages) + len(r.details["dropped"])
        (True, 10)
    """
    check_question(question)
    check_template(template, False)
    prof = check_placement(placement, None, profile)
    if mass is not None and (
        isinstance(mass, bool) or not (isinstance(mass, (int, float)) and 0 < mass <= 1)
    ):
        raise ValueError(f"`mass` must be a number in (0, 1], or None; got {mass!r}")
    if top_n is not None and (isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1):
        raise ValueError(f"`top_n` must be an int >= 1, or None; got {top_n!r}")
    if isinstance(similar, bool) or not isinstance(similar, int) or similar < 0:
        raise ValueError(f"`similar` must be an int >= 0; got {similar!r}")
    if similar and embedder is None:
        raise ValueError("`similar` needs an embedder: pass embedder= (e.g. load_embedder)")
    items = check_passages(passages)
    n = len(items)
    if n < 2:
        details: dict[str, Any] = {
            "gold": 0 if n else None,
            "dropped": [],
            "ranked": list(range(n)),
            "posterior": [1.0] * n,
            "similar": [],
        }
        return OrderingResult(
            passages=items, order=list(range(n)), scores=[], cost=Cost(), details=details
        )
    close: list[int] = []
    seconds = 0.0
    if similar and embedder is not None:  # first: a bad embedder fails before any scoring
        start = time.perf_counter()
        texts = [embedding_text(p) for p in to_passages(items)]
        close = closest(embedder, question, texts)[:similar]
        seconds = time.perf_counter() - start
    span_scores, cost = score_alone(question, items, scorer, template)
    cost = cost + Cost(seconds=seconds) if seconds else cost
    scores = [s.mean for s in span_scores]
    shares = posterior([s.sum for s in span_scores])
    ranked = sorted(range(n), key=lambda d: (-scores[d], d))
    chosen = set(ranked[: kept_count(shares, ranked, mass, top_n)]) | set(close)
    kept = [i for i in ranked if i in chosen]
    keep = len(kept)
    local = place(list(range(keep)), placement, "scores", prof) if keep > 1 else [0]
    order = [kept[i] for i in local]
    return OrderingResult(
        passages=reordered(items, order),
        order=order,
        scores=scores,
        cost=cost,
        details={
            "gold": ranked[0],
            "dropped": [i for i in ranked if i not in chosen],
            "ranked": ranked,
            "posterior": shares,
            "similar": close,
        },
    )


__all__ = ["DEFAULT_MASS", "select_and_place"]
