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

from rag_position.strategies import registry
from rag_position.strategies._align import StrategyError
from rag_position.strategies._fact import embedding_retrieve, needle_retrieve
from rag_position.strategies._question_likelihood import question_likelihood
from rag_position.strategies._sandwich import sandwich_prompt
from rag_position.strategies.profiles import PositionProfile, estimate_profile
from rag_position.strategies.registry import *  # noqa: F403 (the table and its rows' functions)
from rag_position.strategies.results import *  # noqa: F403 (the result types: importable here too)

__all__ = [
    "PositionProfile",
    "StrategyError",
    "embedding_retrieve",
    "estimate_profile",
    "needle_retrieve",
    "question_likelihood",
    "sandwich_prompt",
]
__all__ += registry.__all__  # the table and every row's function: a new row exports its own
