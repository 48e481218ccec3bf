"""Node postprocessors: where each retrieved node goes in the prompt.

:class:`LikelihoodReorder` (likelihood selection), :class:`ConvexScoreReorder`
(ConvexScore gold-first placement), :class:`PassageLikelihoodReorder` (each node
alone scored, the top one first), :class:`ProfileReorder` (placement by a model's
position profile) and :class:`EdgeReorder` (edge placement; ``mode="llamaindex"`` is
``LongContextReorder`` exactly). Each returns the nodes it was given, in a new order,
with what it found written under one metadata key (``"rag_position"``): the record of
:func:`rag_position._integration.reorder_record`, ``{"strategy", "score", "rank",
"original_rank", **extras}``, the same keys the LangChain compressors write. Option
names and defaults are the core strategy functions' (:mod:`rag_position._integration`).
Async comes through the base class (``apostprocess_nodes`` runs ``_postprocess_nodes``
in a thread).
"""

from __future__ import annotations

from typing import Any, ClassVar

from llama_index.core.bridge.pydantic import Field, PrivateAttr, field_serializer
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.postprocessor.rag_position._nodes import (
    check_nodes,
    node_passage,
    query_of,
    question_of,
    reorder_nodes,
)
from llama_index.postprocessor.rag_position.adapters import EmbedModelFields, resolve_scorer

from rag_position import _integration as core
from rag_position._integration import (
    EdgeOptions,
    LazyModel,
    ProfileOptions,
    ReorderOptions,
    ScorerOptions,
    profile_to_json,
)
from rag_position.models import Embedder, Scorer
from rag_position.passages import Passage
from rag_position.strategies import STRATEGIES, PositionProfile, StrategySpec
from rag_position.strategies.profiles import as_profile
from rag_position.tuned import TunedLike


class _RagPositionReorder(BaseNodePostprocessor, ReorderOptions):
    """Shared behaviour: input checks, the metadata key, never mutating anything."""

    strategy_name: ClassVar[str] = ""

    def __init__(self, **data: Any) -> None:
        core.check_option_names(type(self).__name__, data, type(self).model_fields)
        super().__init__(**data)
        # After pydantic's validation, so our errors (ModelSpecError, TypeError) reach the
        # caller as they are instead of wrapped in a ValidationError.
        self._setup()

    def _setup(self) -> None:
        """Check and resolve what the fields name (models, profiles)."""

    def _postprocess_nodes(
        self,
        nodes: list[NodeWithScore],
        query_bundle: QueryBundle | None = None,
    ) -> list[NodeWithScore]:
        items = check_nodes(nodes, type(self).__name__)
        query_of(query_bundle, type(self).__name__)  # a clear TypeError for a malformed query
        if not items:
            return []
        return reorder_nodes(
            items,
            self._order(items, query_bundle),
            strategy=self.strategy_name,
            metadata_key=self.metadata_key,
            replace_score=bool(getattr(self, "replace_score", False)),
        )

    def _passages(self, nodes: list[NodeWithScore]) -> list[Passage]:
        return [node_passage(n, self.title_key) for n in nodes]

    def _order(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None
    ) -> core.Reordering:
        raise NotImplementedError


def _serialize_model(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return f"<{type(value).__name__}>"


class _ScoringReorder(_RagPositionReorder, ScorerOptions):
    """A reorderer that scores question likelihoods with a ``scorer``."""

    _scorer: LazyModel[Scorer] | None = PrivateAttr(default=None)

    def _setup(self) -> None:
        """Check the scorer now (a clear TypeError if it cannot score); specs load on first use."""
        self._scorer = resolve_scorer(self.scorer, self.scorer_kwargs)

    @field_serializer("scorer")
    def _serialize_scorer(self, scorer: Any) -> str | None:
        return _serialize_model(scorer)

    @property
    def scorer_holder(self) -> LazyModel[Scorer] | None:
        """The scorer as held, loaded or not (``None`` without one): checks attach here."""
        return self._scorer

    @property
    def core_scorer(self) -> Scorer | None:
        """The scorer in use (a spec string is loaded now if it was not yet)."""
        return None if self._scorer is None else self._scorer.get()


class TableReorder(_ScoringReorder):
    """A postprocessor built from its row of the strategy table (see :func:`table_postprocessor`).

    The options are the row's ``option_model`` (the core function's keywords), checked at
    construction by the row's ``check``; the record extras are the row's ``record_keys``.
    """

    row: ClassVar[StrategySpec]

    replace_score: bool = Field(
        default=False,
        description="Set NodeWithScore.score to the strategy's score (default: the retriever's).",
    )
    _resolved: dict[str, Any] = PrivateAttr(default_factory=dict)
    _embedder: LazyModel[Embedder] | None = PrivateAttr(default=None)

    @classmethod
    def class_name(cls) -> str:
        """The LlamaIndex serialisation name."""
        return "RagPosition" + cls.__name__

    def _setup(self) -> None:
        """Check the options (a profile file is read now) and the scorer."""
        if self.row.check is not None:
            self._resolved = self.row.check(self._own_options())
        if self.scorer is not None or "scorer" in self.row.needs:
            super()._setup()
        elif self.scorer_kwargs:
            raise ValueError(f"{type(self).__name__}: `scorer_kwargs` need a `scorer` spec string")

    @field_serializer("profile", check_fields=False)
    def _serialize_profile(self, profile: Any) -> Any:
        return profile_to_json(profile)

    def _own_options(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.row.option_model.model_fields}

    def core_options(self) -> dict[str, Any]:
        """The options the core function receives (a profile resolved)."""
        return {**self._own_options(), **self._resolved}

    def _order(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None
    ) -> core.Reordering:
        return core.reordering(
            self.row,
            question_of(query_bundle, type(self).__name__),
            self._passages(nodes),
            self._scorer,
            embedder=self._embedder,
            **self.core_options(),
        )


class EmbeddingTableReorder(TableReorder, EmbedModelFields):
    """A table postprocessor whose row may also embed: ``SelectAndPlace``'s ``similar=``
    needs ``embed_model=`` (a LlamaIndex ``BaseEmbedding``, ``'embedded'``, or an
    ``Embedder``)."""

    def _setup(self) -> None:
        """Check the options, the scorer and the embed_model (specs load on first use)."""
        super()._setup()
        self._embedder = self.resolve_embed_model(
            "`similar`" if getattr(self, "similar", 0) else None
        )


def table_postprocessor(component: str) -> type[TableReorder]:
    """The node postprocessor of the strategy table's row whose ``component`` is
    ``component``; its options and defaults are the core function's."""
    embeds = "embedder" in core.component_row(component).uses
    return core.table_class(
        EmbeddingTableReorder if embeds else TableReorder, component, __name__, _USE
    )


_USE = """A LlamaIndex ``BaseNodePostprocessor``: in ``node_postprocessors=[...]`` of a query
engine, or through ``postprocess_nodes(nodes, query_str=...)``; it returns the nodes in
the new order, with ``metadata["rag_position"]`` (see the module doc).

Example:
    >>> reorder = {name}(scorer="embedded")
    >>> engine = index.as_query_engine(node_postprocessors=[reorder])"""

LikelihoodReorder = table_postprocessor("LikelihoodReorder")
ConvexScoreReorder = table_postprocessor("ConvexScoreReorder")
PassageLikelihoodReorder = table_postprocessor("PassageLikelihoodReorder")
SelectAndPlace = table_postprocessor("SelectAndPlace")


class ProfileReorder(_ScoringReorder, ProfileOptions):
    """Profile placement: the most relevant node where this model reads best, and so on down.

    Each model has its own position curve (the embedded SmolLM2 reads the LAST slot
    best), saved as a :class:`~rag_position.strategies.PositionProfile`. Relevance,
    first available: ``metadata[score_key]``; with a ``scorer``, by ``relevance``:
    ``"passage_likelihood"`` (the default: the question's mean log-likelihood after
    each node alone, N short prompts, about one full prompt of tokens) or
    ``"convex_score"`` (ConvexScore, N full prompts; ``convex_options`` go to
    ``convex_score`` and need this relevance); the retriever's scores when every node
    has one; else the retriever's order. No scorer: no model calls. A NaN
    ``NodeWithScore.score`` (read without ``score_key`` and ``scorer``, from two nodes
    on) is a ``ValueError`` naming the node: ``None`` is a missing score. Passage likelihood
    is the default because on the embedded model it identified the gold node 89% of
    the time, ConvexScore with one base order 25%.

    Example:
        >>> reorder = ProfileReorder(profile=[0.17, 0.12, 0.40])     # or a profile JSON file
        >>> engine = index.as_query_engine(node_postprocessors=[reorder])
    """

    strategy_name: ClassVar[str] = "profile"

    replace_score: bool = Field(
        default=False,
        description="Set NodeWithScore.score to the relevance used (default: the retriever's).",
    )
    _profile: PositionProfile = PrivateAttr()

    @classmethod
    def class_name(cls) -> str:
        """The LlamaIndex serialisation name."""
        return "RagPositionProfileReorder"

    def _setup(self) -> None:
        """Load the profile and check the scorer now."""
        self._profile = as_profile(self.profile)
        core.check_profile_options(self.score_key, self.scorer, self.convex_options, self.relevance)
        if self.scorer is not None:
            super()._setup()
        elif self.scorer_kwargs:
            raise ValueError("ProfileReorder: `scorer_kwargs` need a `scorer` spec string")

    @field_serializer("profile")
    def _serialize_profile(self, profile: Any) -> Any:
        return profile_to_json(profile)

    def _order(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None
    ) -> core.Reordering:
        key = self.score_key
        question = query_of(query_bundle, type(self).__name__)
        if self._scorer is not None:
            question = question_of(query_bundle, type(self).__name__)
        elif key is None:  # the retriever's scores are the relevance
            _refuse_nan_scores(nodes)
        return core.profile_reordering(
            question,
            self._passages(nodes),
            self._profile,
            scores=None if key is None else _metadata_scores(nodes, key),
            scorer=self._scorer,
            convex_options=self.convex_options,
            score_key=key,
            relevance=self.relevance,
        )


class EdgeReorder(_RagPositionReorder, EdgeOptions):
    """Edge placement ("Lost in the Middle"): the most relevant nodes at both ends.

    ``mode="langchain"`` (the default, the core's): LangChain's ``LongContextReorder``.
    ``mode="llamaindex"``: exactly LlamaIndex's ``LongContextReorder`` (ascending stable
    sort with a missing score counted as 0, alternating ends). ``mode="haystack"``: the
    most relevant node first, the second last, the third second, ... (with Haystack's
    ``top_k``/``word_count_threshold``, which drop nodes). Relevance:
    ``metadata[score_key]`` when given, else the retriever's scores (with
    ``use_scores``, where any node has one), else the given order. No query, no model.
    A NaN ``NodeWithScore.score``, where the retriever's scores are read (from two
    nodes on), is a ``ValueError`` naming the node: ``None`` is a missing score.

    Example:
        >>> reorder = EdgeReorder(mode="llamaindex")        # LongContextReorder parity
        >>> engine = index.as_query_engine(node_postprocessors=[reorder])
    """

    strategy_name: ClassVar[str] = "edge"

    use_scores: bool = Field(
        default=True,
        description=(
            "Without score_key: rank by the retriever's scores where any node has one (else "
            "by the given order); ignored by 'llamaindex', which always uses scores."
        ),
    )

    @classmethod
    def class_name(cls) -> str:
        """The LlamaIndex serialisation name."""
        return "RagPositionEdgeReorder"

    def _setup(self) -> None:
        """The Haystack options only with mode='haystack'."""
        core.check_edge_options(self.mode, self.top_k, self.word_count_threshold)

    def _order(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None
    ) -> core.Reordering:
        scores: list[float | None] | None = None
        if self.score_key is not None:
            scores = _metadata_scores(nodes, self.score_key)
        elif self.mode == "llamaindex":  # reads each passage's own score: the node's
            _refuse_nan_scores(nodes)
        elif self.use_scores:
            own = [n.score for n in nodes]
            _refuse_nan_scores(nodes)
            scores = own if any(s is not None for s in own) else None
        return core.edge_reordering(
            self._passages(nodes),
            scores=scores,
            mode=self.mode,
            top_k=self.top_k,
            word_count_threshold=self.word_count_threshold,
        )


def _refuse_nan_scores(nodes: list[NodeWithScore]) -> None:
    """``ValueError`` naming the first node whose retriever score is NaN (from two nodes
    on: a single node is returned as it is, its score unread)."""
    if len(nodes) >= 2:
        core.refuse_nan_scores([n.score for n in nodes], "nodes")


def _metadata_scores(nodes: list[NodeWithScore], key: str) -> list[float | None]:
    scores: list[float | None] = core.read_scores([n.node.metadata for n in nodes], key, "nodes")
    return scores


class GivenOrder(TableReorder):
    """The retriever's order, unchanged: the ``retriever`` row, which a tuned file may choose.

    No model. Each node gets the record (``score`` ``None``, ``rank`` equal to
    ``original_rank``, ``strategy`` ``"retriever"``), as the other postprocessors write it.
    Made by :func:`from_tuned`.
    """

    row: ClassVar[StrategySpec] = STRATEGIES["retriever"]
    strategy_name: ClassVar[str] = "retriever"


def from_tuned(
    tuned: TunedLike, scorer: Any = None, *, trust_spec: bool = False, **options: Any
) -> BaseNodePostprocessor:
    """The postprocessor a tuned file chose (``rag-position tune --out tuned.json``).

    ``tuned``: the file's path (read and checked now: ``rag_position.read_tuned``'s
    errors name the file and what is wrong) or a ``rag_position.TunedChoice``. The
    postprocessor is the file's strategy's (``passage_likelihood`` ->
    :class:`PassageLikelihoodReorder`, ``retriever`` -> :class:`GivenOrder`...) with the
    file's options and profile; ``options`` add framework-side ones (``metadata_key``,
    ``title_key``, ``replace_score``, ``scorer_kwargs``), and one the file sets to another
    value is an error. ``scorer``: used when the strategy scores (else ignored); ``None``
    loads the file's own model spec (with its dtype) on first use: a packaged model's
    (``embedded``), or an ``openai:`` or ``hf:`` one only with ``trust_spec=True`` (a
    file's server would receive the questions, passages and API key; an ``hf:`` hub name
    then loads from the local cache only), else a ``ModelSpecError`` now. A scorer whose model
    has another name than the file's gives a ``UserWarning`` naming both (at construction
    for a model object, when loaded for a spec string other than the file's).

    Example:
        >>> reorder = from_tuned("tuned.json")
        >>> engine = index.as_query_engine(node_postprocessors=[reorder])
    """
    made: BaseNodePostprocessor = core.build_tuned(
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
