"""``RagPositionEmbeddings``: a rag-position embedder (all-MiniLM-L6-v2 by default)."""

from __future__ import annotations

from typing import Any

from langchain_core.embeddings import Embeddings
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from rag_position._integration import LazyModel


class RagPositionEmbeddings(BaseModel, Embeddings):
    """Our embedder as LangChain ``Embeddings`` (unit-norm vectors).

    ``embedder`` is ``"embedded"`` (all-MiniLM-L6-v2 from an installed package,
    offline; the default), a sentence-transformers name or folder, loaded on first
    use, or an object with ``embed()`` (rag-position's ``Embedder`` protocol).

    Example:
        >>> from langchain_core.vectorstores import InMemoryVectorStore
        >>> store = InMemoryVectorStore(RagPositionEmbeddings())
        >>> len(RagPositionEmbeddings().embed_query("Paris"))
        384
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    embedder: Any = Field(
        default="embedded", description="'embedded', a sentence-transformers name, or an Embedder."
    )

    _lazy: LazyModel[Any] = PrivateAttr()

    @model_validator(mode="after")
    def _resolve(self) -> RagPositionEmbeddings:
        spec = self.embedder
        if isinstance(spec, str):
            if not spec:
                raise ValueError("`embedder` is an empty spec; use 'embedded'")

            def load() -> Any:
                from rag_position.models import load_embedder

                return load_embedder(spec)

            self._lazy = LazyModel(loader=load, label=repr(spec))
        elif callable(getattr(spec, "embed", None)) and not isinstance(spec, Embeddings):
            self._lazy = LazyModel(spec, label=type(spec).__name__)
        else:
            raise TypeError(
                f"RagPositionEmbeddings wraps a rag-position embedder, got a "
                f"{type(spec).__name__}; pass 'embedded' or an object with embed()"
            )
        return self

    @property
    def core_embedder(self) -> Any:
        """The rag-position embedder (loaded on first access)."""
        return self._lazy.get()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One unit vector per text."""
        if not texts:
            return []
        return [[float(x) for x in row] for row in self.core_embedder.embed(list(texts))]

    def embed_query(self, text: str) -> list[float]:
        """The unit vector of ``text`` as a question: the embedder's own ``embed_query``
        where it has one (a model that embeds a question unlike a passage), else ``embed``."""
        own = getattr(self.core_embedder, "embed_query", None)
        if callable(own):
            return [float(x) for x in own(text)]
        return self.embed_documents([text])[0]
