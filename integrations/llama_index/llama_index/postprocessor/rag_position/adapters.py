"""Adapters between LlamaIndex models and rag-position's three protocols, both ways.

LlamaIndex -> rag-position: :class:`LlamaIndexGenerator` (any ``LLM`` as a
``Generator``), :class:`LlamaIndexEmbedder` (any ``BaseEmbedding`` as an
``Embedder``), and an OpenAI-compatible ``LLM`` (``OpenAILike``, ``OpenAI``) as a
``Scorer`` through rag-position's ``openai:`` backend. rag-position -> LlamaIndex:
:class:`RagPositionLLM` (a ``CustomLLM`` over any ``load_model`` result, e.g. the
embedded SmolLM2) and :class:`RagPositionEmbedding` (a ``BaseEmbedding`` over our
embedder, e.g. the embedded all-MiniLM-L6-v2).

The ``resolve_*`` functions turn what a user passes as ``scorer=`` / ``llm=`` /
``embed_model=`` into a :class:`rag_position._integration.LazyModel`: objects are
checked at once (a clear ``TypeError`` when they cannot do the job); spec strings are
checked for form at once and loaded on first use, once per component. The
framework-free part is :mod:`rag_position._integration`, shared with the LangChain package.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding
from llama_index.core.base.llms.generic_utils import (
    messages_to_prompt as generic_messages_to_prompt,
)
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    ChatResponseGen,
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
)
from llama_index.core.bridge.pydantic import BaseModel, Field, PrivateAttr, field_serializer
from llama_index.core.llms import LLM
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.llms.custom import CustomLLM

from rag_position import _integration as core
from rag_position._integration import LazyModel, check_spec, cut_at_stop
from rag_position.errors import ModelSpecError
from rag_position.models import Embedder, Generator, Scorer, load_embedder, load_model

SCORER_HELP = (
    "one of: a load_model spec string ('embedded', 'hf:<path>', "
    "'openai:<base_url>' with scorer_kwargs={'model': ...}); an object with "
    "score_spans(prompts, spans) (a rag_position Scorer, e.g. load_model('embedded')); a "
    "RagPositionLLM over such a model; or an OpenAI-compatible LlamaIndex LLM (OpenAILike, "
    "OpenAI: an `api_base` and a `model`) pointed at a server that returns prompt "
    "log-probabilities (vLLM, `rag-position serve`)"
)
GENERATOR_HELP = (
    "one of: a LlamaIndex LLM (llama_index.core.llms.LLM), a load_model spec "
    "string ('embedded', 'hf:<path>', 'openai:<base_url>'), or an object with "
    "generate(prompts, *, max_new_tokens, temperature, seed, stop) (a rag_position Generator)"
)
EMBEDDER_HELP = (
    "one of: a LlamaIndex BaseEmbedding, an embedder spec string "
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


# ---------------------------------------------------------------------------- resolving
def resolve_scorer(scorer: Any, load_kwargs: Mapping[str, Any] | None = None) -> LazyModel[Scorer]:
    """What ``scorer=`` accepts, as a :class:`~rag_position._integration.LazyModel` of a ``Scorer``.

    Raises ``TypeError`` naming the object when it cannot score (e.g. ``MockLLM``).

    Example:
        >>> resolve_scorer("embedded").loaded                    # loaded on first use
        False
        >>> resolve_scorer(OpenAILike(api_base=url, model="m", api_key="x")).loaded
        True
    """
    table = [(RagPositionLLM, _unwrapped_scorer), (LLM, _llm_scorer)]
    return core.resolve_scorer(scorer, load_kwargs, adapters=table, forms=SCORER_HELP)


def resolve_generator(
    llm: Any, load_kwargs: Mapping[str, Any] | None = None
) -> LazyModel[Generator]:
    """What ``llm=`` accepts, as a :class:`~rag_position._integration.LazyModel` of a ``Generator``.

    A :class:`RagPositionLLM` is unwrapped (our model, batched); any other LlamaIndex
    ``LLM`` goes through :class:`LlamaIndexGenerator`.

    Example:
        >>> gen = resolve_generator(MockLLM()).get()
        >>> gen.generate(["Say hi"], max_new_tokens=4)              # MockLLM echoes
        ['Say hi']
    """
    table = [(RagPositionLLM, _core_model), (LLM, LlamaIndexGenerator)]
    return core.resolve_generator(llm, load_kwargs, adapters=table, forms=GENERATOR_HELP)


def resolve_embedder(
    embed_model: Any, load_kwargs: Mapping[str, Any] | None = None
) -> LazyModel[Embedder]:
    """What ``embed_model=`` accepts, as a :class:`~rag_position._integration.LazyModel` of an
    ``Embedder``.

    Example:
        >>> resolve_embedder("embedded").get().embed(["a passage"]).shape
        (1, 384)
    """
    return core.resolve_embedder(
        embed_model,
        load_kwargs,
        adapters=[(RagPositionEmbedding, _core_embedder), (BaseEmbedding, LlamaIndexEmbedder)],
        forms=EMBEDDER_HELP,
        what="embed_model",
        kwargs_name="embed_kwargs",
    )


def _unwrapped_scorer(llm: RagPositionLLM) -> Scorer:
    inner = llm.core_model
    if isinstance(inner, Scorer):
        return inner
    raise TypeError(
        f"the RagPositionLLM over {type(inner).__name__} cannot score "
        f"(it has no score_spans); pass {SCORER_HELP}"
    )


def _llm_scorer(llm: LLM) -> Scorer:
    if _is_openai_compatible(llm):
        return openai_scorer(llm)
    if isinstance(llm, Scorer):
        return llm
    raise TypeError(f"{_describe(llm)} cannot score question likelihoods; pass {SCORER_HELP}")


def _core_model(llm: RagPositionLLM) -> Generator:
    model: Generator = llm.core_model
    return model


def _core_embedder(embed_model: RagPositionEmbedding) -> Embedder:
    embedder: Embedder = embed_model.core_embedder
    return embedder


def openai_scorer(llm: Any) -> Scorer:
    """rag-position's ``openai:`` backend at the same server, model and key as ``llm``.

    ``llm`` is an OpenAI-compatible LlamaIndex LLM (``OpenAILike``, ``OpenAI``): its
    ``api_base``, ``model``, ``api_key``, ``timeout``, ``max_retries`` and
    ``is_chat_model`` go to :func:`rag_position._integration.openai_scorer`. The server
    must return prompt log-probabilities (vLLM and ``rag-position serve`` do); scoring
    raises ``ScoringUnsupportedError`` on first use otherwise. Nothing is sent here.

    Example:
        >>> llm = OpenAILike(api_base="http://127.0.0.1:8000/v1", model="m", api_key="x")
        >>> openai_scorer(llm).score_spans([prompt], [(start, len(prompt))])
    """
    if not _is_openai_compatible(llm):
        raise TypeError(
            f"{_describe(llm)} is not an OpenAI-compatible LLM (no `api_base` and `model`)"
        )
    api_key = getattr(llm, "api_key", None)
    return core.openai_scorer(
        llm.api_base,
        llm.model,
        api_key=api_key if isinstance(api_key, str) else None,
        timeout=getattr(llm, "timeout", None),
        max_retries=getattr(llm, "max_retries", None),
        chat_template=getattr(llm, "is_chat_model", None),
        label=_describe(llm),
    )


# ---------------------------------------------------------------------------- LlamaIndex -> ours
class EmbedModelFields(BaseModel):
    """An optional ``embed_model=`` and its load keywords, for a component that may embed."""

    embed_model: Any = Field(
        default=None,
        description=(
            "Optional: what the component embeds with (a LlamaIndex BaseEmbedding, "
            "'embedded', or a rag-position Embedder)."
        ),
    )
    embed_kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description="Keyword arguments for load_embedder when `embed_model` is a spec string.",
    )

    def resolve_embed_model(self, needed_by: str | None = None) -> LazyModel[Embedder] | None:
        """The embedder these fields name (``None`` for none, unless ``needed_by`` needs one)."""
        return core.optional_embedder(
            type(self).__name__,
            self.embed_model,
            self.embed_kwargs,
            resolve_embedder,
            field="embed_model",
            kwargs_field="embed_kwargs",
            needed_by=needed_by,
        )

    @field_serializer("embed_model")
    def _serialize_embed_model(self, embed_model: Any) -> str | None:
        if embed_model is None or isinstance(embed_model, str):
            return embed_model
        return f"<{type(embed_model).__name__}>"


class LlamaIndexGenerator(core.AdaptedGenerator):
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

    def complete_all(self, prompts: list[str], options: core.GenerationOptions) -> list[str]:
        """One ``llm.complete`` per prompt, in order."""
        values: dict[str, Any] = {
            "max_new_tokens": options.max_new_tokens,
            "temperature": options.temperature,
        }
        if options.seed is not None:
            values["seed"] = options.seed
        if options.stop:
            values["stop"] = list(options.stop)
        kwargs = {
            name: values[option]
            for option, name in self.param_names.items()
            if name is not None and option in values
        }
        return [self.llm.complete(p, **kwargs).text for p in prompts]


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
        rows = self.embed_model.get_text_embedding_batch(list(texts)) if texts else []
        unit: npt.NDArray[np.float32] = core.unit_rows(rows, len(texts), self.name)
        return unit

    def embed_query(self, query: str) -> npt.NDArray[np.float32]:
        """``get_query_embedding`` (a model may embed a question unlike a passage), as a
        unit vector: what ``similar=`` and FACT compare the passages with."""
        unit: npt.NDArray[np.float32] = core.unit_rows(
            [self.embed_model.get_query_embedding(query)], 1, self.name
        )[0]
        return unit


# ---------------------------------------------------------------------------- ours -> LlamaIndex
_ROLES = {"developer": "system", "chatbot": "assistant", "model": "assistant"}
"""LlamaIndex's other names of the chat template's roles."""


class _Loaded(BaseModel):
    """How a wrapper's model was loaded, for ``to_dict``/``from_dict``: a spec's, again."""

    spec: str | None = Field(
        default=None, description="The spec string the model was loaded from (None: an object)."
    )
    load_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Its loader's keyword arguments (spec strings only)."
    )

    @field_serializer("load_kwargs")
    def _serialize_load_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        return core.shareable_kwargs(kwargs)  # no credential; what is not JSON as its repr


class RagPositionLLM(CustomLLM, _Loaded):
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
        model = core.serialised_model(type(self).__name__, model, kwargs, "model_name")
        if isinstance(model, str):
            check_spec(model, "model")
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
            spec=model if isinstance(model, str) else None,
            load_kwargs=dict(load_kwargs or {}),
            **kwargs,
        )
        self._model = loaded

    @classmethod
    def class_name(cls) -> str:
        """The LlamaIndex serialisation name."""
        return "RagPositionLLM"

    @property
    def core_model(self) -> Any:
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

    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        """The conversation as the model's chat template renders it, roles kept (a model
        without one, or a ``messages_to_prompt`` of your own: that prompt, completed)."""
        return ChatResponse(
            message=ChatMessage(role="assistant", content=self._chat(messages, kwargs))
        )

    @llm_chat_callback()
    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        """The reply as one chunk (rag-position models do not stream)."""
        text = self._chat(messages, kwargs)

        def gen() -> ChatResponseGen:
            yield ChatResponse(message=ChatMessage(role="assistant", content=text), delta=text)

        return gen()

    def _chat(self, messages: Sequence[ChatMessage], kwargs: dict[str, Any]) -> str:
        options = self._options(kwargs)
        if self.messages_to_prompt is generic_messages_to_prompt:
            turns = [(_ROLES.get(m.role.value, m.role.value), m.content or "") for m in messages]
            if all(role in ("system", "user", "assistant") for role, _ in turns):
                try:
                    prompt, model = core.conversation(self._model, turns, "RagPositionLLM")
                except Exception:
                    pass  # (a system role, turns that do not alternate): the generic one
                else:
                    return str(model.generate([prompt], **options)[0])
        prompt = (self.messages_to_prompt or generic_messages_to_prompt)(messages)
        return str(self._model.generate([prompt], **options)[0])

    def _options(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        kwargs = dict(kwargs)
        max_new = kwargs.pop("max_new_tokens", None)
        max_tokens = kwargs.pop("max_tokens", None)
        if max_new is not None and max_tokens is not None and max_new != max_tokens:
            raise ValueError("pass either max_tokens or max_new_tokens, not both")
        options: dict[str, Any] = {
            "max_new_tokens": next(
                (n for n in (max_new, max_tokens) if n is not None), self.max_new_tokens
            ),
            "temperature": kwargs.pop("temperature", self.temperature),
            "seed": kwargs.pop("seed", self.seed),
        }
        if not isinstance(options["max_new_tokens"], int) or options["max_new_tokens"] < 1:
            raise ValueError(f"max_tokens must be an int >= 1, got {options['max_new_tokens']!r}")
        stop = kwargs.pop("stop", None)
        if stop:
            options["stop"] = [stop] if isinstance(stop, str) else list(stop)
        if kwargs:
            raise TypeError(
                f"RagPositionLLM.complete got unsupported options {sorted(kwargs)}; it takes "
                "max_tokens (or max_new_tokens), temperature, seed and stop"
            )
        return options


class RagPositionEmbedding(BaseEmbedding, _Loaded):
    """A LlamaIndex ``BaseEmbedding`` over a rag-position embedder (unit-norm vectors).

    ``embedder``: a spec string, loaded at construction (``"embedded"``:
    all-MiniLM-L6-v2 from an installed package, offline), or an object with
    ``embed(texts)``. A query goes through the embedder's ``embed_query`` where it has one
    (a model that embeds a question unlike a passage), else as a text.

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
        embedder = core.serialised_model(type(self).__name__, embedder, kwargs)
        if isinstance(embedder, str):
            if not embedder.strip():
                raise ModelSpecError(f"the embedder spec is empty; pass {EMBEDDER_HELP}")
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
        spec = embedder if isinstance(embedder, str) else None
        super().__init__(spec=spec, load_kwargs=dict(load_kwargs or {}), **kwargs)  # type: ignore[call-arg]
        self._embedder = loaded

    @classmethod
    def class_name(cls) -> str:
        """The LlamaIndex serialisation name."""
        return "RagPositionEmbedding"

    @property
    def core_embedder(self) -> Any:
        """The wrapped rag-position embedder."""
        return self._embedder

    def _embed(self, texts: list[str]) -> list[Embedding]:
        vectors = np.asarray(self._embedder.embed(texts), dtype=np.float32)
        return [row.tolist() for row in vectors]

    def _get_query_embedding(self, query: str) -> Embedding:
        own = getattr(self._embedder, "embed_query", None)  # a question embedded apart
        if callable(own):
            return [float(x) for x in np.asarray(own(query), dtype=np.float32)]
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
def _is_openai_compatible(obj: Any) -> bool:
    """A LlamaIndex LLM with a non-empty ``api_base`` and ``model`` (duck-typed: no import)."""
    if not isinstance(obj, LLM):
        return False
    base, model = getattr(obj, "api_base", None), getattr(obj, "model", None)
    return isinstance(base, str) and bool(base) and isinstance(model, str) and bool(model)


def _describe(obj: Any) -> str:
    text = repr(obj)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{type(obj).__name__} object {text}"


__all__ = [
    "LlamaIndexEmbedder",
    "LlamaIndexGenerator",
    "RagPositionEmbedding",
    "RagPositionLLM",
    "cut_at_stop",
    "openai_scorer",
    "resolve_embedder",
    "resolve_generator",
    "resolve_scorer",
]
