"""Model backends behind three small protocols: Generator, Scorer, Embedder.

Spec strings (``"embedded"``, ``"hf:<path>"``, ``"openai:<url>"``) are read by one
table, :data:`rag_position.models.loading.BACKENDS`: :func:`load_model`,
:func:`check_spec`, :func:`parse_spec` and :func:`find_backend` ask it.
"""

from __future__ import annotations

from rag_position.models.embedders import SentenceTransformerEmbedder, load_embedder
from rag_position.models.loading import (
    ACCEPTED_SPECS,
    BACKENDS,
    Backend,
    ParsedSpec,
    check_spec,
    find_backend,
    load_model,
    openai_spec,
    parse_spec,
)
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
    "ACCEPTED_SPECS",
    "BACKENDS",
    "Backend",
    "Embedder",
    "Generator",
    "Metered",
    "ParsedSpec",
    "Scorer",
    "SentenceTransformerEmbedder",
    "Span",
    "SpanScore",
    "TokenCounter",
    "check_spec",
    "find_backend",
    "load_embedder",
    "load_model",
    "openai_spec",
    "parse_spec",
]
