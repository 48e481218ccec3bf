"""rag-position for LlamaIndex: position-aware node postprocessors, retriever and query engines.

Postprocessors reorder retrieved nodes (:class:`LikelihoodReorder`,
:class:`ConvexScoreReorder`, :class:`PassageLikelihoodReorder`, :class:`ProfileReorder`,
:class:`EdgeReorder`; :class:`SelectAndPlace` keeps the likeliest nodes, like a
reranker's ``top_n``, and drops the rest) and
write what they found under the node metadata key :data:`METADATA_KEY`;
:class:`PositionAwareRetriever` wraps any retriever with one of them; the query
engines run the generation-side strategies (:class:`QuerySandwichQueryEngine`,
:class:`ReciteThenSolveQueryEngine`, :class:`FactQueryEngine`,
:class:`MedoidVotingQueryEngine`). :class:`RagPositionLLM` and
:class:`RagPositionEmbedding` put rag-position's own (embedded, offline) models into
any LlamaIndex pipeline. :func:`from_tuned` builds the postprocessor a tuned file chose
(``rag-position tune``), as ``PositionAwareRetriever(tuned=...)`` does.

Example:
    >>> from llama_index.postprocessor.rag_position import ConvexScoreReorder
    >>> engine = index.as_query_engine(node_postprocessors=[ConvexScoreReorder(scorer="embedded")])
"""

from llama_index.postprocessor.rag_position import base
from llama_index.postprocessor.rag_position._nodes import METADATA_KEY
from llama_index.postprocessor.rag_position.adapters import (
    LlamaIndexEmbedder,
    LlamaIndexGenerator,
    RagPositionEmbedding,
    RagPositionLLM,
    openai_scorer,
    resolve_embedder,
    resolve_generator,
    resolve_scorer,
)
from llama_index.postprocessor.rag_position.base import *  # noqa: F403 (every reordering postprocessor)
from llama_index.postprocessor.rag_position.query_engines import (
    FactQueryEngine,
    MedoidVotingQueryEngine,
    QuerySandwichQueryEngine,
    ReciteThenSolveQueryEngine,
)
from llama_index.postprocessor.rag_position.retriever import (
    COMPONENTS,
    PositionAwareRetriever,
)

__all__ = [
    "COMPONENTS",
    "METADATA_KEY",
    "FactQueryEngine",
    "LlamaIndexEmbedder",
    "LlamaIndexGenerator",
    "MedoidVotingQueryEngine",
    "PositionAwareRetriever",
    "QuerySandwichQueryEngine",
    "RagPositionEmbedding",
    "RagPositionLLM",
    "ReciteThenSolveQueryEngine",
    "openai_scorer",
    "resolve_embedder",
    "resolve_generator",
    "resolve_scorer",
]
__all__ += base.__all__  # a new table component is exported by its one line there
