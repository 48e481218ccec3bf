"""Ordering strategies: where each passage goes, chosen by the model or by the frameworks' rule.

Each strategy takes ``(question, passages, ...)`` (plus a ``scorer`` where it
scores) and returns an :class:`OrderingResult`: ``.passages`` (the caller's own
objects, in the new order), ``.order``, ``.scores`` and ``.cost``. Passages may
be :class:`~rag_position.passages.Passage` objects, strings or ``ctxs`` dicts.
:data:`STRATEGIES` names them for the eval suite.
"""

from __future__ import annotations

from rag_position.strategies._base import GaugeResult, OrderingResult
from rag_position.strategies.convex import ConvexScoreResult, convex_design, convex_score
from rag_position.strategies.edges import edge_reorder
from rag_position.strategies.gauge import question_likelihood
from rag_position.strategies.likelihood import SelectionResult, likelihood_selection
from rag_position.strategies.placement import profile_reorder
from rag_position.strategies.profiles import PositionProfile, estimate_profile
from rag_position.strategies.registry import STRATEGIES, Strategy, get_strategy
from rag_position.strategies.sandwich import CHAT_SANDWICH_TEMPLATE, sandwich, sandwich_prompt

__all__ = [
    "CHAT_SANDWICH_TEMPLATE",
    "STRATEGIES",
    "ConvexScoreResult",
    "GaugeResult",
    "OrderingResult",
    "PositionProfile",
    "SelectionResult",
    "Strategy",
    "convex_design",
    "convex_score",
    "edge_reorder",
    "estimate_profile",
    "get_strategy",
    "likelihood_selection",
    "profile_reorder",
    "question_likelihood",
    "sandwich",
    "sandwich_prompt",
]
