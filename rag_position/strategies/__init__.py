"""Strategies: where passages go (ordering) and how answers are made (FACT, recite, medoid).

Each strategy takes ``(question, passages, ...)`` (plus a ``scorer`` where it
scores, a ``generator`` where it answers) and returns one of two result types: an
:class:`OrderingResult` (a reorderer: ``.passages``, the caller's own objects in
the new order, ``.order``, ``.scores``, ``.cost``) or an :class:`AnswerResult`
(it answers by itself: ``.answer``, ``.trace``, ``.cost``). Passages may be
:class:`~rag_position.passages.Passage` objects, strings or ``ctxs`` dicts.
:data:`STRATEGIES`, the strategy table, names them all for the eval suite and
both framework integrations. The result types are exported by
:mod:`rag_position.strategies.results` (and stay importable from here).
"""

from __future__ import annotations

from rag_position.strategies._align import StrategyError
from rag_position.strategies._convex_score import convex_score
from rag_position.strategies._edge_reorder import edge_reorder
from rag_position.strategies._fact import (
    embedding_retrieve,
    fact,
    needle_retrieve,
)
from rag_position.strategies._likelihood_selection import likelihood_selection
from rag_position.strategies._medoid_vote import medoid_vote
from rag_position.strategies._passage_likelihood import passage_likelihood
from rag_position.strategies._profile_reorder import profile_reorder
from rag_position.strategies._question_likelihood import question_likelihood
from rag_position.strategies._recite_then_solve import recite_then_solve
from rag_position.strategies._sandwich import sandwich, sandwich_prompt
from rag_position.strategies._select_and_place import select_and_place
from rag_position.strategies.profiles import PositionProfile, estimate_profile
from rag_position.strategies.registry import STRATEGIES, StrategySpec, get_strategy
from rag_position.strategies.results import *  # noqa: F403 (the result types: importable here too)

__all__ = [
    "STRATEGIES",
    "PositionProfile",
    "StrategyError",
    "StrategySpec",
    "convex_score",
    "edge_reorder",
    "embedding_retrieve",
    "estimate_profile",
    "fact",
    "get_strategy",
    "likelihood_selection",
    "medoid_vote",
    "needle_retrieve",
    "passage_likelihood",
    "profile_reorder",
    "question_likelihood",
    "recite_then_solve",
    "sandwich",
    "sandwich_prompt",
    "select_and_place",
]
