"""What every reordering component does once it has an order: the metadata record.

:func:`reordering` runs a strategy row (:data:`rag_position.strategies.STRATEGIES`) on
passages and returns a :class:`Reordering`: the new order, and per input passage a
score and the extras the row's ``record`` gives. :func:`profile_reordering` and
:func:`edge_reordering` do the same for the two components that take relevance from
the framework's objects. :func:`reorder_records` turns a Reordering into the record
written on each reordered passage (:func:`reorder_record`: :data:`RECORD_KEYS` plus the
row's ``record_keys``), the same in both integrations.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rag_position._integration.components import component_named, component_of
from rag_position._integration.options import PROFILE_DEFAULTS, _check_convex_relevance
from rag_position.models import Scorer
from rag_position.models.lazy import LazyModel
from rag_position.strategies import (
    PositionProfile,
    StrategySpec,
    edge_reorder,
    profile_reorder,
)
from rag_position.strategies._edge_reorder import EdgeMode
from rag_position.strategies._profile_reorder import Relevance

T = TypeVar("T")

RECORD_KEYS = ("strategy", "score", "rank", "original_rank")
"""The keys of every reorder record (see :func:`reorder_record`)."""


# ---------------------------------------------------------------------- reordering
@dataclass(frozen=True)
class Reordering:
    """What a reorderer computed: the new order, and per INPUT passage a score and extras."""

    order: list[int]
    scores: list[float | None]
    extras: list[dict[str, Any]] = field(default_factory=list)


def _clean(score: Any) -> float | None:
    if score is None:
        return None
    value = float(score)
    return None if math.isnan(value) else value


def _reordering(
    n: int,
    order: Sequence[int],
    scores: Sequence[Any] | None,
    extras: list[dict[str, Any]],
    *,
    selects: bool = False,
) -> Reordering:
    if selects:  # a subset, each passage at most once
        if not order or len(set(order)) != len(order) or not all(0 <= i < n for i in order):
            raise RuntimeError(f"internal error: {list(order)} is not a selection of {n} passages")
    elif sorted(order) != list(range(n)):
        raise RuntimeError(f"internal error: {list(order)} is not a permutation of {n} passages")
    clean: list[float | None] = [_clean(s) for s in scores] if scores else [None] * n
    return Reordering(list(order), clean, extras)


def table_class(base: type[T], component: str, module: str, use: str) -> type[T]:
    """The framework component of the row owning ``component``: a subclass of ``base``
    and of the row's ``option_model``, named ``component``, documented by
    :func:`component_doc` (``use``: how the framework calls it), with the row as ``row``
    and its name as ``strategy_name`` (the record's ``strategy``)."""
    row = component_named(component).row
    namespace = {
        "__module__": module,
        "__qualname__": component,
        "__doc__": component_doc(row, use),
        "row": row,
        "strategy_name": row.name,
    }
    made: type[T] = type(component, (base, row.option_model), namespace)
    return made


def component_doc(row: StrategySpec, use: str) -> str:
    """The docstring of the component a framework builds from ``row``.

    The core function's summary line, ``use`` (how the framework calls it; ``{name}`` is
    the component's name), the options with their defaults and descriptions (from the
    row's ``option_model``) and the record extras.
    """
    function = row.function.__name__
    made = component_of(row.name)
    record_keys = made.record_keys if made is not None else {}
    summary = (row.function.__doc__ or row.summary).strip().split("\n\n")[0]
    lines = [
        f"{row.summary[:1].upper()}{row.summary[1:]}: ``rag_position.strategies.{function}``.",
        "",
        " ".join(summary.split()),
        "",
        use.format(name=made.name if made is not None else row.name),
        "",
        "Options (the core function's keywords; ``scorer=`` is the model that scores):",
        "",
    ]
    for name, info in row.option_model.model_fields.items():
        lines.append(f"- ``{name}`` (default ``{info.default!r}``): {info.description}")
    extras = ", ".join(f"``{k}``" for k in record_keys) or "none"
    lines += ["", f"Record extras (besides ``{'``, ``'.join(RECORD_KEYS)}``): {extras}."]
    return "\n".join(lines)


def reordering(
    row: StrategySpec,
    question: str,
    passages: Sequence[Any],
    scorer: LazyModel[Any] | None,
    *,
    embedder: LazyModel[Any] | None = None,
    **options: Any,
) -> Reordering:
    """The row's function on ``passages`` with ``options``; its record per passage.

    ``embedder`` goes to a row that takes one when given (``select_and_place``'s
    ``similar=``), loaded then.

    Fewer than two passages are not scored: the given order, no score, the row's
    ``record_keys`` at their unscored values. A row that ``selects`` may keep a subset:
    the order then lists the kept passages only.
    """
    n = len(passages)
    made = component_of(row.name)
    if n < 2 or made is None or made.record is None:
        keys = made.record_keys if made is not None else {}
        unscored = [copy.deepcopy(dict(keys)) for _ in range(n)]  # none shared
        return _reordering(n, list(range(n)), None, unscored)
    models = (_scorer(scorer),) if "scorer" in row.needs else ()
    if embedder is not None and "embedder" in row.uses:
        options = {**options, "embedder": embedder.get()}
    result = row.function(question, passages, *models, **options)
    scores, extras = made.record(result)
    return _reordering(n, result.order, scores, extras, selects=row.selects)


def _scorer(scorer: LazyModel[Any] | None) -> Scorer:
    if scorer is None:
        raise ValueError("`scorer` is required")
    found: Scorer = scorer.get()
    return found


def profile_reordering(
    question: str | None,
    passages: Sequence[Any],
    profile: PositionProfile,
    *,
    scores: Sequence[float | None] | None = None,
    scorer: LazyModel[Scorer] | None = None,
    convex_options: Mapping[str, Any] | None = None,
    score_key: str | None = None,
    relevance: Relevance = PROFILE_DEFAULTS["relevance"],
) -> Reordering:
    """Profile placement; ``score`` is the relevance used, ``relevance`` says where it came from.

    Relevance: ``scores`` (every passage needs one), else with ``scorer`` by ``relevance``
    (``"passage_likelihood"``, the default, or ``"convex_score"``, which alone takes
    ``convex_options``), else the passages' own ``score`` where every one has it, else the
    given order.
    """
    _check_convex_relevance(convex_options, relevance)
    n = len(passages)
    options: dict[str, Any] = {"relevance": relevance}
    if scores is not None:
        missing = [i for i, s in enumerate(scores) if s is None]
        if missing:
            raise ValueError(
                f"documents {missing} have no {score_key or 'score'!r} in their metadata; "
                "profile placement needs a score for every document"
            )
        options["scores"] = [float(s) for s in scores if s is not None]
    elif scorer is not None:
        if not isinstance(question, str) or not question.strip():
            raise ValueError("profile placement with a scorer scores the question: pass the query")
        options = {**options, "scorer": scorer.get(), **dict(convex_options or {})}
    # Without a scorer the question is not used; the core still wants a string.
    text = question if isinstance(question, str) and question.strip() else "(no query)"
    result = profile_reorder(text, passages, profile=profile, **options)
    source = result.details.get("relevance", "order")
    return _reordering(n, result.order, list(result.scores) or None, [{"relevance": source}] * n)


def edge_reordering(
    passages: Sequence[Any],
    *,
    scores: Sequence[float | None] | None = None,
    mode: EdgeMode = "langchain",
    top_k: int | None = None,
    word_count_threshold: int | None = None,
) -> Reordering:
    """Edge placement (no model); ``score`` is the relevance score used, if any.

    A NaN among the scores read is the core's ``ValueError``; 0 or 1 passages come back
    as given, no score read or recorded (as :func:`profile_reordering`'s). Haystack's
    ``top_k``/``word_count_threshold`` may drop passages: the order then lists the kept
    ones only, and :func:`reorder_records` writes records for those.
    """
    result = edge_reorder(
        passages, scores=scores, mode=mode, top_k=top_k, word_count_threshold=word_count_threshold
    )
    n = len(passages)
    order = list(result.order)
    if len(set(order)) != len(order) or not all(0 <= i < n for i in order):
        raise RuntimeError(f"internal error: {order} is not a selection of {n} passages")
    used: list[float | None] = [_clean(s) for s in result.scores] if result.scores else [None] * n
    return Reordering(order, used, [{} for _ in range(n)])


def reorder_record(
    strategy: str,
    rank: int,
    original_rank: int,
    score: float | None,
    extras: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The metadata record a reorderer writes on one passage (a new dict).

    ``{"strategy", "score", "rank" (new position), "original_rank" (input position),
    **extras}``; see :data:`RECORD_KEYS` and the strategy row's ``record_keys``.
    """
    record: dict[str, Any] = {
        "strategy": strategy,
        "score": _clean(score),
        "rank": rank,
        "original_rank": original_rank,
    }
    record.update(extras or {})
    return record


def reorder_records(reordering: Reordering, strategy: str) -> list[dict[str, Any]]:
    """One record per output position (``records[r]`` is for input ``reordering.order[r]``)."""
    extras = reordering.extras
    return [
        reorder_record(strategy, rank, i, reordering.scores[i], extras[i] if extras else None)
        for rank, i in enumerate(reordering.order)
    ]


def with_record(metadata: Mapping[str, Any], key: str, record: Mapping[str, Any]) -> dict[str, Any]:
    """A NEW metadata dict: ``metadata`` plus ``record`` under ``key`` (the input is untouched)."""
    return {**metadata, key: dict(record)}
