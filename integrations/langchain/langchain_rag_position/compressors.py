"""Document compressors that reorder what a retriever returned (no document is dropped).

Each is a ``BaseDocumentCompressor``: it drops into ``ContextualCompressionRetriever``
(``langchain_classic.retrievers``) or, through ``compress_documents``, into any chain.
The query comes from the call. The returned documents are shallow copies of the
caller's, each with a new metadata dict holding ``metadata[METADATA_KEY]``::

    {"strategy": ..., "score": float | None, "rank": new position, "original_rank": old position}

``metadata_key=None`` returns the caller's very objects in the new order instead.
Inputs are never mutated; no documents in gives no documents out.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.runnables.config import run_in_executor
from pydantic import ConfigDict, Field, PrivateAttr, model_validator

from langchain_rag_position._adapters import (
    METADATA_KEY,
    LazyModel,
    annotate,
    check_documents,
    metadata_scores,
    resolve_scorer,
    to_passage,
)
from rag_position.strategies import (
    convex_score,
    edge_reorder,
    likelihood_selection,
    profile_reorder,
)
from rag_position.strategies.profiles import as_profile

EdgeMode = Literal["langchain", "llamaindex", "haystack"]


class _Reorder(BaseDocumentCompressor):
    """Shared plumbing: check the documents, ask the strategy for an order, annotate."""

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    metadata_key: str | None = Field(
        default=METADATA_KEY,
        description="Metadata key for the strategy's record; None writes nothing.",
    )

    strategy_name: ClassVar[str] = ""

    def compress_documents(
        self,
        documents: Sequence[Document],
        query: str,
        callbacks: Callbacks | None = None,
    ) -> Sequence[Document]:
        """The documents in the strategy's order (see the module doc for the metadata)."""
        docs = check_documents(documents)
        if not docs:
            return []
        order, scores = self._order(docs, query)
        return annotate(docs, order, scores, self.strategy_name, self.metadata_key)

    async def acompress_documents(
        self,
        documents: Sequence[Document],
        query: str,
        callbacks: Callbacks | None = None,
    ) -> Sequence[Document]:
        """``compress_documents`` in an executor thread (the model calls are blocking)."""
        return await run_in_executor(None, self.compress_documents, documents, query, callbacks)

    @abstractmethod
    def _order(
        self, docs: list[Document], query: str
    ) -> tuple[list[int], Sequence[float | None] | None]:
        """The new order (input indices) and a score per input document."""


class _Scored(_Reorder):
    """A compressor that scores with a model given as ``scorer=``."""

    scorer: Any = Field(
        default=None,
        description="A load_model spec, a Scorer, ChatRagPosition, or an OpenAI-compatible model.",
    )
    scorer_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="load_model keyword arguments (spec strings only)."
    )
    _scorer: LazyModel | None = PrivateAttr(default=None)

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
    def core_scorer(self) -> Any:
        """The scorer (a spec string is loaded on first access and kept)."""
        if self._scorer is None:
            return None
        return self._scorer.get()


class LikelihoodReorder(_Scored):
    """Likelihood selection: the order of the documents under which the query is most likely.

    Scores ``n_orders`` candidate orders (default: as many as documents; the given
    order is one of them when ``include_given``) by the query's mean log-likelihood
    after the documents, in one batched call, and keeps the best (Liu, Qi, He et al.).
    ``metadata["rag_position"]["score"]`` is that order's log-likelihood (the same on
    every document). Options go to ``rag_position.strategies.likelihood_selection``.

    Example:
        >>> reorder = LikelihoodReorder(scorer="embedded", n_orders=4)
        >>> docs = reorder.compress_documents(retrieved, "Who wrote Hamlet?")
    """

    strategy_name: ClassVar[str] = "likelihood_selection"
    n_orders: int | None = Field(default=None, ge=1, description="Candidate orders (default N).")
    seed: int = Field(default=0, description="Seed of the random candidate orders.")
    include_given: bool = Field(default=True, description="The given order is a candidate.")
    template: str | None = Field(default=None, description="A QA template to score with.")
    query_aware: bool = Field(default=False, description="Score with the query-aware prompt.")

    def _order(
        self, docs: list[Document], query: str
    ) -> tuple[list[int], Sequence[float | None] | None]:
        result = likelihood_selection(
            query,
            [to_passage(d) for d in docs],
            self.core_scorer,
            n_orders=self.n_orders,
            seed=self.seed,
            include_given=self.include_given,
            template=self.template,
            query_aware=self.query_aware,
        )
        best = None if result.best is None else result.scores[result.best]
        return result.order, [best] * len(docs)


class ConvexScoreReorder(_Scored):
    """ConvexScore: find the gold document by its likelihood curve and put it first.

    Rotations of a seeded base order put every document at every position; the
    document whose query likelihood rises most at the two ends is the gold one and
    moves to ``placement`` (``"first"``, the paper; ``"last"``; or ``"profile"``
    with ``profile=``), the others keep their order (``rest="keep"``) or follow
    their scores (``rest="scores"``). ``metadata[...]["score"]`` is each document's
    ConvexScore. Options go to ``rag_position.strategies.convex_score``.

    Example:
        >>> reorder = ConvexScoreReorder(scorer="embedded")
        >>> docs = reorder.compress_documents(retrieved, "Who wrote Hamlet?")
        >>> docs[0].metadata["rag_position"]["original_rank"]     # the gold candidate
        3
    """

    strategy_name: ClassVar[str] = "convex_score"
    n_base_orders: int = Field(default=1, ge=1, description="Seeded random base orders (R).")
    n_orders: int | None = Field(default=None, ge=1, description="Rotations per base (M <= N).")
    seed: int = Field(default=0, description="Seed of the base orders.")
    design: Literal["rotations", "authors"] = "rotations"
    edge_weight: float = 1.0
    curvature_weight: float = 1.0
    variant: Literal["convex", "authors"] = "convex"
    placement: Literal["first", "last", "profile"] = "first"
    rest: Literal["keep", "scores"] | None = None
    profile: Any = Field(default=None, description="A PositionProfile or its JSON path.")
    template: str | None = None
    query_aware: bool = False

    @model_validator(mode="after")
    def _check_profile(self) -> ConvexScoreReorder:
        if (self.placement == "profile") != (self.profile is not None):
            raise ValueError("pass `profile` exactly when placement='profile'")
        if self.profile is not None:
            self.profile = as_profile(self.profile)
        for name in ("edge_weight", "curvature_weight"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"`{name}` must be finite")
        return self

    def _order(
        self, docs: list[Document], query: str
    ) -> tuple[list[int], Sequence[float | None] | None]:
        result = convex_score(
            query,
            [to_passage(d) for d in docs],
            self.core_scorer,
            n_base_orders=self.n_base_orders,
            n_orders=self.n_orders,
            seed=self.seed,
            design=self.design,
            edge_weight=self.edge_weight,
            curvature_weight=self.curvature_weight,
            variant=self.variant,
            placement=self.placement,
            rest=self.rest,
            profile=self.profile,
            template=self.template,
            query_aware=self.query_aware,
        )
        return result.order, result.scores or None


class ProfileReorder(_Scored):
    """Profile placement: the most relevant document where this model reads best, and so on.

    ``profile`` is the model's ``PositionProfile`` (or its JSON file, read at
    construction), e.g. from ``rag_position.strategies.estimate_profile``. Relevance,
    first available: ``metadata[score_key]`` (every document needs it); ConvexScore
    when a ``scorer`` is given (``convex_options`` go to ``convex_score``); else the
    given order (first most relevant). ``metadata[...]["score"]`` is the relevance
    used (``None`` for the given order).

    Example:
        >>> profile = PositionProfile([0.17, 0.12, 0.40], model="embedded", source="eval")
        >>> docs = ProfileReorder(profile=profile).compress_documents(retrieved, "Who?")
        >>> [d.metadata["rag_position"]["original_rank"] for d in docs]   # best read last
        [1, 2, 0]
    """

    strategy_name: ClassVar[str] = "profile"
    profile: Any = Field(description="A PositionProfile or the path of its JSON file.")
    score_key: str | None = Field(default=None, description="Metadata key holding relevance.")
    convex_options: dict[str, Any] = Field(
        default_factory=dict, description="Options for convex_score (with a scorer)."
    )

    def _needs_scorer(self) -> bool:
        return False

    @model_validator(mode="after")
    def _check_options(self) -> ProfileReorder:
        self.profile = as_profile(self.profile)
        if self.score_key is not None and self.scorer is not None:
            raise ValueError("pass `score_key` or `scorer`, not both: each gives the relevance")
        if self.convex_options and self.scorer is None:
            raise ValueError("`convex_options` go to convex_score: pass a `scorer`")
        return self

    def _order(
        self, docs: list[Document], query: str
    ) -> tuple[list[int], Sequence[float | None] | None]:
        passages = [to_passage(d) for d in docs]
        if self.score_key is not None:
            scores = metadata_scores(docs, self.score_key)
            missing = [i for i, s in enumerate(scores) if s is None]
            if missing:
                raise ValueError(
                    f"documents {missing} have no {self.score_key!r} in their metadata; "
                    "profile placement needs a score for every document"
                )
            result = profile_reorder(
                query, passages, profile=self.profile, scores=[float(s or 0) for s in scores]
            )
        elif self._scorer is not None:
            result = profile_reorder(
                query,
                passages,
                profile=self.profile,
                scorer=self.core_scorer,
                **self.convex_options,
            )
        else:
            result = profile_reorder(query, passages, profile=self.profile)
        return result.order, result.scores or None


class EdgeReorder(_Reorder):
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
    mode: EdgeMode = "langchain"
    score_key: str | None = Field(default=None, description="Metadata key holding relevance.")
    top_k: int | None = Field(default=None, ge=1, description="Haystack: keep the first k.")
    word_count_threshold: int | None = Field(default=None, ge=1, description="Haystack option.")

    @model_validator(mode="after")
    def _check_mode(self) -> EdgeReorder:
        check_edge_options(self.mode, self.top_k, self.word_count_threshold)
        return self

    def _order(
        self, docs: list[Document], query: str
    ) -> tuple[list[int], Sequence[float | None] | None]:
        return edge_order(docs, self.mode, self.score_key, self.top_k, self.word_count_threshold)


def check_edge_options(mode: str, top_k: int | None, word_count_threshold: int | None) -> None:
    """The Haystack options only with ``mode="haystack"`` (the core's rule, at construction)."""
    if mode != "haystack" and (top_k is not None or word_count_threshold is not None):
        raise ValueError("`top_k` and `word_count_threshold` are Haystack options: mode='haystack'")


def edge_order(
    docs: list[Document],
    mode: EdgeMode,
    score_key: str | None,
    top_k: int | None,
    word_count_threshold: int | None,
) -> tuple[list[int], list[float | None] | None]:
    """``edge_reorder`` on the documents' text, with scores from ``metadata[score_key]``."""
    scores = None if score_key is None else metadata_scores(docs, score_key)
    result = edge_reorder(
        [to_passage(d) for d in docs],
        scores=scores,
        mode=mode,
        top_k=top_k,
        word_count_threshold=word_count_threshold,
    )
    used: list[float | None] | None = list(result.scores) if result.scores else None
    return result.order, used


__all__ = [
    "ConvexScoreReorder",
    "EdgeReorder",
    "LikelihoodReorder",
    "ProfileReorder",
]
