"""Adapters between LlamaIndex models and rag-position's three protocols, both ways.

LlamaIndex -> rag-position: :class:`LlamaIndexGenerator` (any ``LLM`` as a
``Generator``), :class:`LlamaIndexEmbedder` (any ``BaseEmbedding`` as an
``Embedder``), and an OpenAI-compatible ``LLM`` (``OpenAILike``, ``OpenAI``) as a
``Scorer`` through rag-position's ``openai:`` backend. rag-position -> LlamaIndex:
:class:`RagPositionLLM` (a ``CustomLLM`` over any ``load_model`` result, e.g. the
embedded SmolLM2) and :class:`RagPositionEmbedding` (a ``BaseEmbedding`` over our
embedder, e.g. the embedded all-MiniLM-L6-v2).

The ``resolve_*`` functions turn what a user passes as ``scorer=`` / ``llm=`` /
``embed_model=`` into a :class:`ModelSlot`: objects are checked at once (a clear
``TypeError`` when they cannot do the job); spec strings are checked for form at
once and loaded on first use, once per slot.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt
from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding
from llama_index.core.base.llms.types import (
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
)
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.llms import LLM
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.llms.custom import CustomLLM

from rag_position.errors import ModelSpecError
from rag_position.models import Embedder, Generator, Scorer, load_embedder, load_model
from rag_position.models.loading import ACCEPTED_SPECS

T = TypeVar("T")

SCORER_HELP = (
    "a scorer must be one of: a load_model spec string ('embedded', 'hf:<path>', "
    "'openai:<base_url>' with scorer_kwargs={'model': ...}); an object with "
    "score_spans(prompts, spans) (a rag_position Scorer, e.g. load_model('embedded')); a "
    "RagPositionLLM over such a model; or an OpenAI-compatible LlamaIndex LLM (OpenAILike, "
    "OpenAI: an `api_base` and a `model`) pointed at a server that returns prompt "
    "log-probabilities (vLLM, `rag-position serve`)"
)
GENERATOR_HELP = (
    "an llm must be one of: a LlamaIndex LLM (llama_index.core.llms.LLM), a load_model spec "
    "string ('embedded', 'hf:<path>', 'openai:<base_url>'), or an object with "
    "generate(prompts, *, max_new_tokens, temperature, seed, stop) (a rag_position Generator)"
)
EMBEDDER_HELP = (
    "an embed_model must be one of: a LlamaIndex BaseEmbedding, an embedder spec string "
    "('embedded' or a sentence-transformers name), or an object with embed(texts) returning "
    "unit rows (a rag_position Embedder)"
)

DEFAULT_PARAM_NAMES: Mapping[str, str | None] = {
    "max_new_tokens": "max_tokens",
    "temperature": "temperature",
    "seed": "seed",
    "stop": "stop",
}
"""How :class:`LlamaIndexGenerator` names our generation options in ``LLM.complete(**kwargs)``
(OpenAI's names, which ``OpenAI``/``OpenAILike`` and :class:`RagPositionLLM` accept)."""


class ModelSlot(Generic[T]):
    """A model held by a component: an object given as it is, or loaded on first use, once.

    Example:
        >>> slot = ModelSlot(factory=lambda: load_model("embedded"), label="embedded")
        >>> slot.loaded
        False
        >>> model = slot.get()         # loads now; later calls return the same object
    """

    def __init__(
        self, value: T | None = None, *, factory: Callable[[], T] | None = None, label: str = ""
    ) -> None:
        if (value is None) == (factory is None):
            raise ValueError("give a ModelSlot either a value or a factory")
        self._value = value
        self._factory = factory
        self._lock = threading.Lock()
        self.label = label

    @property
    def loaded(self) -> bool:
        """Whether the model is there (given, or already loaded)."""
        return self._value is not None

    def get(self) -> T:
        """The model, loading it first if it was given as a spec string."""
        if self._value is None:
            with self._lock:
                if self._value is None:
                    assert self._factory is not None
                    self._value = self._factory()
        return self._value


# ---------------------------------------------------------------------------- resolving
def resolve_scorer(scorer: Any, load_kwargs: Mapping[str, Any] | None = None) -> ModelSlot[Scorer]:
    """What ``scorer=`` accepts, as a :class:`ModelSlot` of a rag-position ``Scorer``.

    Raises ``TypeError`` naming the object when it cannot score (e.g. ``MockLLM``).

    Example:
        >>> resolve_scorer("embedded").loaded                    # loaded on first use
        False
        >>> resolve_scorer(OpenAILike(api_base=url, model="m", api_key="x")).loaded
        True
    """
    kwargs = dict(load_kwargs or {})
    if not isinstance(scorer, str):
        _reject_kwargs(kwargs, "scorer_kwargs", "scorer", type(scorer).__name__)
    if isinstance(scorer, str):
        _check_model_spec(scorer, "scorer")
        return ModelSlot(factory=lambda: _loaded_scorer(scorer, kwargs), label=scorer)
    if isinstance(scorer, RagPositionLLM):
        inner = scorer.rag_model
        if isinstance(inner, Scorer):
            return ModelSlot(inner, label=scorer.model_name)
        raise TypeError(
            f"the RagPositionLLM over {type(inner).__name__} cannot score "
            f"(it has no score_spans); {SCORER_HELP}"
        )
    if isinstance(scorer, Scorer):
        return ModelSlot(scorer, label=str(getattr(scorer, "name", type(scorer).__name__)))
    if _is_openai_compatible(scorer):
        return ModelSlot(openai_scorer(scorer), label=str(scorer.model))
    raise TypeError(f"{_describe(scorer)} cannot score question likelihoods: {SCORER_HELP}")


def resolve_generator(
    llm: Any, load_kwargs: Mapping[str, Any] | None = None
) -> ModelSlot[Generator]:
    """What ``llm=`` accepts, as a :class:`ModelSlot` of a rag-position ``Generator``.

    A :class:`RagPositionLLM` is unwrapped (our model, batched); any other LlamaIndex
    ``LLM`` goes through :class:`LlamaIndexGenerator`.

    Example:
        >>> gen = resolve_generator(MockLLM()).get()
        >>> gen.generate(["Say hi"], max_new_tokens=4)              # MockLLM echoes
        ['Say hi']
    """
    kwargs = dict(load_kwargs or {})
    if not isinstance(llm, str):
        _reject_kwargs(kwargs, "llm_kwargs", "llm", type(llm).__name__)
    if isinstance(llm, str):
        _check_model_spec(llm, "llm")
        return ModelSlot(factory=lambda: _loaded_generator(llm, kwargs), label=llm)
    if isinstance(llm, RagPositionLLM):
        return ModelSlot(llm.rag_model, label=llm.model_name)
    if isinstance(llm, LLM):
        return ModelSlot(LlamaIndexGenerator(llm), label=type(llm).__name__)
    if isinstance(llm, Generator):
        return ModelSlot(llm, label=str(getattr(llm, "name", type(llm).__name__)))
    raise TypeError(f"{_describe(llm)} cannot generate: {GENERATOR_HELP}")


def resolve_embedder(
    embed_model: Any, load_kwargs: Mapping[str, Any] | None = None
) -> ModelSlot[Embedder]:
    """What ``embed_model=`` accepts, as a :class:`ModelSlot` of a rag-position ``Embedder``.

    Example:
        >>> resolve_embedder("embedded").get().embed(["a passage"]).shape
        (1, 384)
    """
    kwargs = dict(load_kwargs or {})
    if not isinstance(embed_model, str):
        _reject_kwargs(kwargs, "embed_kwargs", "embed_model", type(embed_model).__name__)
    if isinstance(embed_model, str):
        if not embed_model.strip():
            raise ModelSpecError(f"the embed_model spec is empty; {EMBEDDER_HELP}")
        return ModelSlot(factory=lambda: load_embedder(embed_model, **kwargs), label=embed_model)
    if isinstance(embed_model, RagPositionEmbedding):
        return ModelSlot(embed_model.rag_embedder, label=embed_model.model_name)
    if isinstance(embed_model, BaseEmbedding):
        return ModelSlot(LlamaIndexEmbedder(embed_model), label=embed_model.model_name)
    if isinstance(embed_model, Embedder):
        return ModelSlot(embed_model, label=type(embed_model).__name__)
    raise TypeError(f"{_describe(embed_model)} cannot embed: {EMBEDDER_HELP}")


def openai_scorer(llm: Any) -> Scorer:
    """rag-position's ``openai:`` backend at the same server, model and key as ``llm``.

    ``llm`` is an OpenAI-compatible LlamaIndex LLM (``OpenAILike``, ``OpenAI``): its
    ``api_base``, ``model``, ``api_key``, ``timeout`` and ``max_retries`` are read. The
    server must return prompt log-probabilities (``echo`` with ``logprobs``): vLLM and
    ``rag-position serve`` do; OpenAI's hosted chat models do not, and scoring then
    raises ``ScoringUnsupportedError`` on first use. Nothing is sent here.

    Example:
        >>> llm = OpenAILike(api_base="http://127.0.0.1:8000/v1", model="m", api_key="x")
        >>> openai_scorer(llm).score_spans([prompt], [(start, len(prompt))])
    """
    if not _is_openai_compatible(llm):
        raise TypeError(
            f"{_describe(llm)} is not an OpenAI-compatible LLM (no `api_base` and `model`)"
        )
    options: dict[str, Any] = {"model": llm.model}
    api_key = getattr(llm, "api_key", None)
    if isinstance(api_key, str) and api_key:
        options["api_key"] = api_key
    timeout = getattr(llm, "timeout", None)
    if isinstance(timeout, (int, float)) and timeout > 0:
        options["timeout"] = float(timeout)
    retries = getattr(llm, "max_retries", None)
    if isinstance(retries, int) and retries >= 0:
        options["max_retries"] = retries
    is_chat = getattr(llm, "is_chat_model", None)
    if isinstance(is_chat, bool):
        options["chat_template"] = is_chat  # generation only: scoring is always on the raw prompt
    model: Scorer = load_model("openai:" + str(llm.api_base), **options)
    return model


# ---------------------------------------------------------------------------- LlamaIndex -> ours
class LlamaIndexGenerator:
    """Any LlamaIndex ``LLM`` as a rag-position ``Generator`` (one ``complete`` per prompt).

    ``max_new_tokens``, ``temperature``, ``seed`` and ``stop`` are passed to
    ``llm.complete`` under the names of ``param_names`` (default: OpenAI's
    ``max_tokens``, ``temperature``, ``seed``, ``stop``; map one to ``None`` for a
    provider that rejects it). Stop strings are also applied to the returned text, so
    they hold even where the provider ignores them. Prompts go out one at a time.

    Example:
        >>> gen = LlamaIndexGenerator(OpenAILike(api_base=url, model="m", api_key="x"))
        >>> gen.generate(["What is the capital of France?"], max_new_tokens=8)
        ['Paris.']
    """

    def __init__(self, llm: LLM, *, param_names: Mapping[str, str | None] | None = None) -> None:
        if not isinstance(llm, LLM):
            raise TypeError(f"LlamaIndexGenerator wraps a LlamaIndex LLM, got {_describe(llm)}")
        names = {**DEFAULT_PARAM_NAMES, **(param_names or {})}
        unknown = sorted(set(names) - set(DEFAULT_PARAM_NAMES))
        if unknown:
            raise ValueError(f"unknown generation options in param_names: {unknown}")
        self.llm = llm
        self.param_names = names
        self.name = type(llm).__name__

    def generate(
        self,
        prompts: Sequence[str],
        *,
        max_new_tokens: int = 100,
        temperature: float = 0.0,
        seed: int | None = None,
        stop: Sequence[str] | None = None,
    ) -> list[str]:
        """One ``llm.complete`` per prompt, in order."""
        if isinstance(prompts, str):
            raise TypeError("`prompts` must be a sequence of strings, not a single str")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        values: dict[str, Any] = {"max_new_tokens": max_new_tokens, "temperature": temperature}
        if seed is not None:
            values["seed"] = seed
        if stop:
            values["stop"] = list(stop)
        kwargs = {
            name: values[option]
            for option, name in self.param_names.items()
            if name is not None and option in values
        }
        return [cut_at_stop(self.llm.complete(p, **kwargs).text, stop) for p in prompts]


class LlamaIndexEmbedder:
    """A LlamaIndex ``BaseEmbedding`` as a rag-position ``Embedder`` (unit float32 rows).

    Example:
        >>> LlamaIndexEmbedder(RagPositionEmbedding("embedded")).embed(["a", "b"]).shape
        (2, 384)
    """

    def __init__(self, embed_model: BaseEmbedding) -> None:
        if not isinstance(embed_model, BaseEmbedding):
            raise TypeError(
                f"LlamaIndexEmbedder wraps a LlamaIndex BaseEmbedding, got {_describe(embed_model)}"
            )
        self.embed_model = embed_model
        self.name = embed_model.model_name

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """``get_text_embedding_batch``, L2-normalised; a zero vector raises ``ValueError``."""
        if isinstance(texts, str):
            raise TypeError("`texts` must be a sequence of strings, not a single str")
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        rows = self.embed_model.get_text_embedding_batch(list(texts))
        vectors = np.asarray(rows, dtype=np.float64)
        if vectors.ndim != 2 or vectors.shape[0] != len(texts):
            raise ValueError(
                f"{self.name} returned embeddings of shape {vectors.shape} for {len(texts)} texts"
            )
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        bad = [i for i in range(len(texts)) if not np.isfinite(norms[i, 0]) or norms[i, 0] == 0]
        if bad:
            raise ValueError(
                f"{self.name} returned a zero or non-finite embedding for text(s) {bad}; "
                "it cannot be normalised to a unit vector"
            )
        unit: npt.NDArray[np.float32] = (vectors / norms).astype(np.float32)
        return unit


# ---------------------------------------------------------------------------- ours -> LlamaIndex
class RagPositionLLM(CustomLLM):
    """A LlamaIndex ``CustomLLM`` over a rag-position model (``load_model`` result or spec).

    ``model``: a spec string, loaded here at construction (``"embedded"``: SmolLM2-135M
    from an installed package, offline, ~15 s), or an object with ``generate`` (and
    ``score_spans``, which lets the same object serve as ``scorer=`` too: pass this
    LLM, it is unwrapped). ``complete`` honours ``max_tokens`` (or ``max_new_tokens``),
    ``temperature``, ``seed`` and ``stop`` keyword arguments over the defaults set
    here. Streaming yields the whole completion as one chunk.

    Example:
        >>> llm = RagPositionLLM("embedded", max_new_tokens=16)
        >>> llm.complete("What is the capital of France?").text
        'The capital of France is Paris.'
    """

    model_name: str = Field(default="", description="Name of the wrapped rag-position model.")
    max_new_tokens: int = Field(
        default=256, gt=0, description="Default number of tokens to generate per completion."
    )
    temperature: float = Field(
        default=0.0, ge=0.0, description="Default sampling temperature (0: greedy decoding)."
    )
    seed: int | None = Field(default=None, description="Default sampling seed (None: unseeded).")
    context_window: int = Field(
        default=2048, gt=0, description="The model's context window in tokens (read from it)."
    )
    _model: Any = PrivateAttr()

    def __init__(
        self,
        model: Any = "embedded",
        *,
        max_new_tokens: int = 256,
        temperature: float = 0.0,
        seed: int | None = None,
        load_kwargs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if isinstance(model, str):
            _check_model_spec(model, "model")
            loaded = load_model(model, **dict(load_kwargs or {}))
        elif load_kwargs:
            raise ValueError("`load_kwargs` only apply when `model` is a spec string")
        else:
            loaded = model
        if not isinstance(loaded, Generator) or isinstance(loaded, LLM):
            raise TypeError(
                f"RagPositionLLM wraps a rag-position Generator (an object with generate(...), "
                f"e.g. load_model('embedded')), got {_describe(loaded)}"
            )
        window = getattr(loaded, "max_context", None)
        if isinstance(window, int) and window > 0:
            kwargs.setdefault("context_window", window)
        super().__init__(
            model_name=str(getattr(loaded, "name", type(loaded).__name__)),
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            seed=seed,
            **kwargs,
        )
        self._model = loaded

    @classmethod
    def class_name(cls) -> str:
        """The LlamaIndex serialisation name."""
        return "RagPositionLLM"

    @property
    def rag_model(self) -> Any:
        """The wrapped rag-position model (a Generator, and a Scorer where it can score)."""
        return self._model

    @property
    def metadata(self) -> LLMMetadata:
        """Context window, output length and name, as LlamaIndex's prompt helper needs them."""
        return LLMMetadata(
            context_window=self.context_window,
            num_output=self.max_new_tokens,
            is_chat_model=False,
            model_name=self.model_name,
        )

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        """One greedy (or sampled) completion of ``prompt``."""
        if not formatted and self.completion_to_prompt is not None:
            prompt = self.completion_to_prompt(prompt)
        options = self._options(kwargs)
        text = self._model.generate([prompt], **options)[0]
        return CompletionResponse(text=text)

    @llm_completion_callback()
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        """The completion as one chunk (rag-position models do not stream)."""
        if not formatted and self.completion_to_prompt is not None:
            prompt = self.completion_to_prompt(prompt)
        text = self._model.generate([prompt], **self._options(kwargs))[0]

        def gen() -> CompletionResponseGen:
            yield CompletionResponse(text=text, delta=text)

        return gen()

    def _options(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        kwargs = dict(kwargs)
        max_new = kwargs.pop("max_new_tokens", None)
        max_tokens = kwargs.pop("max_tokens", None)
        if max_new is not None and max_tokens is not None and max_new != max_tokens:
            raise ValueError("pass either max_tokens or max_new_tokens, not both")
        options: dict[str, Any] = {
            "max_new_tokens": max_new or max_tokens or self.max_new_tokens,
            "temperature": kwargs.pop("temperature", self.temperature),
            "seed": kwargs.pop("seed", self.seed),
        }
        stop = kwargs.pop("stop", None)
        if stop:
            options["stop"] = [stop] if isinstance(stop, str) else list(stop)
        if kwargs:
            raise TypeError(
                f"RagPositionLLM.complete got unsupported options {sorted(kwargs)}; it takes "
                "max_tokens (or max_new_tokens), temperature, seed and stop"
            )
        return options


class RagPositionEmbedding(BaseEmbedding):
    """A LlamaIndex ``BaseEmbedding`` over a rag-position embedder (unit-norm vectors).

    ``embedder``: a spec string, loaded at construction (``"embedded"``:
    all-MiniLM-L6-v2 from an installed package, offline), or an object with
    ``embed(texts)``. Queries and texts are embedded the same way.

    Example:
        >>> embed_model = RagPositionEmbedding("embedded")
        >>> len(embed_model.get_text_embedding("Paris is the capital of France."))
        384
    """

    _embedder: Any = PrivateAttr()

    def __init__(
        self,
        embedder: Any = "embedded",
        *,
        load_kwargs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if isinstance(embedder, str):
            if not embedder.strip():
                raise ModelSpecError(f"the embedder spec is empty; {EMBEDDER_HELP}")
            loaded = load_embedder(embedder, **dict(load_kwargs or {}))
        elif load_kwargs:
            raise ValueError("`load_kwargs` only apply when `embedder` is a spec string")
        else:
            loaded = embedder
        if not isinstance(loaded, Embedder) or isinstance(loaded, BaseEmbedding):
            raise TypeError(
                "RagPositionEmbedding wraps a rag-position Embedder (an object with "
                f"embed(texts), e.g. load_embedder('embedded')), got {_describe(loaded)}"
            )
        kwargs.setdefault("model_name", str(getattr(loaded, "name", type(loaded).__name__)))
        super().__init__(**kwargs)
        self._embedder = loaded

    @classmethod
    def class_name(cls) -> str:
        """The LlamaIndex serialisation name."""
        return "RagPositionEmbedding"

    @property
    def rag_embedder(self) -> Any:
        """The wrapped rag-position embedder."""
        return self._embedder

    def _embed(self, texts: list[str]) -> list[Embedding]:
        vectors = np.asarray(self._embedder.embed(texts), dtype=np.float32)
        return [row.tolist() for row in vectors]

    def _get_query_embedding(self, query: str) -> Embedding:
        return self._embed([query])[0]

    async def _aget_query_embedding(self, query: str) -> Embedding:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> Embedding:
        return self._embed([text])[0]

    async def _aget_text_embedding(self, text: str) -> Embedding:
        return self._get_text_embedding(text)

    def _get_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return self._embed(list(texts))

    async def _aget_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return self._get_text_embeddings(texts)


# ---------------------------------------------------------------------------- helpers
def cut_at_stop(text: str, stop: Sequence[str] | None) -> str:
    """``text`` up to the first occurrence of any stop string."""
    if not stop:
        return text
    cut = min((i for s in stop if s and (i := text.find(s)) >= 0), default=len(text))
    return text[:cut]


def _check_model_spec(spec: str, what: str) -> None:
    """The form of a load_model spec (loading, and its own errors, come later)."""
    known = spec == "embedded" or (
        any(spec.startswith(p) and len(spec) > len(p) for p in ("hf:", "openai:"))
    )
    if not known:
        raise ModelSpecError(
            f"unknown model spec {spec!r} for `{what}`; accepted: {ACCEPTED_SPECS}"
        )


def _loaded_scorer(spec: str, kwargs: dict[str, Any]) -> Scorer:
    model = load_model(spec, **kwargs)
    if not isinstance(model, Scorer):
        raise TypeError(f"the model loaded from {spec!r} cannot score: {SCORER_HELP}")
    return model


def _loaded_generator(spec: str, kwargs: dict[str, Any]) -> Generator:
    model = load_model(spec, **kwargs)
    if not isinstance(model, Generator):
        raise TypeError(f"the model loaded from {spec!r} cannot generate: {GENERATOR_HELP}")
    return model


def _is_openai_compatible(obj: Any) -> bool:
    """A LlamaIndex LLM with a non-empty ``api_base`` and ``model`` (duck-typed: no import)."""
    if not isinstance(obj, LLM):
        return False
    base, model = getattr(obj, "api_base", None), getattr(obj, "model", None)
    return isinstance(base, str) and bool(base) and isinstance(model, str) and bool(model)


def _reject_kwargs(kwargs: Mapping[str, Any], field: str, what: str, kind: str) -> None:
    if kwargs:
        raise ValueError(
            f"`{field}` {sorted(kwargs)} only apply when `{what}` is a spec string, "
            f"not a {kind} object"
        )


def _describe(obj: Any) -> str:
    text = repr(obj)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{type(obj).__name__} object {text}"
