"""``EdgeReorderTransformer``: query-free edge placement, a drop-in for ``LongContextReorder``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.documents import BaseDocumentTransformer, Document
from langchain_core.runnables.config import run_in_executor
from pydantic import ConfigDict, model_validator

from langchain_rag_position._adapters import annotate, check_documents
from langchain_rag_position.compressors import edge_order
from rag_position._integration import EdgeOptions, ReorderOptions, check_edge_options


class EdgeReorderTransformer(BaseDocumentTransformer, ReorderOptions, EdgeOptions):
    """Edge placement as a document transformer: most relevant documents at both ends.

    With the defaults the order is exactly ``LongContextReorder``'s
    (langchain-community): the given order is taken as most relevant first, reversed,
    and alternately put in front and behind, so the least relevant end up in the
    middle. ``score_key`` sorts by ``metadata[score_key]`` first (highest first,
    documents without it last); ``mode="llamaindex"``/``"haystack"`` reproduce those
    frameworks' rules. Documents come back as shallow copies carrying
    ``metadata["rag_position"] = {"strategy": "edge", "score", "rank",
    "original_rank"}``; ``metadata_key=None`` returns the very input objects, as
    ``LongContextReorder`` does. Input lists are never mutated.

    Example:
        >>> docs = [Document(page_content=f"doc {i}") for i in range(5)]
        >>> out = EdgeReorderTransformer().transform_documents(docs)
        >>> [d.page_content for d in out]
        ['doc 0', 'doc 2', 'doc 4', 'doc 3', 'doc 1']
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    @model_validator(mode="after")
    def _check_mode(self) -> EdgeReorderTransformer:
        check_edge_options(self.mode, self.top_k, self.word_count_threshold)
        return self

    def transform_documents(self, documents: Sequence[Document], **kwargs: Any) -> list[Document]:
        """The documents in edge order (``kwargs`` are ignored, as LongContextReorder does)."""
        docs = check_documents(documents)
        if not docs:
            return []
        return annotate(docs, edge_order(self, docs), "edge", self.metadata_key)

    async def atransform_documents(
        self, documents: Sequence[Document], **kwargs: Any
    ) -> list[Document]:
        """``transform_documents`` off the event loop."""
        return await run_in_executor(None, self.transform_documents, documents, **kwargs)
