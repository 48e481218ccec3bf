"""Strategies by name, with one calling convention, for the eval suite and the CLI.

Every entry is called as ``STRATEGIES[name](question, passages, scorer=..., generator=...,
**options)`` and returns an :class:`~rag_position.strategies.OrderingResult`
(the scoring ones also take ``seed``):
answer with ``result.prompt`` when it is set (the sandwich), else with the usual
prompt rendered from ``result.passages``; ``result.cost`` is what choosing the
order spent. ``options`` go to the underlying function.

=========================  ==================================================  ===================
name                       calls                                               needs
=========================  ==================================================  ===================
``retriever``              the given order (the baseline), zero cost           --
``likelihood_selection``   :func:`likelihood_selection`                        scorer
``convex_score``           :func:`convex_score` (``placement="first"``)        scorer
``convex_score_profile``   :func:`convex_score` (``placement="profile"``)      scorer, profile=
``convex_score_sandwich``  ``convex_score``'s order, ``prompt`` = query-aware  scorer
``edge``                   :func:`edge_reorder` (``mode="langchain"``)         --
``sandwich``               the given order, ``prompt`` = query-aware           --
``fact``                   :func:`fact` (answers by itself)                    generator
``recite``                 :func:`recite_then_solve` (answers by itself)       generator
``medoid``                 :func:`medoid_vote` (``k=3``)                       generator, embedder
=========================  ==================================================  ===================

The generation-side entries return their own result (``.answer``, ``.trace``,
``.cost``) rather than an order: the eval takes ``.answer`` as the prediction.
``medoid`` takes ``embedder=`` (default: the embedded all-MiniLM-L6-v2, loaded once).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import cache
from types import MappingProxyType
from typing import Any, Protocol

from rag_position.models.protocols import Embedder, Generator, Scorer
from rag_position.strategies._base import OrderingResult, check_passages, check_question, unchanged
from rag_position.strategies.convex import convex_score
from rag_position.strategies.edges import edge_reorder
from rag_position.strategies.fact import FactResult, fact
from rag_position.strategies.likelihood import likelihood_selection
from rag_position.strategies.medoid import MedoidResult, medoid_vote
from rag_position.strategies.recite import ReciteResult, recite_then_solve
from rag_position.strategies.sandwich import sandwich, sandwich_prompt


class Strategy(Protocol):
    """The uniform signature of a registered strategy.

    Example:
        >>> strategy: Strategy = STRATEGIES["sandwich"]
        >>> result = strategy("Who wrote Hamlet?", ["doc a", "doc b"], scorer=None, generator=None)
        >>> result.order, result.prompt is not None
        ([0, 1], True)
    """

    def __call__(
        self,
        question: str,
        passages: Sequence[Any],
        *,
        scorer: Scorer | None = None,
        generator: Generator | None = None,
        **options: Any,
    ) -> OrderingResult[Any] | FactResult | ReciteResult | MedoidResult: ...


def get_strategy(name: str) -> Strategy:
    """The strategy registered as ``name``; ``ValueError`` lists the names known.

    Example:
        >>> edge = get_strategy("edge")
        >>> edge("Who wrote Hamlet?", ["a", "b", "c"]).passages
        ['a', 'c', 'b']
        >>> "medoid" in STRATEGIES  # every name get_strategy knows
        True
    """
    try:
        return STRATEGIES[name]
    except KeyError:
        raise ValueError(
            f"unknown strategy {name!r}; known: {', '.join(sorted(STRATEGIES))}"
        ) from None


def _retriever(
    question: str,
    passages: Sequence[Any],
    *,
    scorer: Scorer | None = None,
    generator: Generator | None = None,
    **options: Any,
) -> OrderingResult[Any]:
    check_question(question)
    _no_options("retriever", options)
    return unchanged(check_passages(passages))


def _likelihood_selection(
    question: str,
    passages: Sequence[Any],
    *,
    scorer: Scorer | None = None,
    generator: Generator | None = None,
    seed: int = 0,
    **options: Any,
) -> OrderingResult[Any]:
    scorer = _need_scorer("likelihood_selection", scorer)
    return likelihood_selection(question, passages, scorer, seed=seed, **options)


def _convex_score(
    question: str,
    passages: Sequence[Any],
    *,
    scorer: Scorer | None = None,
    generator: Generator | None = None,
    seed: int = 0,
    **options: Any,
) -> OrderingResult[Any]:
    options.setdefault("placement", "first")
    scorer = _need_scorer("convex_score", scorer)
    return convex_score(question, passages, scorer, seed=seed, **options)


def _convex_score_profile(
    question: str,
    passages: Sequence[Any],
    *,
    scorer: Scorer | None = None,
    generator: Generator | None = None,
    seed: int = 0,
    **options: Any,
) -> OrderingResult[Any]:
    if options.get("profile") is None:
        raise ValueError(
            "strategy 'convex_score_profile' needs profile= (a PositionProfile or its JSON "
            "file, e.g. from estimate_profile)"
        )
    scorer = _need_scorer("convex_score_profile", scorer)
    options = {**options, "placement": "profile"}
    return convex_score(question, passages, scorer, seed=seed, **options)


def _convex_score_sandwich(
    question: str,
    passages: Sequence[Any],
    *,
    scorer: Scorer | None = None,
    generator: Generator | None = None,
    seed: int = 0,
    chat: bool = False,
    **options: Any,
) -> OrderingResult[Any]:
    """ConvexScore's order, answered with the query sandwich of that order.

    The likelihoods are scored on the plain qa prompt (the question only at the end:
    with it also before the passages, its likelihood at the end measures copying, not
    reading), so this costs exactly what ``convex_score`` costs.
    """
    options.setdefault("placement", "first")
    scorer = _need_scorer("convex_score_sandwich", scorer)
    result = convex_score(question, passages, scorer, seed=seed, **options)
    if not result.passages:
        return result
    return replace(result, prompt=sandwich_prompt(question, result.passages, chat=chat))


def _edge(
    question: str,
    passages: Sequence[Any],
    *,
    scorer: Scorer | None = None,
    generator: Generator | None = None,
    **options: Any,
) -> OrderingResult[Any]:
    check_question(question)
    return edge_reorder(passages, **options)


def _sandwich(
    question: str,
    passages: Sequence[Any],
    *,
    scorer: Scorer | None = None,
    generator: Generator | None = None,
    **options: Any,
) -> OrderingResult[Any]:
    return sandwich(question, passages, **options)


def _fact(
    question: str,
    passages: Sequence[Any],
    *,
    scorer: Scorer | None = None,
    generator: Generator | None = None,
    **options: Any,
) -> FactResult:
    return fact(question, passages, _need_generator("fact", generator), **options)


def _recite(
    question: str,
    passages: Sequence[Any],
    *,
    scorer: Scorer | None = None,
    generator: Generator | None = None,
    **options: Any,
) -> ReciteResult:
    return recite_then_solve(question, passages, _need_generator("recite", generator), **options)


def _medoid(
    question: str,
    passages: Sequence[Any],
    *,
    scorer: Scorer | None = None,
    generator: Generator | None = None,
    seed: int = 0,
    embedder: Embedder | None = None,
    **options: Any,
) -> MedoidResult:
    options.setdefault("k", 3)
    return medoid_vote(
        question,
        passages,
        _need_generator("medoid", generator),
        embedder if embedder is not None else _embedded_embedder(),
        seed=seed,
        **options,
    )


@cache
def _embedded_embedder() -> Embedder:
    from rag_position.models.embedders import load_embedder

    return load_embedder("embedded")


def _need_generator(name: str, generator: Generator | None) -> Generator:
    if generator is None:
        raise ValueError(f"strategy {name!r} generates its answer: pass generator=")
    return generator


def _need_scorer(name: str, scorer: Scorer | None) -> Scorer:
    if scorer is None:
        raise ValueError(f"strategy {name!r} scores question likelihoods: pass scorer=")
    return scorer


def _no_options(name: str, options: Mapping[str, Any]) -> None:
    if options:
        raise TypeError(f"strategy {name!r} takes no options, got {sorted(options)}")


STRATEGIES: Mapping[str, Strategy] = MappingProxyType(
    {
        "retriever": _retriever,
        "likelihood_selection": _likelihood_selection,
        "convex_score": _convex_score,
        "convex_score_profile": _convex_score_profile,
        "edge": _edge,
        "sandwich": _sandwich,
        "convex_score_sandwich": _convex_score_sandwich,
        "fact": _fact,
        "recite": _recite,
        "medoid": _medoid,
    }
)
"""Name -> strategy, read-only. The names are the eval suite's ``--strategies``."""

_TARGETS: Mapping[str, tuple[Any, ...]] = {
    "retriever": (),
    "likelihood_selection": (likelihood_selection,),
    "convex_score": (convex_score,),
    "convex_score_profile": (convex_score,),
    "convex_score_sandwich": (convex_score,),
    "edge": (edge_reorder,),
    "sandwich": (sandwich,),
    "fact": (fact,),
    "recite": (recite_then_solve,),
    "medoid": (medoid_vote,),
}
_FIXED: Mapping[str, frozenset[str]] = {"convex_score_profile": frozenset({"placement"})}
"""Options a strategy sets itself: its name says how it places (``placement="profile"``)."""
_CALL_ARGUMENTS = frozenset(
    {"question", "passages", "passages_or_context", "scorer", "generator", "embedder", "options"}
)


def strategy_options(name: str) -> frozenset[str]:
    """The options the strategy ``name`` takes (keywords of it and the function it calls).

    Example:
        >>> sorted(strategy_options("edge"))
        ['mode', 'scores', 'top_k', 'word_count_threshold']
        >>> strategy_options("retriever")
        frozenset()
    """
    if name not in _TARGETS:
        raise ValueError(f"unknown strategy {name!r}; known: {', '.join(sorted(STRATEGIES))}")
    found: set[str] = set()
    for function in (STRATEGIES[name], *_TARGETS[name]):
        for parameter in inspect.signature(function).parameters.values():
            if parameter.kind in (parameter.KEYWORD_ONLY, parameter.POSITIONAL_OR_KEYWORD):
                found.add(parameter.name)
    return frozenset(found - _CALL_ARGUMENTS - _FIXED.get(name, frozenset()))
