"""Node postprocessors: where each retrieved node goes in the prompt.

:class:`LikelihoodReorder` (likelihood selection), :class:`ConvexScoreReorder`
(ConvexScore gold-first placement), :class:`ProfileReorder` (placement by a model's
position profile) and :class:`EdgeReorder` (edge placement; ``mode="llamaindex"`` is
``LongContextReorder`` exactly). Each returns the nodes it was given, in a new order,
with what it found written under one metadata key (``"rag_position"``). Async comes
through the base class (``apostprocess_nodes`` runs ``_postprocess_nodes`` in a thread).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from llama_index.core.bridge.pydantic import Field, PrivateAttr, field_serializer
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.postprocessor.rag_position._nodes import (
    METADATA_KEY,
    check_nodes,
    node_passage,
    question_of,
    reorder_nodes,
)
from llama_index.postprocessor.rag_position.adapters import ModelSlot, resolve_scorer

from rag_position.models import Scorer
from rag_position.strategies import (
    PositionProfile,
    convex_score,
    edge_reorder,
    likelihood_selection,
    profile_reorder,
)

Ordered = tuple[list[int], list[float | None] | None, list[dict[str, Any]] | None]
"""What a reorderer computes: the new order, a score per input node, extras per input node."""


class _RagPositionReorder(BaseNodePostprocessor):
    """Shared behaviour: input checks, the metadata key, never mutating anything."""

    strategy_name: ClassVar[str] = ""

    metadata_key: str | None = Field(
        default=METADATA_KEY,
        description=(
            "Node metadata key for {'strategy', 'score', 'rank', 'original_rank'} on copied "
            "nodes (kept out of LLM and embedding text); None: return the caller's own "
            "NodeWithScore objects, reordered, with nothing written."
        ),
    )
    title_key: str | None = Field(
        default="title",
        description=(
            "Node metadata key holding the passage title used in scoring prompts "
            "('Document [i](Title: ...)'); None or a missing key: no title."
        ),
    )

    def __init__(self, **data: Any) -> None:
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
        if not items:
            return []
        order, scores, extras = self._order(items, query_bundle)
        return reorder_nodes(
            items,
            order,
            strategy=self.strategy_name,
            metadata_key=self.metadata_key,
            scores=scores,
            extras=extras,
            replace_score=bool(getattr(self, "replace_score", False)),
        )

    def _order(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None) -> Ordered:
        raise NotImplementedError


class _ScoringReorder(_RagPositionReorder):
    """A reorderer that scores question likelihoods with a ``scorer``."""

    scorer: Any = Field(
        description=(
            "What scores question likelihoods: a load_model spec ('embedded', 'hf:<path>', "
            "'openai:<url>'; loaded on first use, once per postprocessor), a rag-position "
            "Scorer, a RagPositionLLM, or an OpenAI-compatible LlamaIndex LLM (OpenAILike) at a "
            "server returning prompt log-probabilities."
        ),
    )
    scorer_kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description="Keyword arguments for load_model when `scorer` is a spec string.",
    )
    seed: int = Field(default=0, description="Seed of the random orders the strategy scores.")
    query_aware: bool = Field(
        default=False,
        description="Score with the query-aware prompt (question before and after the passages).",
    )
    template: str | None = Field(
        default=None,
        description="A custom QA template with {question} and {search_results} to score with.",
    )
    _scorer: ModelSlot[Scorer] = PrivateAttr()

    def _setup(self) -> None:
        """Check the scorer now (a clear TypeError if it cannot score); specs load on first use."""
        self._scorer = resolve_scorer(self.scorer, self.scorer_kwargs)

    @field_serializer("scorer")
    def _serialize_scorer(self, scorer: Any) -> str:
        return scorer if isinstance(scorer, str) else f"<{type(scorer).__name__}>"

    @property
    def loaded_scorer(self) -> Scorer:
        """The scorer in use (a spec string is loaded now if it was not yet)."""
        return self._scorer.get()


class LikelihoodReorder(_ScoringReorder):
    """Likelihood selection: the candidate order under which the question is most likely.

    Scores ``n_orders`` seeded candidate orders (the retriever's order among them by
    default, so it is kept unless another order beats it) in one batched call and
    returns the nodes in the winning order. Per-node ``score`` in the metadata is
    ``None``; ``question_loglik`` holds the winning order's mean log-likelihood.

    Example:
        >>> reorder = LikelihoodReorder(scorer="embedded", n_orders=4)
        >>> engine = index.as_query_engine(node_postprocessors=[reorder])
    """

    strategy_name: ClassVar[str] = "likelihood_selection"

    n_orders: int | None = Field(
        default=None, ge=1, description="Candidate orders to score (default: one per node)."
    )
    include_given: bool = Field(
        default=True, description="Make the retriever's order the first candidate."
    )

    @classmethod
    def class_name(cls) -> str:
        """The LlamaIndex serialisation name."""
        return "RagPositionLikelihoodReorder"

    def _order(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None) -> Ordered:
        question = question_of(query_bundle, type(self).__name__)
        if len(nodes) < 2:
            return list(range(len(nodes))), None, None
        result = likelihood_selection(
            question,
            [node_passage(n, self.title_key) for n in nodes],
            self._scorer.get(),
            n_orders=self.n_orders,
            seed=self.seed,
            include_given=self.include_given,
            template=self.template,
            query_aware=self.query_aware,
        )
        assert result.best is not None
        loglik = float(result.scores[result.best])
        return result.order, None, [{"question_loglik": loglik} for _ in nodes]


class ConvexScoreReorder(_ScoringReorder):
    """ConvexScore: find the gold node by how the question's likelihood bends with position.

    N rotations of one seeded order put every node at every position once (N scoring
    passes for N nodes); the node whose likelihood curve rises most at the two ends
    is the gold candidate and goes first (``placement="first"``, the paper), last, or
    to a position profile's best slot (``placement="profile"`` with ``profile=``).
    The metadata ``score`` is each node's ConvexScore, ``gold`` marks the candidate.

    Example:
        >>> reorder = ConvexScoreReorder(scorer="embedded")
        >>> engine = index.as_query_engine(node_postprocessors=[reorder])
    """

    strategy_name: ClassVar[str] = "convex_score"

    placement: Literal["first", "last", "profile"] = Field(
        default="first", description="Where the gold candidate goes."
    )
    rest: Literal["keep", "scores"] | None = Field(
        default=None,
        description=(
            "The other nodes: 'keep' their order, or follow their 'scores' (default: keep for "
            "first/last, scores for profile)."
        ),
    )
    profile: Any = Field(
        default=None,
        description="A PositionProfile, its JSON file, or a list of values (placement='profile').",
    )
    n_base_orders: int = Field(default=1, ge=1, description="Seeded base orders (R·N passes).")
    n_orders: int | None = Field(
        default=None, ge=1, description="Rotations scored per base order (default: N)."
    )
    variant: Literal["convex", "authors"] = Field(
        default="convex", description="'convex' (edge + curvature) or the authors' +/-LL score."
    )
    design: Literal["rotations", "authors"] = Field(
        default="rotations", description="N rotations, or the authors' N shuffles x N rotations."
    )
    edge_weight: float = Field(default=1.0, description="Weight of the edge term E(d).")
    curvature_weight: float = Field(default=1.0, description="Weight of the curvature term C(d).")
    replace_score: bool = Field(
        default=False,
        description="Set NodeWithScore.score to the ConvexScore (default: keep the retriever's).",
    )
    _profile: PositionProfile | None = PrivateAttr(default=None)

    @classmethod
    def class_name(cls) -> str:
        """The LlamaIndex serialisation name."""
        return "RagPositionConvexScoreReorder"

    def _setup(self) -> None:
        """Check the scorer and the profile now."""
        if (self.placement == "profile") != (self.profile is not None):
            raise ValueError("ConvexScoreReorder: pass `profile` exactly when placement='profile'")
        for name in ("edge_weight", "curvature_weight"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"ConvexScoreReorder: `{name}` must be a finite number")
        self._profile = None if self.profile is None else as_position_profile(self.profile)
        super()._setup()

    @field_serializer("profile")
    def _serialize_profile(self, profile: Any) -> Any:
        return _profile_to_json(profile)

    def _order(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None) -> Ordered:
        question = question_of(query_bundle, type(self).__name__)
        if len(nodes) < 2:
            return list(range(len(nodes))), None, None
        result = convex_score(
            question,
            [node_passage(n, self.title_key) for n in nodes],
            self._scorer.get(),
            n_base_orders=self.n_base_orders,
            n_orders=self.n_orders,
            seed=self.seed,
            design=self.design,
            edge_weight=self.edge_weight,
            curvature_weight=self.curvature_weight,
            variant=self.variant,
            placement=self.placement,
            rest=self.rest,
            profile=self._profile,
            template=self.template,
            query_aware=self.query_aware,
        )
        extras = [{"gold": i == result.gold} for i in range(len(nodes))]
        return result.order, list(result.scores), extras


class ProfileReorder(_RagPositionReorder):
    """Profile placement: the most relevant node where this model reads best, and so on down.

    Each model has its own position curve (the embedded SmolLM2 reads the LAST slot
    best), saved as a :class:`~rag_position.strategies.PositionProfile`. Relevance,
    first available: ConvexScore when a ``scorer`` is given; the retriever's scores
    when every node has one; else the retriever's order. No scorer: no model calls.

    Example:
        >>> reorder = ProfileReorder(profile=[0.17, 0.12, 0.40])     # or a profile JSON file
        >>> engine = index.as_query_engine(node_postprocessors=[reorder])
    """

    strategy_name: ClassVar[str] = "profile"

    profile: Any = Field(
        description="A PositionProfile, its JSON file, or a list of values per position.",
    )
    scorer: Any = Field(
        default=None,
        description=(
            "Optional: rank nodes by ConvexScore with this scorer (a load_model spec, a "
            "rag-position Scorer, a RagPositionLLM or an OpenAI-compatible LlamaIndex LLM)."
        ),
    )
    scorer_kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description="Keyword arguments for load_model when `scorer` is a spec string.",
    )
    seed: int = Field(default=0, description="ConvexScore's seed (with a scorer).")
    n_base_orders: int = Field(default=1, ge=1, description="ConvexScore's base orders.")
    query_aware: bool = Field(default=False, description="Score with the query-aware prompt.")
    replace_score: bool = Field(
        default=False,
        description="Set NodeWithScore.score to the relevance used (default: the retriever's).",
    )
    _profile: PositionProfile = PrivateAttr()
    _scorer: ModelSlot[Scorer] | None = PrivateAttr(default=None)

    @classmethod
    def class_name(cls) -> str:
        """The LlamaIndex serialisation name."""
        return "RagPositionProfileReorder"

    def _setup(self) -> None:
        """Load the profile and check the scorer now."""
        self._profile = as_position_profile(self.profile)
        if self.scorer is not None:
            self._scorer = resolve_scorer(self.scorer, self.scorer_kwargs)
        elif self.scorer_kwargs:
            raise ValueError("ProfileReorder: `scorer_kwargs` need a `scorer` spec string")

    @field_serializer("profile")
    def _serialize_profile(self, profile: Any) -> Any:
        return _profile_to_json(profile)

    @field_serializer("scorer")
    def _serialize_scorer(self, scorer: Any) -> str | None:
        if scorer is None or isinstance(scorer, str):
            return scorer
        return f"<{type(scorer).__name__}>"

    def _order(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None) -> Ordered:
        options: dict[str, Any] = {}
        if self._scorer is not None:
            question = question_of(query_bundle, type(self).__name__)
            options = {
                "scorer": self._scorer.get(),
                "seed": self.seed,
                "n_base_orders": self.n_base_orders,
                "query_aware": self.query_aware,
            }
        else:
            # Without a scorer the question is not used; the core still wants a string.
            query = None if query_bundle is None else query_bundle.query_str
            question = query if query and query.strip() else "(no query)"
        result = profile_reorder(
            question,
            [node_passage(n, self.title_key) for n in nodes],
            profile=self._profile,
            **options,
        )
        source = result.details.get("relevance", "order")
        scores: list[float | None] | None = list(result.scores) if result.scores else None
        return result.order, scores, [{"relevance": source} for _ in nodes]


class EdgeReorder(_RagPositionReorder):
    """Edge placement ("Lost in the Middle"): the most relevant nodes at both ends.

    ``mode="haystack"`` (default): the most relevant node first, the second last, the
    third second, ... whatever the count, ranking by the retriever's scores (stable,
    missing scores last) or, with ``use_scores=False``, by the given order.
    ``mode="llamaindex"``: exactly ``LongContextReorder`` (ascending stable sort with a
    missing score counted as 0, alternating ends: the most relevant lands first with an
    odd count, LAST with an even one). ``mode="langchain"``: LangChain's
    ``LongContextReorder``. No query, no model.

    Example:
        >>> reorder = EdgeReorder()                       # EdgeReorder(mode="llamaindex"): parity
        >>> engine = index.as_query_engine(node_postprocessors=[reorder])
    """

    strategy_name: ClassVar[str] = "edge"

    mode: Literal["haystack", "llamaindex", "langchain"] = Field(
        default="haystack",
        description=(
            "'haystack': most relevant first, second last, for any count; 'llamaindex': "
            "LlamaIndex's LongContextReorder exactly; 'langchain': LangChain's."
        ),
    )
    use_scores: bool = Field(
        default=True,
        description=(
            "haystack/langchain: rank by the retriever's scores where any node has one "
            "(else by the given order); ignored by 'llamaindex', which always uses scores."
        ),
    )

    @classmethod
    def class_name(cls) -> str:
        """The LlamaIndex serialisation name."""
        return "RagPositionEdgeReorder"

    def _order(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None) -> Ordered:
        if self.mode == "llamaindex":
            result = edge_reorder(nodes, mode="llamaindex")  # reads each NodeWithScore.score
        else:
            own = [n.score for n in nodes]
            use = self.use_scores and any(s is not None for s in own)
            result = edge_reorder(nodes, scores=own if use else None, mode=self.mode)
        scores: list[float | None] | None = list(result.scores) if result.scores else None
        return result.order, scores, None


def as_position_profile(profile: Any) -> PositionProfile:
    """A :class:`PositionProfile` from a profile, the path of its JSON file, or a list of values.

    Example:
        >>> as_position_profile([0.17, 0.12, 0.40]).ranking()
        [2, 0, 1]
    """
    if isinstance(profile, PositionProfile):
        return profile
    if isinstance(profile, (str, os.PathLike)):
        return PositionProfile.load(profile)
    if isinstance(profile, Sequence) and not isinstance(profile, bytes):
        values = list(profile)
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            raise TypeError(f"a profile given as a list must hold numbers, got {values!r}")
        return PositionProfile(tuple(float(v) for v in values), source="eval")
    raise TypeError(
        "`profile` must be a PositionProfile, the path of its JSON file, or a list of "
        f"values per position; got {type(profile).__name__}"
    )


def _profile_to_json(profile: Any) -> Any:
    if isinstance(profile, PositionProfile):
        return profile.to_dict()
    if isinstance(profile, os.PathLike):
        return os.fspath(profile)
    return profile
