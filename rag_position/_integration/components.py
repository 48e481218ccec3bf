"""The frameworks' table: which strategy rows become reordering components, and the
metadata record each writes.

A row of the strategy table (:data:`rag_position.strategies.STRATEGIES`) says what a
strategy computes; a :class:`Component` here says what both integrations build from it:
the class name (the same in LangChain and LlamaIndex), the rows it runs (the first owns
its options; the others fix some, as ``passage_likelihood_profile`` fixes
``placement="profile"``), and the record it writes on each reordered passage:
``record_keys``, the extras with their values when nothing is scored (fewer than two
passages), and ``record``, a function of the result giving each input passage's score
and extras.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from rag_position.strategies import STRATEGIES, StrategySpec

Record = tuple[Sequence[float | None] | None, list[dict[str, Any]]]
"""Per input passage: its score (``None`` for none) and the extras of its metadata record."""


def _likelihood_record(result: Any) -> Record:
    """Every passage: the winning order's mean log-likelihood."""
    n = len(result.order)
    best = None if result.best is None else float(result.scores[result.best])
    return [best] * n, [{"question_loglik": best} for _ in range(n)]


def _gold_record(result: Any, gold: int | None) -> Record:
    """Each passage's own score; ``gold`` marks the candidate."""
    return list(result.scores) or None, [{"gold": i == gold} for i in range(len(result.order))]


def _convex_record(result: Any) -> Record:
    return _gold_record(result, result.gold)


def _passage_record(result: Any) -> Record:
    return _gold_record(result, result.details["gold"])


def _selection_record(result: Any) -> Record:
    """Each passage's own score; its rank by likelihood and share of the posterior; its rank
    among the ``similar`` passages closest to the question (else ``None``); the input
    positions of the dropped passages (most likely first) on every kept one."""
    ranked = result.details["ranked"]
    rank = {d: r for r, d in enumerate(ranked)}
    close = {d: r for r, d in enumerate(result.details.get("similar", []))}
    dropped = list(result.details["dropped"])
    extras = [
        {
            "likelihood_rank": rank[i],
            "posterior": float(result.details["posterior"][i]),
            "similar_rank": close.get(i),
            "dropped": list(dropped),  # each record its own list
        }
        for i in range(len(ranked))
    ]
    return list(result.scores) or None, extras


@dataclass(frozen=True)
class Component:
    """One reordering component of both integrations (see the module's docstring)."""

    name: str
    rows: tuple[str, ...]
    record_keys: Mapping[str, Any] = field(default_factory=dict)
    record: Callable[[Any], Record] | None = None

    @property
    def row(self) -> StrategySpec:
        """The row that owns the component's options."""
        return STRATEGIES[self.rows[0]]


COMPONENT_TABLE: tuple[Component, ...] = (
    Component(
        "LikelihoodReorder",
        ("likelihood_selection",),
        MappingProxyType({"question_loglik": None}),
        _likelihood_record,
    ),
    Component(
        "ConvexScoreReorder", ("convex_score",), MappingProxyType({"gold": False}), _convex_record
    ),
    Component(
        "PassageLikelihoodReorder",
        ("passage_likelihood", "passage_likelihood_profile"),
        MappingProxyType({"gold": False}),
        _passage_record,
    ),
    Component(
        "SelectAndPlace",
        ("select_and_place", "select_and_place_profile"),
        MappingProxyType(
            {"likelihood_rank": 0, "posterior": 1.0, "similar_rank": None, "dropped": []}
        ),
        _selection_record,
    ),
    Component("EdgeReorder", ("edge",)),
    Component("ProfileReorder", ("profile",), MappingProxyType({"relevance": "order"})),
)
"""Every reordering component both integrations build, by class name."""


def component_named(component: str) -> Component:
    """The component called ``component``.

    Example:
        >>> component_named("PassageLikelihoodReorder").row.name
        'passage_likelihood'
    """
    for found in COMPONENT_TABLE:
        if found.name == component:
            return found
    raise ValueError(f"no strategy row has the component {component!r}")


def component_of(strategy: str) -> Component | None:
    """The component that runs the strategy row ``strategy``, if any.

    Example:
        >>> component_of("select_and_place_profile").name, component_of("fact")
        ('SelectAndPlace', None)
    """
    return next((c for c in COMPONENT_TABLE if strategy in c.rows), None)


def record_keys(strategy: str) -> Mapping[str, Any]:
    """The extras the component running ``strategy`` adds to each record (none without one).

    Example:
        >>> sorted(record_keys("passage_likelihood_profile")), dict(record_keys("fact"))
        (['gold'], {})
    """
    made = component_of(strategy)
    return made.record_keys if made is not None else MappingProxyType({})


def component_row(component: str) -> StrategySpec:
    """The row that owns the component named ``component`` (its options are the row's).

    Example:
        >>> component_row("PassageLikelihoodReorder").name
        'passage_likelihood'
    """
    return component_named(component).row


def strategy_components() -> dict[str, Component]:
    """Strategy name -> its component, in the strategy table's order: every name
    ``PositionAwareRetriever(strategy=...)`` takes."""
    return {name: c for name in STRATEGIES if (c := component_of(name)) is not None}


def component_rows() -> dict[str, StrategySpec]:
    """Strategy name -> the row that owns its component (``passage_likelihood_profile`` ->
    ``passage_likelihood``)."""
    return {name: c.row for name, c in strategy_components().items()}
