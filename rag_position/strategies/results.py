"""What the strategies return: an ordering (``OrderingResult`` and the kinds that carry
more), or an answer (``AnswerResult`` and the kinds with a trace of how it was made).

The types are defined beside the strategy that makes them and exported here, so that
:mod:`rag_position.strategies` exports the strategies and their table alone.
"""

from __future__ import annotations

from rag_position.strategies._base import AnswerResult, OrderingResult
from rag_position.strategies._convex_score import ConvexScoreResult
from rag_position.strategies._fact import FactResult, FactTrace
from rag_position.strategies._likelihood_selection import SelectionResult
from rag_position.strategies._medoid_vote import MedoidResult, MedoidTrace
from rag_position.strategies._recite_then_solve import ReciteResult, ReciteTrace

__all__ = [
    "AnswerResult",
    "ConvexScoreResult",
    "FactResult",
    "FactTrace",
    "MedoidResult",
    "MedoidTrace",
    "OrderingResult",
    "ReciteResult",
    "ReciteTrace",
    "SelectionResult",
]
