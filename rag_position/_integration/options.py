"""The options the integrations' components share, and their checks.

A reordering component's own options are its strategy row's
:attr:`~rag_position.strategies.StrategySpec.option_model`, generated from the core
function's signature; here are the framework-side ones every component adds
(:class:`ReorderOptions`, :class:`ScorerOptions`), those of the components that read
relevance from the framework's objects (:class:`ProfileOptions`, :class:`EdgeOptions`)
and of the answering ones (:class:`GeneratorOptions`, :class:`ReciteOptions`,
:class:`FactOptions`, :class:`MedoidOptions`).
"""

from __future__ import annotations

import inspect
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from rag_position.strategies import (
    STRATEGIES,
    PositionProfile,
    embedding_retrieve,
    fact,
    profile_reorder,
)
from rag_position.strategies._base import refuse_nan
from rag_position.strategies._options import option_model
from rag_position.strategies._profile_reorder import RELEVANCES, Relevance

METADATA_KEY = "rag_position"
"""The metadata key every reordering component writes by default (both integrations)."""


def defaults_of(function: Callable[..., Any]) -> dict[str, Any]:
    """A core function's keyword options and their defaults, from its signature."""
    return {
        p.name: p.default
        for p in inspect.signature(function).parameters.values()
        if p.default is not inspect.Parameter.empty
    }


PROFILE_DEFAULTS = defaults_of(profile_reorder)


def core_options(component: Any, function: Callable[..., Any], **override: Any) -> dict[str, Any]:
    """``component``'s attributes named like ``function``'s options, plus ``override``.

    Example:
        >>> likelihood_selection(q, passages, scorer, **core_options(self, likelihood_selection))
    """
    options = {
        name: getattr(component, name)
        for name in defaults_of(function)
        if name not in override and hasattr(component, name)
    }
    return {**options, **override}


class ReorderOptions(BaseModel):
    """What every reorderer takes: where to write its record, where a title is."""

    metadata_key: str | None = Field(
        default=METADATA_KEY,
        description=(
            "Metadata key for the record {'strategy', 'score', 'rank', 'original_rank', ...} on "
            "copies of the inputs; None: the caller's own objects, reordered, nothing written."
        ),
    )
    title_key: str | None = Field(
        default="title",
        description=(
            "Metadata key of the title shown in prompts ('Document [i](Title: ...)'); "
            "None or a missing or non-string value: no title."
        ),
    )


class ScorerOptions(BaseModel):
    """The model that scores question likelihoods."""

    scorer: Any = Field(
        default=None,
        description=(
            "A load_model spec ('embedded', 'hf:<path>', 'openai:<url>'; loaded on first use, "
            "once per component), a rag-position Scorer, our framework model wrapper, or an "
            "OpenAI-compatible framework model at a server returning prompt log-probabilities."
        ),
    )
    scorer_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="load_model keyword arguments (spec strings only)."
    )


class ProfileOptions(BaseModel):
    """``rag_position.strategies.profile_reorder``'s options (``scorer`` comes separately)."""

    profile: Any = Field(description="A PositionProfile, its JSON path, or a list of numbers.")
    score_key: str | None = Field(
        default=None,
        description="Metadata key holding relevance (None: the framework's own score, if any).",
    )
    relevance: Relevance = Field(
        default=PROFILE_DEFAULTS["relevance"],
        description=(
            "With a scorer: 'passage_likelihood' (each passage scored alone, about one "
            "prompt of tokens) or 'convex_score' (N full prompts)."
        ),
    )
    convex_options: dict[str, Any] = Field(
        default_factory=dict,
        description="Options for convex_score (with a scorer and relevance='convex_score').",
    )


class EdgeOptions(STRATEGIES["edge"].option_model):  # type: ignore[misc]
    """``rag_position.strategies.edge_reorder``'s options, relevance read from metadata."""

    score_key: str | None = Field(
        default=None,
        description="Metadata key holding relevance (None: the framework's own score, if any).",
    )


class GeneratorOptions(BaseModel):
    """The model that answers, and the title shown in its prompts."""

    llm: Any = Field(
        description="A framework chat model or LLM, a load_model spec, or a rag-position Generator."
    )
    llm_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="load_model keyword arguments (spec strings only)."
    )
    title_key: str | None = Field(
        default="title", description="Metadata key of the title shown in prompts; None: none."
    )


class ReciteOptions(STRATEGIES["recite"].option_model):  # type: ignore[misc]
    """``rag_position.strategies.recite_then_solve``'s options (from its signature)."""


_FACT = option_model("FactOptions", (fact, embedding_retrieve), exclude={"embedder"})


class FactOptions(_FACT):  # type: ignore[misc,valid-type]
    """``rag_position.strategies.fact``'s options, and ``embedding_retrieve``'s ``top_k``
    (sentences per pass with embeddings), from their signatures."""


class MedoidOptions(STRATEGIES["medoid"].option_model):  # type: ignore[misc]
    """``rag_position.strategies.medoid_vote``'s options (from its signature)."""


def profile_to_json(profile: Any) -> Any:
    """A ``profile=`` value as JSON-able data (for serialising a component)."""
    if isinstance(profile, PositionProfile):
        return profile.to_dict()
    if isinstance(profile, os.PathLike):
        return os.fspath(profile)
    return profile


def read_scores(
    metadatas: Sequence[Mapping[str, Any]], key: str, what: str = "documents"
) -> list[float | None]:
    """``metadata[key]`` of each item as a float (``None`` where missing).

    ``ValueError`` naming the item for a non-number or NaN, and when no item has the key.
    """
    values: list[float | None] = []
    for i, metadata in enumerate(metadatas):
        raw = metadata.get(key)
        if raw is None:
            values.append(None)
            continue
        try:
            value = float(raw)
        except (TypeError, ValueError):
            raise ValueError(
                f"{what}[{i}].metadata[{key!r}] must be a number, got {raw!r}"
            ) from None
        if math.isnan(value):
            raise ValueError(f"{what}[{i}].metadata[{key!r}] is NaN")
        values.append(value)
    if metadatas and all(v is None for v in values):
        keys = sorted({str(k) for m in metadatas for k in m})
        raise ValueError(
            f"no document has the score key {key!r} in its metadata (keys found: {keys}); "
            "name the key your retriever writes, or leave score_key=None"
        )
    return values


def refuse_nan_scores(scores: Sequence[float | None], what: str, field: str = ".score") -> None:
    """``ValueError`` naming the first item whose own retriever score is NaN
    (``what[i]<field>``, e.g. ``nodes[2].score``); ``None`` is a missing score.

    For the components that rank by their framework's own scores (where the core would
    name a ``passages[i]`` the caller never saw). Call it only where those scores are
    read: from two items on (fewer are returned as given).
    """
    item = what[:-1] if what.endswith("s") else what
    refuse_nan(scores, f"{what}[{{}}]{field}", item=item)


# ---------------------------------------------------------------------- option checks
RENAMED_OPTIONS: Mapping[str, str] = {
    "retrieve_top_k": "top_k",
    "n_orders": "n_rotations",
    "seed": "convex_options={'seed': ...}",
    "n_base_orders": "convex_options={'n_base_orders': ...}",
    "query_aware": "convex_options={'query_aware': ...}",
}
"""Options renamed when the two integrations were unified: old name -> where it went."""


def check_option_names(component: str, given: Iterable[str], known: Iterable[str]) -> None:
    """``TypeError`` naming any option ``component`` lacks (and its new name, if renamed)."""
    unknown = sorted(set(given) - set(known))
    if unknown:
        named = [f"{u} (now {RENAMED_OPTIONS[u]})" if u in RENAMED_OPTIONS else u for u in unknown]
        raise TypeError(
            f"{component} got unknown options {', '.join(named)}; its options are "
            f"{', '.join(sorted(known))}"
        )


def check_profile_options(
    score_key: str | None,
    scorer: Any,
    convex_options: Mapping[str, Any],
    relevance: str = PROFILE_DEFAULTS["relevance"],
) -> None:
    """Profile placement takes its relevance from one source; ``convex_options`` only
    with a scorer and ``relevance="convex_score"``."""
    if relevance not in RELEVANCES:
        raise ValueError(
            f"unknown relevance {relevance!r}; known: {', '.join(map(repr, RELEVANCES))}"
        )
    if score_key is not None and scorer is not None:
        raise ValueError("pass `score_key` or `scorer`, not both: each gives the relevance")
    if convex_options and scorer is None:
        raise ValueError("`convex_options` go to convex_score: pass a `scorer`")
    _check_convex_relevance(convex_options, relevance)
    own = {k: v for k, v in (convex_options or {}).items() if k != "seed"}  # a call's seed
    if own:  # their names and values now, not at the first query
        row = STRATEGIES["convex_score"]
        row.check_options(own)
        try:
            row.option_model(**own)
        except ValidationError as exc:
            first = exc.errors()[0]
            name = ".".join(map(str, first["loc"]))
            raise ValueError(f"`convex_options`: {name}: {first['msg']}") from None


def _check_convex_relevance(convex_options: Mapping[str, Any] | None, relevance: str) -> None:
    if convex_options and relevance != "convex_score":
        raise ValueError(
            f"`convex_options` ({', '.join(sorted(convex_options))}) go to convex_score: pass "
            f"relevance='convex_score' (got relevance={relevance!r}, which takes no options)"
        )


def check_edge_options(mode: str, top_k: int | None, word_count_threshold: int | None) -> None:
    """The Haystack options only with ``mode="haystack"`` (the core's rule, at construction)."""
    if mode != "haystack" and (top_k is not None or word_count_threshold is not None):
        raise ValueError("`top_k` and `word_count_threshold` are Haystack options: mode='haystack'")
