"""Document compressors that reorder what a retriever returned (no document is dropped).

Each is a ``BaseDocumentCompressor``: it drops into ``ContextualCompressionRetriever``
(``langchain_classic.retrievers``) or, through ``compress_documents``, into any chain.
The query comes from the call. The returned documents are shallow copies of the
caller's, each with a new metadata dict holding ``metadata[METADATA_KEY]``::

    {"strategy": ..., "score": float | None, "rank": new position, "original_rank": old position,
     **extras}

built by ``rag_position._integration.reorder_record`` (the same record the LlamaIndex
postprocessors write); the extras are the strategy row's ``record_keys``
(:data:`rag_position.strategies.STRATEGIES`: ``question_loglik``, ``gold``, ``relevance``).
The compressors of the scoring strategies are built from their rows
(:func:`table_compressor`): options, defaults and descriptions are the core functions'.

``metadata_key=None`` returns the caller's very objects in the new order instead.
Inputs are never mutated; no documents in gives no documents out.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.runnables.config import run_in_executor
from pydantic import ConfigDict, PrivateAttr, model_validator

from langchain_rag_position._adapters import (
    EmbeddingsFields,
    LazyModel,
    annotate,
    check_documents,
    check_query,
    metadata_scores,
    resolve_scorer,
    to_passage,
)
from rag_position import _integration as core
from rag_position._integration import EdgeOptions, ProfileOptions, ReorderOptions, ScorerOptions
from rag_position.passages import Passage
from rag_position.strategies import STRATEGIES, StrategySpec
from rag_position.strategies.profiles import as_profile
from rag_position.tuned import TunedLike


class _Reorder(BaseDocumentCompressor, ReorderOptions):
    """Shared plumbing: check the documents, ask the strategy for an order, annotate."""

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    strategy_name: ClassVar[str] = ""

    def compress_documents(
        self,
        documents: Sequence[Document],
        query: str,
        callbacks: Callbacks | None = None,
    ) -> Sequence[Document]:
        """The documents in the strategy's order (see the module doc for the metadata)."""
        check_query(query, type(self).__name__)
        docs = check_documents(documents)
        if not docs:
            return []
        return annotate(docs, self._order(docs, query), self.strategy_name, self.metadata_key)

    async def acompress_documents(
        self,
        documents: Sequence[Document],
        query: str,
        callbacks: Callbacks | None = None,
    ) -> Sequence[Document]:
        """``compress_documents`` in an executor thread (the model calls are blocking)."""
        return await run_in_executor(None, self.compress_documents, documents, query, callbacks)

    def _passages(self, docs: list[Document]) -> list[Passage]:
        return [to_passage(d, self.title_key) for d in docs]

    @abstractmethod
    def _order(self, docs: list[Document], query: str) -> core.Reordering:
        """The new order, and a score and extras per input document."""


class _Scored(_Reorder, ScorerOptions):
    """A compressor that scores with a model given as ``scorer=``."""

    _scorer: LazyModel[Any] | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _resolve_scorer(self) -> _Scored:
        if self.scorer is not None or self._needs_scorer():
            self._scorer = resolve_scorer(self.scorer, self.scorer_kwargs)
        elif self.scorer_kwargs:
            raise ValueError("`scorer_kwargs` needs a `scorer` spec string")
        return self

    def _needs_scorer(self) -> bool:
        return True

    @property
    def scorer_holder(self) -> LazyModel[Any] | None:
        """The scorer as held, loaded or not (``None`` without one): checks attach here."""
        return self._scorer

    @property
    def core_scorer(self) -> Any:
        """The scorer (a spec string is loaded on first access and kept)."""
        if self._scorer is None:
            return None
        return self._scorer.get()


class TableReorder(_Scored):
    """A compressor built from its row of the strategy table (see :func:`table_compressor`).

    The options are the row's ``option_model`` (the core function's keywords), checked at
    construction by the row's ``check``; the record extras are the row's ``record_keys``.
    """

    row: ClassVar[StrategySpec]
    _embedder: LazyModel[Any] | None = PrivateAttr(default=None)

    def _needs_scorer(self) -> bool:
        return "scorer" in self.row.needs

    @model_validator(mode="after")
    def _check_row(self) -> TableReorder:
        if self.row.check is not None:
            for name, value in self.row.check(self.core_options()).items():
                setattr(self, name, value)  # e.g. a profile file, read now
        return self

    def core_options(self) -> dict[str, Any]:
        """The options the core function receives (this compressor's values)."""
        return {name: getattr(self, name) for name in self.row.option_model.model_fields}

    def _order(self, docs: list[Document], query: str) -> core.Reordering:
        return core.reordering(
            self.row,
            query,
            self._passages(docs),
            self._scorer,
            embedder=self._embedder,
            **self.core_options(),
        )


class EmbeddingTableReorder(TableReorder, EmbeddingsFields):
    """A table compressor whose row may also embed: ``SelectAndPlace``'s ``similar=`` needs
    ``embeddings=`` (LangChain ``Embeddings``, ``'embedded'``, or an ``Embedder``)."""

    @model_validator(mode="after")
    def _resolve_embeddings(self) -> EmbeddingTableReorder:
        needed = "`similar`" if getattr(self, "similar", 0) else None
        self._embedder = self.resolve_embeddings(needed)
        return self


def table_compressor(component: str) -> type[TableReorder]:
    """The document compressor of the strategy table's row whose ``component`` is
    ``component``; its options and defaults are the core function's."""
    embeds = "embedder" in core.component_row(component).uses
    return core.table_class(
        EmbeddingTableReorder if embeds else TableReorder, component, __name__, _USE
    )


_USE = """A LangChain ``BaseDocumentCompressor``: in ``ContextualCompressionRetriever`` or
through ``compress_documents(documents, query)``; it returns copies of the documents
in the new order, each with ``metadata["rag_position"]`` (see the module doc).

Example:
    >>> reorder = {name}(scorer="embedded")
    >>> docs = reorder.compress_documents(retrieved, "Who wrote Hamlet?")"""

LikelihoodReorder = table_compressor("LikelihoodReorder")
ConvexScoreReorder = table_compressor("ConvexScoreReorder")
PassageLikelihoodReorder = table_compressor("PassageLikelihoodReorder")
SelectAndPlace = table_compressor("SelectAndPlace")


class ProfileReorder(_Scored, ProfileOptions):
    """Profile placement: the most relevant document where this model reads best, and so on.

    ``profile`` is the model's ``PositionProfile`` (or its JSON file, read at
    construction, or a list of numbers per position), e.g. from
    ``rag_position.strategies.estimate_profile``. Relevance, first available:
    ``metadata[score_key]`` (every document needs it); with a ``scorer``, by
    ``relevance``: ``"passage_likelihood"`` (the default: the query's mean
    log-likelihood after each document alone, N short prompts, about one full prompt of
    tokens) or ``"convex_score"`` (ConvexScore, N full prompts; ``convex_options`` go to
    ``convex_score`` and need this relevance); else the given order (first most
    relevant). Passage likelihood is the default because on the embedded model it
    identified the gold document 89% of the time, ConvexScore with one base order 25%.
    ``metadata[...]["score"]`` is the relevance used (``None`` for the given order),
    ``["relevance"]`` says which.

    Example:
        >>> profile = PositionProfile([0.17, 0.12, 0.40], model_name="embedded", source="eval")
        >>> docs = ProfileReorder(profile=profile).compress_documents(retrieved, "Who?")
        >>> [d.metadata["rag_position"]["original_rank"] for d in docs]   # best read last
        [1, 2, 0]
    """

    strategy_name: ClassVar[str] = "profile"

    def _needs_scorer(self) -> bool:
        return False

    @model_validator(mode="after")
    def _check_options(self) -> ProfileReorder:
        self.profile = as_profile(vars(self)["profile"])
        core.check_profile_options(self.score_key, self.scorer, self.convex_options, self.relevance)
        return self

    def _order(self, docs: list[Document], query: str) -> core.Reordering:
        scores = None if self.score_key is None else metadata_scores(docs, self.score_key)
        return core.profile_reordering(
            query,
            self._passages(docs),
            self.profile,
            scores=scores,
            scorer=self._scorer,
            convex_options=self.convex_options,
            score_key=self.score_key,
            relevance=self.relevance,
        )


class EdgeReorder(_Reorder, EdgeOptions):
    """Edge placement ("Lost in the Middle"): the most relevant documents at both ends.

    No model. Relevance is ``metadata[score_key]`` (e.g. ``"relevance_score"``; a
    document without it counts as least relevant) or, with ``score_key=None``, the
    given order (first most relevant). ``mode`` picks whose rule to reproduce:
    ``"langchain"`` (``LongContextReorder``, the default), ``"llamaindex"`` or
    ``"haystack"`` (with its ``top_k``/``word_count_threshold``, which drop
    documents). The query is not used. ``metadata[...]["score"]`` is the score used.

    Example:
        >>> docs = EdgeReorder().compress_documents(retrieved, "any query")
        >>> [d.metadata["rag_position"]["original_rank"] for d in docs]
        [0, 2, 4, 3, 1]
    """

    strategy_name: ClassVar[str] = "edge"

    @model_validator(mode="after")
    def _check_mode(self) -> EdgeReorder:
        core.check_edge_options(self.mode, self.top_k, self.word_count_threshold)
        return self

    def _order(self, docs: list[Document], query: str) -> core.Reordering:
        return edge_order(self, docs)


def edge_order(component: Any, docs: list[Document]) -> core.Reordering:
    """Edge placement of ``docs`` with ``component``'s options and ``metadata[score_key]``."""
    key = component.score_key
    return core.edge_reordering(
        [to_passage(d, component.title_key) for d in docs],
        scores=None if key is None else metadata_scores(docs, key),
        mode=component.mode,
        top_k=component.top_k,
        word_count_threshold=component.word_count_threshold,
    )


class GivenOrder(TableReorder):
    """The retriever's order, unchanged: the ``retriever`` row, which a tuned file may choose.

    No model. Each document gets the record (``score`` ``None``, ``rank`` equal to
    ``original_rank``, ``strategy`` ``"retriever"``), as the other compressors write it.
    Made by :func:`from_tuned`.
    """

    row: ClassVar[StrategySpec] = STRATEGIES["retriever"]
    strategy_name: ClassVar[str] = "retriever"


def from_tuned(
    tuned: TunedLike, scorer: Any = None, *, trust_spec: bool = False, **options: Any
) -> BaseDocumentCompressor:
    """The compressor a tuned file chose (``rag-position tune --out tuned.json``).

    ``tuned``: the file's path (read and checked now: ``rag_position.read_tuned``'s
    errors name the file and what is wrong) or a ``rag_position.TunedChoice``. The
    compressor is the file's strategy's (``passage_likelihood`` ->
    :class:`PassageLikelihoodReorder`, ``retriever`` -> :class:`GivenOrder`...) with the
    file's options and profile; ``options`` add framework-side ones (``metadata_key``,
    ``title_key``, ``scorer_kwargs``), and one the file sets to another value is an error.
    ``scorer``: used when the strategy scores (else ignored); ``None`` loads the file's
    own model spec (with its dtype) on first use: a packaged model's (``embedded``), or an
    ``openai:`` or ``hf:`` one only with ``trust_spec=True`` (a file's server would receive
    the questions, passages and API key; an ``hf:`` hub name then loads from the local
    cache only), else a ``ModelSpecError`` now. A scorer whose model has another name
    than the file's gives a ``UserWarning`` naming both (at construction for a model
    object, when loaded for a spec string other than the file's).

    Example:
        >>> reorder = from_tuned("tuned.json")
        >>> docs = reorder.compress_documents(retrieved, "Who wrote Hamlet?")
    """
    made: BaseDocumentCompressor = core.build_tuned(
        globals(), tuned, scorer, trust_spec=trust_spec, options=options
    )
    return made


__all__ = [  # GivenOrder (the tuned `retriever` row) stays importable from here only
    "ConvexScoreReorder",
    "EdgeReorder",
    "LikelihoodReorder",
    "PassageLikelihoodReorder",
    "ProfileReorder",
    "SelectAndPlace",
    "from_tuned",
]
