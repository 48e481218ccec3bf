"""Model backends behind three small protocols: Generator, Scorer, Embedder."""

from __future__ import annotations

from rag_position.models.embedders import SentenceTransformerEmbedder, load_embedder
from rag_position.models.loading import load_model
from rag_position.models.protocols import (
    Embedder,
    Generator,
    Metered,
    Scorer,
    Span,
    SpanScore,
    TokenCounter,
)

__all__ = [
    "Embedder",
    "Generator",
    "Metered",
    "Scorer",
    "SentenceTransformerEmbedder",
    "Span",
    "SpanScore",
    "TokenCounter",
    "load_embedder",
    "load_model",
]
