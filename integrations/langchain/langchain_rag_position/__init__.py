"""LangChain components for rag-position: put retrieved documents where the model reads them.

Document compressors (``BaseDocumentCompressor``) :class:`LikelihoodReorder`,
:class:`ConvexScoreReorder`, :class:`PassageLikelihoodReorder`, :class:`ProfileReorder`,
:class:`EdgeReorder`, and :class:`SelectAndPlace` (keeps the likeliest documents,
drops the rest, places what it keeps; fits ``ContextualCompressionRetriever``); the
transformer :class:`EdgeReorderTransformer` (a drop-in for ``LongContextReorder``);
the retriever :class:`PositionAwareRetriever`; the runnables :class:`QuerySandwich`,
:class:`ReciteThenSolve`, :class:`FactRewriter`, :class:`MedoidVoting`; and
:class:`ChatRagPosition` / :class:`RagPositionEmbeddings`, which put rag-position's
models (the embedded offline ones by default) into any LangChain pipeline.
Reordering components write ``metadata[METADATA_KEY]`` on copies of the documents.
:func:`from_tuned` builds the compressor a tuned file chose (``rag-position tune``), as
``PositionAwareRetriever(tuned=...)`` does.
"""

from __future__ import annotations

from langchain_rag_position import compressors
from langchain_rag_position._adapters import (
    METADATA_KEY,
    LangChainEmbedder,
    LangChainGenerator,
)
from langchain_rag_position.chat_models import ChatRagPosition
from langchain_rag_position.compressors import *  # noqa: F403 (every reordering compressor)
from langchain_rag_position.document_transformers import EdgeReorderTransformer
from langchain_rag_position.embeddings import RagPositionEmbeddings
from langchain_rag_position.retrievers import PositionAwareRetriever
from langchain_rag_position.runnables import (
    FactRewriter,
    MedoidVoting,
    QuerySandwich,
    ReciteThenSolve,
)
from rag_position.strategies import PositionProfile

__all__ = [
    "METADATA_KEY",
    "ChatRagPosition",
    "EdgeReorderTransformer",
    "FactRewriter",
    "LangChainEmbedder",
    "LangChainGenerator",
    "MedoidVoting",
    "PositionAwareRetriever",
    "PositionProfile",
    "QuerySandwich",
    "RagPositionEmbeddings",
    "ReciteThenSolve",
]
__all__ += compressors.__all__  # a new table component is exported by its one line there
