"""``ChatRagPosition``: any rag-position model (the embedded SmolLM2 by default) as a chat model."""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.base import LangSmithParams
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
)
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import Field, PrivateAttr, model_validator

from rag_position._integration import LazyModel, conversation, secret_name
from rag_position.cost import metered
from rag_position.models import check_spec, find_backend
from rag_position.models.protocols import cut_at_stop

GENERATOR_FORMS = (
    "a LangChain chat model or LLM, a load_model spec string, or an object with generate() "
    "(rag_position's Generator protocol)"
)
"""What the integration's ``llm=`` takes (here, not in ``_adapters``: it imports this module)."""


_SHARED: weakref.WeakValueDictionary[str, LazyModel[Any]] = weakref.WeakValueDictionary()
"""The model of each spec and load keywords that some ChatRagPosition holds."""
_SHARED_LOCK = threading.Lock()
_MODEL_LOCKS: weakref.WeakKeyDictionary[Any, threading.Lock] = weakref.WeakKeyDictionary()
"""One lock a local model, whichever ChatRagPosition runs it: it runs one call at a time."""


def _model_lock(model: Any) -> threading.Lock:
    with _SHARED_LOCK:
        lock = _MODEL_LOCKS.get(model)
        if lock is None:
            lock = _MODEL_LOCKS[model] = threading.Lock()
        return lock


def _identity(value: Any) -> str:
    """A load keyword that is not JSON, in the shared models' key: the object itself."""
    return f"<{type(value).__name__} at {id(value):#x}>"


class ChatRagPosition(BaseChatModel):
    """A rag-position model (``load_model`` spec or object) as a LangChain chat model.

    ``model`` is a ``load_model`` spec string (``"embedded"``: SmolLM2-135M-Instruct,
    offline; ``"hf:<path>"``; ``"openai:<base_url>"``), loaded on first use and shared by
    every ChatRagPosition of the same spec and ``model_kwargs`` (a copy, or a
    ``configurable_fields`` call, loads nothing again), or an already loaded Generator
    (e.g. ``load_model("embedded")``).
    ``max_tokens``, ``temperature``, ``seed`` and ``stop`` are the generation
    settings (a call's ``stop=`` and bound ``max_tokens``/``temperature``/``seed``
    override them). One user message is the model's prompt as it is; a longer
    conversation (system, human and AI messages) is rendered with the model's chat
    template, which needs a local transformers model. The same object can be the
    ``scorer=`` of our compressors when its model scores (local models do). Replies
    report ``usage_metadata`` from the model's token counts. ``stream`` yields the
    whole reply as one chunk (the core generates in batches, not token by token).

    Example:
        >>> llm = ChatRagPosition(model="embedded", max_tokens=16)
        >>> llm.invoke("What is the capital of France?").content
        'The capital of France is Paris.'
    """

    model: Any = Field(
        default="embedded", description="A load_model spec string or a rag-position Generator."
    )
    model_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Keyword arguments for load_model (spec strings only)."
    )
    temperature: float = Field(default=0.0, ge=0.0, description="0 is greedy decoding.")
    max_tokens: int = Field(default=256, ge=1, description="Most tokens to generate.")
    seed: int | None = Field(default=None, description="Sampling seed (temperature > 0).")
    stop: list[str] | None = Field(default=None, description="Stop strings.")
    timeout: float | None = Field(default=None, description="Seconds, for 'openai:' specs.")
    max_retries: int | None = Field(default=None, description="Retries, for 'openai:' specs.")

    _lazy: LazyModel[Any] = PrivateAttr()

    @model_validator(mode="after")
    def _resolve(self) -> ChatRagPosition:
        model = self.model
        if isinstance(model, str):
            check_spec(model, "model")
            kwargs = dict(self.model_kwargs)
            backend = find_backend(model)
            if backend is not None and not backend.local:  # a server
                if self.timeout is not None:
                    kwargs.setdefault("timeout", self.timeout)
                if self.max_retries is not None:
                    kwargs.setdefault("max_retries", self.max_retries)

            def load() -> Any:
                from rag_position.models import load_model

                return load_model(model, **kwargs)

            key = json.dumps([model, kwargs], sort_keys=True, default=_identity)
            with _SHARED_LOCK:  # one model a spec: a copy or configured field loads no other
                lazy = _SHARED.get(key)
                if lazy is None:
                    lazy = _SHARED[key] = LazyModel(loader=load, label=repr(model))
            self._lazy = lazy
        else:
            if self.model_kwargs:
                raise ValueError("`model_kwargs` only applies when `model` is a spec string")
            if isinstance(model, BaseChatModel) or not callable(getattr(model, "generate", None)):
                raise TypeError(
                    f"ChatRagPosition wraps a rag-position model, got a {type(model).__name__}; "
                    f"pass a load_model spec string or a Generator (not {GENERATOR_FORMS})"
                )
            self._lazy = LazyModel(model, label=type(model).__name__)
        return self

    # ------------------------------------------------------------------ the model
    @property
    def core_model(self) -> Any:
        """The rag-position model behind this chat model (loaded on first access)."""
        return self._lazy.get()

    @property
    def is_loaded(self) -> bool:
        """Whether the model is in memory already."""
        loaded: bool = self._lazy.loaded
        return loaded

    @property
    def model_name(self) -> str:
        """The spec string, or the loaded model's ``name``."""
        if isinstance(self.model, str):
            return self.model
        return str(getattr(self.model, "name", None) or type(self.model).__name__)

    @property
    def _llm_type(self) -> str:
        return "rag-position"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {  # LangChain's cache key and traces: what changes an answer, no credential
            "model_name": self.model_name,
            "model_kwargs": {k: v for k, v in self.model_kwargs.items() if not secret_name(k)},
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "default_stop": self.stop,  # "stop" is the call's: LangChain overwrites it
        }

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        params = LangSmithParams(
            ls_provider="rag_position",
            ls_model_name=str(kwargs.get("model") or self.model_name),
            ls_model_type="chat",
            ls_temperature=kwargs.get("temperature", self.temperature),
            ls_max_tokens=kwargs.get("max_tokens", self.max_tokens),
        )
        stops = stop or self.stop
        if stops:
            params["ls_stop"] = list(stops)
        return params

    # ------------------------------------------------------------------ generation
    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        text, usage = self._complete(messages, stop, **kwargs)
        message = AIMessage(
            content=text,
            usage_metadata=usage,
            response_metadata={"model_name": self.model_name, "model_provider": "rag_position"},
        )
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        text, usage = self._complete(messages, stop, **kwargs)
        chunk = ChatGenerationChunk(
            message=AIMessageChunk(
                content=text,
                usage_metadata=usage,
                response_metadata={"model_name": self.model_name, "model_provider": "rag_position"},
                chunk_position="last",
            )
        )
        if run_manager is not None:
            run_manager.on_llm_new_token(text, chunk=chunk)
        yield chunk

    def _complete(
        self, messages: Sequence[BaseMessage], stop: list[str] | None, **kwargs: Any
    ) -> tuple[str, UsageMetadata | None]:
        stops = [s for s in (stop if stop is not None else self.stop) or [] if s]
        given = {k: v for k, v in kwargs.items() if v is not None}  # None: this model's own
        max_tokens = int(given.get("max_tokens", self.max_tokens))
        temperature = float(given.get("temperature", self.temperature))
        seed = given.get("seed", self.seed)
        base = self.core_model
        prompt, model = self._prompt(messages, base)  # a conversation: a view of its weights
        local = type(model).__name__ == "TransformersModel"
        lock = _model_lock(base) if local else _NoLock()
        with lock, metered() as tally:  # a local model runs one call at a time
            (text,) = model.generate(
                [prompt],
                max_new_tokens=max_tokens,
                temperature=temperature,
                seed=seed,
                stop=stops or None,
            )
        usage: UsageMetadata | None = None
        if tally.records:  # this call's own cost, whoever else shares the model
            spent = tally.total
            usage = UsageMetadata(
                input_tokens=spent.prompt_tokens,
                output_tokens=spent.generated_tokens,
                total_tokens=spent.prompt_tokens + spent.generated_tokens,
            )
        return cut_at_stop(str(text), stops), usage

    def _prompt(self, messages: Sequence[BaseMessage], model: Any) -> tuple[str, Any]:
        """The prompt string and the model to send it to."""
        if not messages:
            raise ValueError("ChatRagPosition got no messages")
        if len(messages) == 1 and isinstance(messages[0], HumanMessage):
            return str(messages[0].text), model
        turns = []
        for m in messages:
            if isinstance(m, SystemMessage):
                role = "system"
            elif isinstance(m, HumanMessage):
                role = "user"
            elif isinstance(m, AIMessage):
                role = "assistant"
            elif isinstance(m, ChatMessage) and m.role in ("system", "user", "assistant"):
                role = m.role
            else:
                raise ValueError(
                    f"ChatRagPosition cannot render a {type(m).__name__} (no tool calling); "
                    "use system, human and AI messages (or a ChatMessage of those roles)"
                )
            turns.append((role, str(m.text)))
        return conversation(model, turns, "ChatRagPosition", one="human")


class _NoLock:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
