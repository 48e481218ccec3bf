"""The framework-free adapter layer behind the LangChain and LlamaIndex integrations.

Both integrations only map their framework's objects onto what is here (a Document or
a NodeWithScore to a :class:`~rag_position.passages.Passage`, a framework LLM to a
``Generator``, framework embeddings to an ``Embedder``, an OpenAI-compatible framework
model to its base URL, key and model name); everything they share lives here once:

- :class:`LazyModel`, a model given now or loaded on first use (once, thread-safe);
- :func:`check_spec`, :func:`resolve_scorer`, :func:`resolve_generator`,
  :func:`resolve_embedder`: what a ``scorer=`` / ``llm=`` / embeddings argument may be
  (a ``load_model``/``load_embedder`` spec string, one of our model objects, or a
  framework object the integration maps through its ``adapters`` table);
- :func:`openai_scorer`: the ``openai:`` backend from plain values;
- :func:`check_generation`, :func:`unit_rows` (and the core's ``cut_at_stop``, re-exported):
  the generation and embedding checks every framework adapter needs;
- the option defaults (:func:`defaults_of`, :func:`core_options`), read from the core
  strategy functions' signatures so that both integrations default alike;
- the reorderers' shared work: :func:`likelihood_reordering`,
  :func:`convex_reordering`, :func:`passage_likelihood_reordering`,
  :func:`profile_reordering`, :func:`edge_reordering` return a :class:`Reordering`,
  and :func:`reorder_records` turns it into the metadata record written on each
  reordered passage (:func:`reorder_record`, the one schema: :data:`RECORD_KEYS` plus
  the strategy's :data:`EXTRA_KEYS`);
- the names ``PositionAwareRetriever(strategy=...)`` takes (:data:`REORDER_STRATEGIES`),
  with :func:`named_options` for a name that fixes options (:data:`NAMED_VARIANTS`);
- :func:`read_scores` (numbers from metadata) and :func:`to_profile`.

Nothing here imports LangChain or LlamaIndex.
"""

from __future__ import annotations

import inspect
import math
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, Field

from rag_position import models
from rag_position.errors import ModelSpecError
from rag_position.models import Embedder, Generator, Scorer
from rag_position.models.loading import ACCEPTED_SPECS
from rag_position.models.protocols import cut_at_stop
from rag_position.strategies import STRATEGIES as CORE_STRATEGIES
from rag_position.strategies import (
    PositionProfile,
    convex_score,
    edge_reorder,
    embedding_retrieve,
    fact,
    likelihood_selection,
    medoid_vote,
    passage_likelihood,
    profile_reorder,
    profiles,
    recite_then_solve,
)
from rag_position.strategies.edges import EdgeMode
from rag_position.strategies.placement import RELEVANCES, Relevance
from rag_position.strategies.profiles import as_profile

T = TypeVar("T")

METADATA_KEY = "rag_position"
"""The metadata key every reordering component writes by default (both integrations)."""

RECORD_KEYS = ("strategy", "score", "rank", "original_rank")
"""The keys of every reorder record (see :func:`reorder_record`)."""

EXTRA_KEYS: Mapping[str, tuple[str, ...]] = {
    "likelihood_selection": ("question_loglik",),
    "convex_score": ("gold",),
    "passage_likelihood": ("gold",),
    "profile": ("relevance",),
    "edge": (),
}
"""The strategy-specific keys each reorderer adds to its record, by strategy name."""

NAMED_VARIANTS: Mapping[str, str] = {"passage_likelihood_profile": "passage_likelihood"}
"""Strategy names that build another strategy's reorderer with options the name fixes (the
core table's ``fixed``: ``passage_likelihood_profile`` is ``placement="profile"``), by name;
the record's ``strategy`` is the reorderer's own."""

REORDER_STRATEGIES = (*EXTRA_KEYS, *NAMED_VARIANTS)
"""The strategy names of the reorderers (``PositionAwareRetriever(strategy=<name>)``)."""

SCORER_FORMS = (
    "a load_model spec string (" + ACCEPTED_SPECS + "), an object with "
    "score_spans(prompts, spans) (a rag_position Scorer, e.g. load_model('embedded')), "
    "our framework model wrapper over such a model, or an OpenAI-compatible framework model "
    "(a base URL and a model name) pointed at a server that returns prompt log-probabilities "
    "(any vLLM server, e.g. the one `rag-position serve` starts)"
)
GENERATOR_FORMS = (
    "a framework chat model or LLM, a load_model spec string (" + ACCEPTED_SPECS + "), or "
    "an object with generate(prompts, *, max_new_tokens, temperature, seed, stop) "
    "(a rag_position Generator)"
)
EMBEDDER_FORMS = (
    "framework embeddings, an embedder spec string ('embedded' or a sentence-transformers "
    "name), or an object with embed(texts) returning unit rows (a rag_position Embedder)"
)


# ---------------------------------------------------------------------- the lazy holder
class LazyModel(Generic[T]):
    """A model given now, or loaded on first use by ``loader`` (once, thread-safe).

    ``check`` (optional) sees the loaded model and returns it (or raises).

    Example:
        >>> lazy = LazyModel(loader=lambda: load_model("embedded"), label="'embedded'")
        >>> lazy.loaded
        False
        >>> lazy.get() is lazy.get()       # loaded once, on the first call
        True
    """

    def __init__(
        self,
        value: T | None = None,
        *,
        loader: Callable[[], T] | None = None,
        label: str = "",
        check: Callable[[Any], T] | None = None,
    ) -> None:
        if value is not None and loader is not None:
            raise ValueError("give a LazyModel a value or a loader, not both")
        self._value = value
        self._loader = loader
        self._check = check
        self._lock = threading.Lock()
        self.label = label

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory (a given object always is)."""
        return self._loader is None

    def get(self) -> T:
        """The model, loading it first if needed."""
        if self._loader is not None:
            with self._lock:
                if self._loader is not None:
                    value = self._loader()
                    if self._check is not None:
                        value = self._check(value)
                    self._value, self._loader = value, None
        return self._value  # type: ignore[return-value]


# ---------------------------------------------------------------------- describing, specs
def describe(obj: Any) -> str:
    """``"<module>.<Class> object"``, for error messages."""
    return f"{type(obj).__module__}.{type(obj).__name__} object"


def model_label(model: Any) -> str:
    """A model's ``name`` if it has one, else its class name."""
    return str(getattr(model, "name", None) or type(model).__name__)


def check_spec(spec: str, what: str) -> None:
    """Refuse a spec string ``load_model`` would refuse, before anything is loaded."""
    ok = spec == "embedded" or any(
        spec.startswith(p) and len(spec) > len(p) for p in ("hf:", "openai:")
    )
    if not ok:
        raise ModelSpecError(
            f"unknown model spec {spec!r} for `{what}`; accepted: {ACCEPTED_SPECS}"
        )


def reject_load_kwargs(kwargs: Mapping[str, Any], field_name: str, what: str, obj: Any) -> None:
    """``ValueError`` when load keyword arguments come with an object instead of a spec."""
    if kwargs:
        raise ValueError(
            f"`{field_name}` {sorted(kwargs)} only apply when `{what}` is a spec string, "
            f"not a {type(obj).__name__} object"
        )


def is_scorer(obj: Any) -> bool:
    """Whether ``obj`` has a callable ``score_spans`` (the Scorer protocol)."""
    return callable(getattr(obj, "score_spans", None))


def need_scorer(model: Any, label: str) -> Any:
    """``model`` if it can score spans, else ``TypeError`` naming ``label``."""
    if not is_scorer(model):
        raise TypeError(f"{label} gave a {type(model).__name__}, which cannot score spans")
    return model


def need_generator(model: Any, label: str) -> Any:
    """``model`` if it can generate, else ``TypeError`` naming ``label``."""
    if not isinstance(model, Generator):
        raise TypeError(f"{label} gave a {type(model).__name__}, which cannot generate")
    return model


# ---------------------------------------------------------------------- resolving models
Adapters = Sequence[tuple[Any, Callable[[Any], Any]]]
"""A framework's own types, in order, each with what makes a model (or a LazyModel) of one."""


def _resolve(
    value: Any,
    load_kwargs: Mapping[str, Any] | None,
    *,
    what: str,
    kwargs_name: str,
    loader: Callable[[str, dict[str, Any]], Any],
    check_text: Callable[[str], None],
    adapters: Adapters,
    accepts: Callable[[Any], bool],
    refusal: str,
    forms: str,
) -> LazyModel[Any]:
    kwargs = dict(load_kwargs or {})
    if isinstance(value, str):
        check_text(value)
        return LazyModel(loader=lambda: loader(value, kwargs), label=value)
    reject_load_kwargs(kwargs, kwargs_name, what, value)
    if value is None:
        raise ValueError(f"`{what}` is required; pass {forms}")
    for kind, adapt in adapters:
        if isinstance(value, kind):
            made = adapt(value)
            return made if isinstance(made, LazyModel) else LazyModel(made, label=describe(value))
    if accepts(value):
        return LazyModel(value, label=model_label(value))
    raise TypeError(f"{describe(value)} {refusal}; pass {forms}")


def resolve_scorer(
    scorer: Any,
    load_kwargs: Mapping[str, Any] | None = None,
    *,
    adapters: Adapters = (),
    forms: str = SCORER_FORMS,
) -> LazyModel[Scorer]:
    """What ``scorer=`` accepts, as a :class:`LazyModel` of a ``Scorer``.

    A spec string is checked now and loaded on first use (with ``load_kwargs``);
    ``adapters`` map the framework's own objects; any object with ``score_spans`` is
    taken as it is. ``ValueError`` for ``None`` or misplaced ``load_kwargs``,
    ``TypeError`` for an object that cannot score.
    """
    return _resolve(
        scorer,
        load_kwargs,
        what="scorer",
        kwargs_name="scorer_kwargs",
        loader=lambda spec, kw: need_scorer(models.load_model(spec, **kw), repr(spec)),
        check_text=lambda spec: check_spec(spec, "scorer"),
        adapters=adapters,
        accepts=is_scorer,
        refusal="cannot score question likelihoods",
        forms=forms,
    )


def resolve_generator(
    llm: Any,
    load_kwargs: Mapping[str, Any] | None = None,
    *,
    adapters: Adapters = (),
    forms: str = GENERATOR_FORMS,
) -> LazyModel[Generator]:
    """What ``llm=`` accepts, as a LazyModel of a ``Generator`` (cf. :func:`resolve_scorer`).

    ``adapters`` come before the protocol check: framework models have their own
    ``generate`` methods with other signatures.
    """
    return _resolve(
        llm,
        load_kwargs,
        what="llm",
        kwargs_name="llm_kwargs",
        loader=lambda spec, kw: need_generator(models.load_model(spec, **kw), repr(spec)),
        check_text=lambda spec: check_spec(spec, "llm"),
        adapters=adapters,
        accepts=lambda obj: isinstance(obj, Generator),
        refusal="cannot generate text",
        forms=forms,
    )


def _check_embedder_spec(spec: str) -> None:
    if not spec.strip():
        raise ModelSpecError(f"the embeddings spec is empty; pass {EMBEDDER_FORMS}")


def resolve_embedder(
    embeddings: Any,
    load_kwargs: Mapping[str, Any] | None = None,
    *,
    adapters: Adapters = (),
    forms: str = EMBEDDER_FORMS,
    what: str = "embeddings",
    kwargs_name: str = "embeddings_kwargs",
) -> LazyModel[Embedder]:
    """What an embeddings argument accepts, as a :class:`LazyModel` of an ``Embedder``."""
    return _resolve(
        embeddings,
        load_kwargs,
        what=what,
        kwargs_name=kwargs_name,
        loader=lambda spec, kw: models.load_embedder(spec, **kw),
        check_text=_check_embedder_spec,
        adapters=adapters,
        accepts=lambda obj: isinstance(obj, Embedder),
        refusal="cannot embed texts",
        forms=forms,
    )


def openai_scorer(
    base_url: str | None,
    model: str | None,
    *,
    api_key: str | None = None,
    timeout: Any = None,
    max_retries: Any = None,
    chat_template: bool | None = None,
    label: str = "the model",
) -> Scorer:
    """rag-position's ``openai:`` backend at ``base_url`` for ``model`` (nothing is sent here).

    The frameworks only read these values off their OpenAI-compatible models. The
    server must return prompt log-probabilities (``echo`` with ``logprobs``) or force
    tokens: vLLM does (``rag-position serve`` starts one that does both); OpenAI's hosted
    API does not, so an empty ``base_url``
    (the hosted default) is refused. A bad ``timeout``/``max_retries`` is ignored.
    """
    if not base_url:
        raise ValueError(
            f"{label} points at OpenAI's hosted API, which does not return prompt "
            "log-probabilities, so it cannot score; set its base URL to a vLLM server (e.g. "
            "the one `rag-position serve` starts), or pass another scorer"
        )
    if not isinstance(model, str) or not model:
        raise ValueError(f"{label} names no model (model=...), so it cannot score")
    options: dict[str, Any] = {"model": model, "api_key": api_key or None}
    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout > 0:
        options["timeout"] = float(timeout)
    if isinstance(max_retries, int) and not isinstance(max_retries, bool) and max_retries >= 0:
        options["max_retries"] = max_retries
    if isinstance(chat_template, bool):
        options["chat_template"] = chat_template  # generation only: scoring uses the raw prompt
    scorer: Scorer = models.load_model("openai:" + str(base_url), **options)
    return scorer


# ---------------------------------------------------------------------- generation, embedding
def check_generation(prompts: Sequence[str], max_new_tokens: int, temperature: float) -> None:
    """The checks every ``Generator.generate`` makes on its arguments."""
    if isinstance(prompts, str):
        raise TypeError("`prompts` must be a sequence of strings, not a single str")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")


@dataclass(frozen=True)
class GenerationOptions:
    """One ``generate`` call's settings, as a framework generator receives them."""

    max_new_tokens: int
    temperature: float
    seed: int | None
    stop: list[str]


class AdaptedGenerator:
    """Base of the framework generators: ``generate`` checks its arguments, calls
    :meth:`complete_all` and cuts every output at the first stop string (some providers
    ignore ``stop``). Subclasses implement ``complete_all`` for their framework."""

    name: str = ""

    def generate(  # the Generator protocol's signature, kept compact
        self, prompts: Sequence[str], *, max_new_tokens: int = 100, temperature: float = 0.0,
        seed: int | None = None, stop: Sequence[str] | None = None,
    ) -> list[str]:  # fmt: skip
        """One completion per prompt, in order."""
        check_generation(prompts, max_new_tokens, temperature)
        if not prompts:
            return []
        stops = [s for s in stop or () if s]
        options = GenerationOptions(max_new_tokens, temperature, seed, stops)
        return [cut_at_stop(t, stops) for t in self.complete_all(list(prompts), options)]

    def complete_all(self, prompts: list[str], options: GenerationOptions) -> list[str]:
        """The raw completions (the framework call)."""
        raise NotImplementedError


def unit_rows(rows: Any, n_texts: int, name: str) -> npt.NDArray[np.float32]:
    """``rows`` (one embedding per text) L2-normalised as float32; ``ValueError`` if unusable.

    No texts give a ``(0, 0)`` array.
    """
    if n_texts == 0:
        return np.zeros((0, 0), dtype=np.float32)
    vectors = np.asarray(rows, dtype=np.float64)
    if vectors.ndim != 2 or vectors.shape[0] != n_texts:
        raise ValueError(f"{name} returned embeddings of shape {vectors.shape} for {n_texts} texts")
    norms = np.linalg.norm(vectors, axis=1)
    bad = [i for i, v in enumerate(norms) if not math.isfinite(v) or v == 0]
    if bad:
        raise ValueError(
            f"{name} returned a zero or non-finite embedding for text(s) {bad}; "
            "it has no direction, so no cosine similarity"
        )
    unit: npt.NDArray[np.float32] = (vectors / norms[:, None]).astype(np.float32)
    return unit


# ---------------------------------------------------------------------- option defaults
def defaults_of(function: Callable[..., Any]) -> dict[str, Any]:
    """A core function's keyword options and their defaults, from its signature."""
    return {
        p.name: p.default
        for p in inspect.signature(function).parameters.values()
        if p.default is not inspect.Parameter.empty
    }


LIKELIHOOD_DEFAULTS = defaults_of(likelihood_selection)
CONVEX_DEFAULTS = defaults_of(convex_score)
PASSAGE_LIKELIHOOD_DEFAULTS = defaults_of(passage_likelihood)
PROFILE_DEFAULTS = defaults_of(profile_reorder)
EDGE_DEFAULTS = defaults_of(edge_reorder)
FACT_DEFAULTS = {**defaults_of(fact), "top_k": defaults_of(embedding_retrieve)["top_k"]}
"""``fact``'s options, plus ``top_k``: sentences per pass with embedding retrieval."""
RECITE_DEFAULTS = defaults_of(recite_then_solve)
MEDOID_DEFAULTS = defaults_of(medoid_vote)


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


# ---------------------------------------------------------------------- the options, declared once
# Each integration's component inherits the option model of its strategy (next to its
# framework base class), so both integrations expose the same names, defaults,
# constraints and descriptions, the defaults read from the core functions' signatures.
# (pydantic is what both frameworks build their components on; the core has it through
# the openai client.)
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


class LikelihoodOptions(BaseModel):
    """``rag_position.strategies.likelihood_selection``'s options."""

    n_orders: int | None = Field(
        default=LIKELIHOOD_DEFAULTS["n_orders"],
        ge=1,
        description="Candidate orders to score (default: one per passage).",
    )
    seed: int = Field(default=LIKELIHOOD_DEFAULTS["seed"], description="Seed of the orders.")
    include_given: bool = Field(
        default=LIKELIHOOD_DEFAULTS["include_given"],
        description="Make the given order the first candidate.",
    )
    template: str | None = Field(
        default=LIKELIHOOD_DEFAULTS["template"],
        description="A QA template with {question} and {search_results} to score with.",
    )
    query_aware: bool = Field(
        default=LIKELIHOOD_DEFAULTS["query_aware"],
        description="Score with the query-aware prompt (question before and after).",
    )


class ConvexOptions(BaseModel):
    """``rag_position.strategies.convex_score``'s options."""

    n_base_orders: int = Field(
        default=CONVEX_DEFAULTS["n_base_orders"], ge=1, description="Seeded base orders (R)."
    )
    n_rotations: int | None = Field(
        default=CONVEX_DEFAULTS["n_rotations"],
        ge=1,
        description="Rotations scored per base order (M <= N; default N).",
    )
    seed: int = Field(default=CONVEX_DEFAULTS["seed"], description="Seed of the base orders.")
    design: Literal["rotations", "authors"] = Field(
        default=CONVEX_DEFAULTS["design"],
        description="N rotations, or the authors' N shuffles x N rotations.",
    )
    edge_weight: float = Field(
        default=CONVEX_DEFAULTS["edge_weight"], description="Weight of the edge term E(d)."
    )
    curvature_weight: float = Field(
        default=CONVEX_DEFAULTS["curvature_weight"], description="Weight of the curvature term."
    )
    variant: Literal["convex", "authors"] = Field(
        default=CONVEX_DEFAULTS["variant"],
        description="'convex' (edge + curvature) or the authors' +/-LL score.",
    )
    placement: Literal["first", "last", "profile"] = Field(
        default=CONVEX_DEFAULTS["placement"], description="Where the gold candidate goes."
    )
    rest: Literal["keep", "scores"] | None = Field(
        default=CONVEX_DEFAULTS["rest"],
        description="The rest: 'keep' their order or follow their 'scores' (default by placement).",
    )
    profile: Any = Field(
        default=CONVEX_DEFAULTS["profile"],
        description="A PositionProfile, its JSON path, or a list of numbers (placement='profile').",
    )
    template: str | None = Field(
        default=CONVEX_DEFAULTS["template"], description="A QA template to score with."
    )
    query_aware: bool = Field(
        default=CONVEX_DEFAULTS["query_aware"], description="Score with the query-aware prompt."
    )


class PassageLikelihoodOptions(BaseModel):
    """``rag_position.strategies.passage_likelihood``'s options."""

    placement: Literal["first", "last", "profile"] = Field(
        default=PASSAGE_LIKELIHOOD_DEFAULTS["placement"],
        description="Where the top passage (the gold candidate) goes.",
    )
    rest: Literal["keep", "scores"] | None = Field(
        default=PASSAGE_LIKELIHOOD_DEFAULTS["rest"],
        description="The rest: 'keep' their order or follow their 'scores' (default by placement).",
    )
    profile: Any = Field(
        default=PASSAGE_LIKELIHOOD_DEFAULTS["profile"],
        description="A PositionProfile, its JSON path, or a list of numbers (placement='profile').",
    )
    template: str | None = Field(
        default=PASSAGE_LIKELIHOOD_DEFAULTS["template"],
        description="A QA template with {question} and {search_results} to score with.",
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
            "With a scorer: 'passage_likelihood' (each passage scored alone; found the gold "
            "89% of the time on the embedded model at ~1 prompt of tokens) or 'convex_score' "
            "(25% at N prompts)."
        ),
    )
    convex_options: dict[str, Any] = Field(
        default_factory=dict,
        description="Options for convex_score (with a scorer and relevance='convex_score').",
    )


class EdgeOptions(BaseModel):
    """``rag_position.strategies.edge_reorder``'s options."""

    mode: EdgeMode = Field(
        default=EDGE_DEFAULTS["mode"],
        description="Whose rule: LangChain's or LlamaIndex's LongContextReorder, or Haystack's.",
    )
    score_key: str | None = Field(
        default=None,
        description="Metadata key holding relevance (None: the framework's own score, if any).",
    )
    top_k: int | None = Field(
        default=EDGE_DEFAULTS["top_k"], ge=1, description="Haystack: keep the first k."
    )
    word_count_threshold: int | None = Field(
        default=EDGE_DEFAULTS["word_count_threshold"], ge=1, description="Haystack option."
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


class ReciteOptions(BaseModel):
    """``rag_position.strategies.recite_then_solve``'s options."""

    fallback: Literal["context", "none"] = Field(
        default=RECITE_DEFAULTS["fallback"],
        description="Nothing usable recited: answer from the full context, or not at all.",
    )
    threshold: float = Field(
        default=RECITE_DEFAULTS["threshold"],
        gt=0.0,
        le=1.0,
        description="Similarity a recited block needs to ground.",
    )
    max_new_tokens: int = Field(
        default=RECITE_DEFAULTS["max_new_tokens"], ge=1, description="Tokens for the recitation."
    )
    answer_max_new_tokens: int = Field(
        default=RECITE_DEFAULTS["answer_max_new_tokens"], ge=1, description="Tokens for the answer."
    )


class FactOptions(BaseModel):
    """``rag_position.strategies.fact``'s options (``top_k``: ``embedding_retrieve``'s)."""

    max_iterations: int = Field(
        default=FACT_DEFAULTS["max_iterations"], ge=1, description="At most this many passes."
    )
    top_k: int = Field(
        default=FACT_DEFAULTS["top_k"], ge=1, description="Sentences per pass with embeddings."
    )
    rewrite: Literal["remove", "mask"] = Field(
        default=FACT_DEFAULTS["rewrite"], description="Cut found facts out, or mask them."
    )
    answer: bool = Field(
        default=FACT_DEFAULTS["answer"], description="Generate the answer from the facts."
    )
    with_context: bool = Field(
        default=FACT_DEFAULTS["with_context"], description="Answer from the context and facts."
    )
    threshold: float = Field(
        default=FACT_DEFAULTS["threshold"],
        gt=0.0,
        le=1.0,
        description="Fuzzy-match ratio to locate a fact.",
    )
    max_new_tokens: int = Field(
        default=FACT_DEFAULTS["max_new_tokens"], ge=1, description="Tokens per retrieval pass."
    )
    answer_max_new_tokens: int = Field(
        default=FACT_DEFAULTS["answer_max_new_tokens"], ge=1, description="Tokens for the answer."
    )


class MedoidOptions(BaseModel):
    """``rag_position.strategies.medoid_vote``'s options."""

    k: int = Field(default=MEDOID_DEFAULTS["k"], ge=1, description="Orders, hence answers.")
    seed: int = Field(default=MEDOID_DEFAULTS["seed"], description="Seed of the permutations.")
    temperature: float = Field(
        default=MEDOID_DEFAULTS["temperature"], ge=0.0, description="Sampling temperature."
    )
    absence_phrases: Sequence[str] = Field(
        default=MEDOID_DEFAULTS["absence_phrases"],
        description="Lower-case phrases marking an answer as 'the context lacks it'.",
    )
    max_new_tokens: int = Field(
        default=MEDOID_DEFAULTS["max_new_tokens"], ge=1, description="Tokens per answer."
    )


OPTION_MODELS: Mapping[str, tuple[type[BaseModel], ...]] = {
    "likelihood_selection": (ReorderOptions, ScorerOptions, LikelihoodOptions),
    "convex_score": (ReorderOptions, ScorerOptions, ConvexOptions),
    "passage_likelihood": (ReorderOptions, ScorerOptions, PassageLikelihoodOptions),
    "profile": (ReorderOptions, ScorerOptions, ProfileOptions),
    "edge": (ReorderOptions, EdgeOptions),
    "recite_then_solve": (GeneratorOptions, ReciteOptions),
    "fact": (GeneratorOptions, FactOptions),
    "medoid_vote": (GeneratorOptions, MedoidOptions),
}
"""The option models each component inherits, by core strategy name."""


# ---------------------------------------------------------------------- profiles, scores
to_profile = as_profile
"""A :class:`PositionProfile` from a profile, its JSON file, or a list of values (the core's)."""


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


def check_placement(placement: str, profile: Any) -> PositionProfile | None:
    """The core's placement rules at construction; the profile, resolved (or ``None``)."""
    return profiles.check_placement(placement, None, profile)


def check_convex_options(
    placement: str, profile: Any, edge_weight: float, curvature_weight: float
) -> PositionProfile | None:
    """ConvexScore's construction-time rules; the profile, resolved (or ``None``)."""
    for name, value in (("edge_weight", edge_weight), ("curvature_weight", curvature_weight)):
        if not math.isfinite(value):
            raise ValueError(f"`{name}` must be a finite number")
    return check_placement(placement, profile)


def convex_profile(component: Any) -> PositionProfile | None:
    """:func:`check_convex_options` on a component's options (ConvexOptions' fields)."""
    return check_convex_options(
        component.placement, component.profile, component.edge_weight, component.curvature_weight
    )


def placement_profile(component: Any) -> PositionProfile | None:
    """:func:`check_placement` on a component's options (PassageLikelihoodOptions' fields)."""
    return check_placement(component.placement, component.profile)


def named_options(strategy: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The options of the reorderer behind ``PositionAwareRetriever(strategy=<name>)``.

    ``options`` as given, plus what a name of :data:`NAMED_VARIANTS` fixes (the core
    table's row: ``passage_likelihood_profile`` sets ``placement="profile"``);
    ``TypeError`` when a fixed option is given too, ``ValueError`` when one the row
    requires (``profile``) is missing.

    Example:
        >>> named_options("passage_likelihood_profile", {"profile": [0.2, 0.5]})
        {'profile': [0.2, 0.5], 'placement': 'profile'}
    """
    if strategy not in NAMED_VARIANTS:
        return dict(options)
    row = CORE_STRATEGIES[strategy]
    fixed = sorted(set(options) & set(row.fixed))
    if fixed:
        raise TypeError(
            f"strategy {strategy!r} sets {', '.join(fixed)} itself "
            f"({', '.join(f'{k}={row.fixed[k]!r}' for k in fixed)})"
        )
    missing = [name for name in row.requires if options.get(name) is None]
    if missing:
        raise ValueError(
            f"strategy {strategy!r} needs {', '.join(f'{m}=' for m in missing)} (a "
            "PositionProfile, its JSON file or a list of values per position)"
        )
    return {**options, **row.fixed}


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


# ---------------------------------------------------------------------- reordering
@dataclass(frozen=True)
class Reordering:
    """What a reorderer computed: the new order, and per INPUT passage a score and extras."""

    order: list[int]
    scores: list[float | None]
    extras: list[dict[str, Any]] = field(default_factory=list)


def _clean(score: Any) -> float | None:
    if score is None:
        return None
    value = float(score)
    return None if math.isnan(value) else value


def _reordering(
    n: int, order: Sequence[int], scores: Sequence[Any] | None, extras: list[dict[str, Any]]
) -> Reordering:
    if sorted(order) != list(range(n)):
        raise RuntimeError(f"internal error: {list(order)} is not a permutation of {n} passages")
    clean: list[float | None] = [_clean(s) for s in scores] if scores else [None] * n
    return Reordering(list(order), clean, extras)


def likelihood_reordering(
    question: str, passages: Sequence[Any], scorer: LazyModel[Any] | None, **options: Any
) -> Reordering:
    """Likelihood selection; every record's ``score`` and ``question_loglik`` are the winning
    order's mean log-likelihood (``None`` with fewer than two passages: nothing is scored)."""
    n = len(passages)
    if n < 2:
        return _reordering(n, list(range(n)), None, [{"question_loglik": None}] * n)
    result = likelihood_selection(question, passages, _scorer(scorer), **options)
    best = None if result.best is None else float(result.scores[result.best])
    return _reordering(n, result.order, [best] * n, [{"question_loglik": best}] * n)


def convex_reordering(
    question: str, passages: Sequence[Any], scorer: LazyModel[Any] | None, **options: Any
) -> Reordering:
    """ConvexScore; ``score`` is each passage's ConvexScore, ``gold`` marks the candidate."""
    n = len(passages)
    if n < 2:
        return _reordering(n, list(range(n)), None, [{"gold": False}] * n)
    result = convex_score(question, passages, _scorer(scorer), **options)
    extras = [{"gold": i == result.gold} for i in range(n)]
    return _reordering(n, result.order, list(result.scores) or None, extras)


def passage_likelihood_reordering(
    question: str, passages: Sequence[Any], scorer: LazyModel[Any] | None, **options: Any
) -> Reordering:
    """Passage likelihood; ``score`` is each passage's mean question log-likelihood with it
    alone in the prompt, ``gold`` marks the top one (fewer than two passages: nothing is
    scored, as with :func:`convex_reordering`)."""
    n = len(passages)
    if n < 2:
        return _reordering(n, list(range(n)), None, [{"gold": False}] * n)
    result = passage_likelihood(question, passages, _scorer(scorer), **options)
    gold = result.details["gold"]
    extras = [{"gold": i == gold} for i in range(n)]
    return _reordering(n, result.order, list(result.scores) or None, extras)


def _scorer(scorer: LazyModel[Any] | None) -> Scorer:
    if scorer is None:
        raise ValueError("`scorer` is required")
    found: Scorer = scorer.get()
    return found


def profile_reordering(
    question: str | None,
    passages: Sequence[Any],
    profile: PositionProfile,
    *,
    scores: Sequence[float | None] | None = None,
    scorer: LazyModel[Scorer] | None = None,
    convex_options: Mapping[str, Any] | None = None,
    score_key: str | None = None,
    relevance: Relevance = PROFILE_DEFAULTS["relevance"],
) -> Reordering:
    """Profile placement; ``score`` is the relevance used, ``relevance`` says where it came from.

    Relevance: ``scores`` (every passage needs one), else with ``scorer`` by ``relevance``
    (``"passage_likelihood"``, the default, or ``"convex_score"``, which alone takes
    ``convex_options``), else the passages' own ``score`` where every one has it, else the
    given order.
    """
    _check_convex_relevance(convex_options, relevance)
    n = len(passages)
    options: dict[str, Any] = {"relevance": relevance}
    if scores is not None:
        missing = [i for i, s in enumerate(scores) if s is None]
        if missing:
            raise ValueError(
                f"documents {missing} have no {score_key or 'score'!r} in their metadata; "
                "profile placement needs a score for every document"
            )
        options["scores"] = [float(s) for s in scores if s is not None]
    elif scorer is not None:
        if not isinstance(question, str) or not question.strip():
            raise ValueError("profile placement with a scorer scores the question: pass the query")
        options = {**options, "scorer": scorer.get(), **dict(convex_options or {})}
    # Without a scorer the question is not used; the core still wants a string.
    text = question if isinstance(question, str) and question.strip() else "(no query)"
    result = profile_reorder(text, passages, profile=profile, **options)
    source = result.details.get("relevance", "order")
    return _reordering(n, result.order, list(result.scores) or None, [{"relevance": source}] * n)


def edge_reordering(
    passages: Sequence[Any],
    *,
    scores: Sequence[float | None] | None = None,
    mode: EdgeMode = EDGE_DEFAULTS["mode"],
    top_k: int | None = None,
    word_count_threshold: int | None = None,
) -> Reordering:
    """Edge placement (no model); ``score`` is the relevance score used, if any.

    Haystack's ``top_k``/``word_count_threshold`` may drop passages: the order then lists
    the kept ones only, and :func:`reorder_records` writes records for those.
    """
    result = edge_reorder(
        passages, scores=scores, mode=mode, top_k=top_k, word_count_threshold=word_count_threshold
    )
    n = len(passages)
    order = list(result.order)
    if len(set(order)) != len(order) or not all(0 <= i < n for i in order):
        raise RuntimeError(f"internal error: {order} is not a selection of {n} passages")
    used: list[float | None] = [_clean(s) for s in result.scores] if result.scores else [None] * n
    return Reordering(order, used, [{} for _ in range(n)])


def reorder_record(
    strategy: str,
    rank: int,
    original_rank: int,
    score: float | None,
    extras: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The metadata record a reorderer writes on one passage (a new dict).

    ``{"strategy", "score", "rank" (new position), "original_rank" (input position),
    **extras}``; see :data:`RECORD_KEYS` and :data:`EXTRA_KEYS`.
    """
    record: dict[str, Any] = {
        "strategy": strategy,
        "score": _clean(score),
        "rank": rank,
        "original_rank": original_rank,
    }
    record.update(extras or {})
    return record


def reorder_records(reordering: Reordering, strategy: str) -> list[dict[str, Any]]:
    """One record per output position (``records[r]`` is for input ``reordering.order[r]``)."""
    extras = reordering.extras
    return [
        reorder_record(strategy, rank, i, reordering.scores[i], extras[i] if extras else None)
        for rank, i in enumerate(reordering.order)
    ]


def with_record(metadata: Mapping[str, Any], key: str, record: Mapping[str, Any]) -> dict[str, Any]:
    """A NEW metadata dict: ``metadata`` plus ``record`` under ``key`` (the input is untouched)."""
    return {**metadata, key: dict(record)}


__all__ = [
    "CONVEX_DEFAULTS",
    "EDGE_DEFAULTS",
    "EMBEDDER_FORMS",
    "EXTRA_KEYS",
    "FACT_DEFAULTS",
    "GENERATOR_FORMS",
    "LIKELIHOOD_DEFAULTS",
    "MEDOID_DEFAULTS",
    "METADATA_KEY",
    "NAMED_VARIANTS",
    "OPTION_MODELS",
    "PASSAGE_LIKELIHOOD_DEFAULTS",
    "PROFILE_DEFAULTS",
    "RECITE_DEFAULTS",
    "RECORD_KEYS",
    "REORDER_STRATEGIES",
    "SCORER_FORMS",
    "AdaptedGenerator",
    "ConvexOptions",
    "EdgeOptions",
    "FactOptions",
    "GenerationOptions",
    "GeneratorOptions",
    "LazyModel",
    "LikelihoodOptions",
    "MedoidOptions",
    "PassageLikelihoodOptions",
    "ProfileOptions",
    "ReciteOptions",
    "ReorderOptions",
    "Reordering",
    "ScorerOptions",
    "check_convex_options",
    "check_edge_options",
    "check_generation",
    "check_option_names",
    "check_placement",
    "check_profile_options",
    "check_spec",
    "convex_profile",
    "convex_reordering",
    "core_options",
    "cut_at_stop",
    "defaults_of",
    "describe",
    "edge_reordering",
    "likelihood_reordering",
    "named_options",
    "openai_scorer",
    "passage_likelihood_reordering",
    "placement_profile",
    "profile_reordering",
    "profile_to_json",
    "read_scores",
    "reorder_record",
    "reorder_records",
    "resolve_embedder",
    "resolve_generator",
    "resolve_scorer",
    "to_profile",
    "unit_rows",
]
