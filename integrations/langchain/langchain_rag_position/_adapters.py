"""LangChain objects mapped onto rag-position's framework-free adapter layer.

Everything framework-free (the lazy holder, spec checks, model resolution, the
OpenAI-compatible scorer, option defaults, the reorder record) is in
:mod:`rag_position._integration`; this module only maps LangChain objects to it:
Documents to :class:`~rag_position.passages.Passage` views and back (annotated
copies), a LangChain chat model or LLM to a ``Generator``, LangChain ``Embeddings``
to an ``Embedder``, and ``ChatOpenAI``/``OpenAI`` to the values of the ``openai:``
backend.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseLanguageModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableWithFallbacks
from langchain_core.runnables.base import RunnableBindingBase
from pydantic import BaseModel, Field

from langchain_rag_position.chat_models import GENERATOR_FORMS, ChatRagPosition
from langchain_rag_position.embeddings import RagPositionEmbeddings
from rag_position import _integration as core
from rag_position._integration import METADATA_KEY, LazyModel, check_spec, cut_at_stop
from rag_position.models import Scorer
from rag_position.passages import Passage

SCORER_FORMS = (
    "a load_model spec string, an object with score_spans() (rag_position's Scorer protocol, "
    "e.g. load_model('embedded')), ChatRagPosition, or an OpenAI-compatible LangChain model "
    "(ChatOpenAI/OpenAI with base_url=) pointed at a server that returns prompt "
    "log-probabilities (vLLM, rag-position serve)"
)
EMBEDDER_FORMS = (
    "a LangChain Embeddings object, the spec string 'embedded' (or a sentence-transformers "
    "name), or an object with embed() (rag_position's Embedder protocol)"
)
_MAX_TOKEN_FIELDS = ("max_tokens", "max_new_tokens", "max_output_tokens", "num_predict")


def _describe(obj: Any) -> str:
    return f"{type(obj).__module__}.{type(obj).__name__} object"


# ---------------------------------------------------------------------- models
def _chat_scorer(chat: Any) -> LazyModel[Any]:
    """A ChatRagPosition's own model, as a scorer (checked now if loaded, else on loading)."""
    if chat.is_loaded:
        core.need_scorer(chat.core_model, _describe(chat))
    return LazyModel(
        loader=lambda: chat.core_model,
        label=_describe(chat),
        check=lambda m: core.need_scorer(m, _describe(chat)),
    )


def _own_model(chat: Any) -> LazyModel[Any]:
    return LazyModel(loader=lambda: chat.core_model, label=_describe(chat))


def _own_embedder(wrapper: Any) -> LazyModel[Any]:
    return LazyModel(loader=lambda: wrapper.core_embedder, label=_describe(wrapper))


def resolve_scorer(scorer: Any, load_kwargs: Mapping[str, Any] | None = None) -> LazyModel[Any]:
    """A :class:`LazyModel` yielding a Scorer (see :data:`SCORER_FORMS`)."""
    table = [(ChatRagPosition, _chat_scorer), (BaseLanguageModel, openai_scorer)]
    return core.resolve_scorer(scorer, load_kwargs, adapters=table, forms=SCORER_FORMS)


def openai_scorer(llm: BaseLanguageModel[Any]) -> Scorer:
    """Our OpenAI backend pointed where an OpenAI-compatible LangChain model points.

    Reads ``openai_api_base``, ``model_name``, ``openai_api_key``, ``request_timeout`` and
    ``max_retries`` (so ``langchain-openai`` is needed only by the user who has such a
    model) and hands them to :func:`rag_position._integration.openai_scorer`.
    """
    if not hasattr(llm, "openai_api_base"):
        raise TypeError(
            f"{_describe(llm)} cannot score question likelihoods: LangChain chat models and "
            "LLMs do not return prompt log-probabilities, except OpenAI-compatible ones "
            f"pointed at a server that does. Pass {SCORER_FORMS}"
        )
    key = getattr(llm, "openai_api_key", None)
    if key is not None and hasattr(key, "get_secret_value"):
        key = key.get_secret_value()
    return core.openai_scorer(
        llm.openai_api_base,
        getattr(llm, "model_name", None) or getattr(llm, "model", None),
        api_key=key,
        timeout=getattr(llm, "request_timeout", None),
        max_retries=getattr(llm, "max_retries", None),
        label=_describe(llm),
    )


def resolve_generator(
    llm: Any, load_kwargs: Mapping[str, Any] | None = None, *, max_concurrency: int | None = None
) -> LazyModel[Any]:
    """A :class:`LazyModel` yielding a Generator (see :data:`GENERATOR_FORMS`).

    A ``ChatRagPosition`` gives its own model (one batched call, no LangChain round
    trip); any other LangChain model is wrapped in :class:`LangChainGenerator`: it
    comes before the protocol, as every LangChain model has a (different) generate(),
    and a RunnableBinding (llm.bind(...)) forwards attribute lookups to its model.
    """
    wrap = functools.partial(LangChainGenerator, max_concurrency=max_concurrency)
    table: list[tuple[Any, Callable[[Any], Any]]] = [
        (ChatRagPosition, _own_model),
        ((BaseLanguageModel, Runnable), wrap),
    ]
    return core.resolve_generator(llm, load_kwargs, adapters=table, forms=GENERATOR_FORMS)


def resolve_embedder(
    embeddings: Any, load_kwargs: Mapping[str, Any] | None = None
) -> LazyModel[Any]:
    """A :class:`LazyModel` yielding an Embedder (see :data:`EMBEDDER_FORMS`)."""
    table = [(RagPositionEmbeddings, _own_embedder), (Embeddings, LangChainEmbedder)]
    return core.resolve_embedder(embeddings, load_kwargs, adapters=table, forms=EMBEDDER_FORMS)


class EmbeddingsFields(BaseModel):
    """``embeddings=`` and its load keywords, for a component that embeds."""

    embeddings: Any = Field(
        default=None, description="LangChain Embeddings, 'embedded', or an Embedder."
    )
    embeddings_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="load_embedder keyword arguments (spec strings only)."
    )

    def resolve_embeddings(self, needed_by: str | None = None) -> LazyModel[Any] | None:
        """The embedder these fields name (``None`` for none, unless ``needed_by`` needs one)."""
        return core.optional_embedder(
            type(self).__name__,
            self.embeddings,
            self.embeddings_kwargs,
            resolve_embedder,
            field="embeddings",
            kwargs_field="embeddings_kwargs",
            needed_by=needed_by,
        )


class LangChainGenerator(core.AdaptedGenerator):
    """A LangChain chat model or LLM (or a runnable around one) as rag-position's ``Generator``.

    ``generate`` sends the prompts through the model's ``batch`` (each prompt one
    user message for a chat model), with a copy of the model whose token limit
    (the first of ``max_tokens``, ``max_new_tokens``, ``max_output_tokens``,
    ``num_predict`` it has), ``temperature`` and ``seed`` fields are set to the
    requested values when it has such fields; ``stop`` goes to the call and every
    output is also cut before the first stop string (some providers ignore it).

    Example:
        >>> from langchain_core.language_models import FakeListChatModel
        >>> LangChainGenerator(FakeListChatModel(responses=["Paris. More"])).generate(
        ...     ["Capital of France?"], stop=["."])
        ['Paris']
    """

    def __init__(self, llm: Runnable[Any, Any], *, max_concurrency: int | None = None) -> None:
        if not isinstance(llm, Runnable):
            raise TypeError(f"expected a LangChain chat model or LLM, got {_describe(llm)}")
        self.llm = llm
        self.max_concurrency = max_concurrency
        self.name = str(getattr(llm, "model_name", None) or type(llm).__name__)

    def configured(
        self, max_new_tokens: int, temperature: float, seed: int | None
    ) -> Runnable[Any, Any]:
        """The model with the generation settings this call asks for (a shallow copy); in a
        wrapper (``bind``, ``with_config``, ``with_retry``, ``with_fallbacks``) the model it
        wraps is the one copied, and the wrapper kept around the copy."""
        settings = {"temperature": temperature, **({} if seed is None else {"seed": seed})}
        return _with_settings(self.llm, max_new_tokens, settings)

    def complete_all(self, prompts: list[str], options: core.GenerationOptions) -> list[str]:
        """The prompts through the configured model's ``batch``."""
        model = self.configured(options.max_new_tokens, options.temperature, options.seed)
        config: dict[str, Any] = {}
        if self.max_concurrency is not None:
            config["max_concurrency"] = self.max_concurrency
        outputs = model.batch(prompts, config or None, stop=options.stop or None)  # type: ignore[arg-type]
        return [output_text(o) for o in outputs]


def _with_settings(
    llm: Runnable[Any, Any], max_new_tokens: int, settings: dict[str, Any]
) -> Runnable[Any, Any]:
    """``llm``, or a copy of it (or of the model inside its wrappers) with the token limit
    and ``settings`` set on the fields the model has; unchanged when it has none."""
    if isinstance(llm, RunnableBindingBase):
        return llm.model_copy(update={"bound": _with_settings(llm.bound, max_new_tokens, settings)})
    if isinstance(llm, RunnableWithFallbacks):
        return llm.model_copy(
            update={
                "runnable": _with_settings(llm.runnable, max_new_tokens, settings),
                "fallbacks": [_with_settings(f, max_new_tokens, settings) for f in llm.fallbacks],
            }
        )
    fields = getattr(type(llm), "model_fields", {})
    update = {name: value for name, value in settings.items() if name in fields}
    token_field = next((f for f in _MAX_TOKEN_FIELDS if f in fields), None)
    if token_field is not None:
        update[token_field] = max_new_tokens
    if not update:
        return llm
    copied: Runnable[Any, Any] = llm.model_copy(update=update)  # type: ignore[attr-defined]
    return copied


def output_text(output: Any) -> str:
    """The text of a chat model's message or an LLM's string."""
    if isinstance(output, str):
        return output
    if isinstance(output, BaseMessage):
        return str(output.text)
    raise TypeError(f"the model returned a {type(output).__name__}, not a message or a string")


class LangChainEmbedder:
    """LangChain ``Embeddings`` as rag-position's ``Embedder``: L2-normalised float32 rows.

    Example:
        >>> from langchain_core.embeddings import DeterministicFakeEmbedding
        >>> LangChainEmbedder(DeterministicFakeEmbedding(size=8)).embed(["a", "b"]).shape
        (2, 8)
    """

    def __init__(self, embeddings: Embeddings) -> None:
        self.embeddings = embeddings

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One unit row per text; a zero vector raises ``ValueError`` (no direction)."""
        rows = self.embeddings.embed_documents(list(texts)) if texts else []
        unit: npt.NDArray[np.float32] = core.unit_rows(
            rows, len(texts), type(self.embeddings).__name__
        )
        return unit

    def embed_query(self, query: str) -> npt.NDArray[np.float32]:
        """``embed_query`` (a model may embed a question unlike a document), as a unit
        vector: what ``similar=`` and FACT compare the documents with."""
        row = [self.embeddings.embed_query(query)]
        unit: npt.NDArray[np.float32] = core.unit_rows(row, 1, type(self.embeddings).__name__)[0]
        return unit


# ---------------------------------------------------------------------- documents
def check_documents(documents: Sequence[Document], what: str = "documents") -> list[Document]:
    """A private list of the caller's Documents (``TypeError`` naming a non-Document)."""
    if isinstance(documents, (str, bytes, Mapping, Document)):
        raise TypeError(
            f"`{what}` must be a sequence of Documents, not a single {type(documents).__name__}"
        )
    docs = list(documents)
    for i, d in enumerate(docs):
        if not isinstance(d, Document):
            raise TypeError(f"{what}[{i}] is a {type(d).__name__}, not a langchain Document")
    return docs


def check_query(query: Any, who: str) -> str:
    """The query of a compressor or retriever call: a ``TypeError`` naming it unless a str."""
    if not isinstance(query, str):
        shown = repr(query) if len(repr(query)) <= 60 else repr(query)[:57] + "..."
        got = "None" if query is None else f"{type(query).__name__} {shown}"
        raise TypeError(f"{who}: the query must be a str, got {got}")
    return query


def to_passage(doc: Document, title_key: str | None = "title") -> Passage:
    """The text view the core renders: ``page_content``, and ``metadata[title_key]`` if a str."""
    title = doc.metadata.get(title_key) if title_key else None
    return Passage(text=doc.page_content, title=title if isinstance(title, str) else "", id=doc.id)


def metadata_scores(docs: Sequence[Document], key: str) -> list[float | None]:
    """``doc.metadata[key]`` as floats (``None`` where missing); errors name the document."""
    scores: list[float | None] = core.read_scores([d.metadata for d in docs], key, "documents")
    return scores


def annotate(
    docs: Sequence[Document],
    reordering: core.Reordering,
    strategy: str,
    key: str | None,
) -> list[Document]:
    """The documents in the new order, each a shallow copy whose NEW metadata dict holds ``key``.

    ``key=None``: the caller's very objects, untouched.
    """
    if key is None:
        return [docs[i] for i in reordering.order]
    records = core.reorder_records(reordering, strategy)
    return [
        docs[i].model_copy(update={"metadata": core.with_record(docs[i].metadata, key, record)})
        for i, record in zip(reordering.order, records, strict=True)
    ]


def read_input(value: Any, component: str) -> tuple[str, list[Document] | None, str | None]:
    """``(question, documents, context)`` from ``{"question": ..., "documents"|"context": ...}``.

    ``documents`` is a list of Documents (or strings, made Documents); a string under
    either key is a context string. Exactly one of the two keys.
    """
    if not isinstance(value, Mapping):
        raise TypeError(
            f"{component} takes a dict with 'question' and 'documents' (or 'context'), "
            f"got a {type(value).__name__}"
        )
    question = value.get("question")
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"{component} needs a non-empty string under 'question', got {question!r}")
    present = [k for k in ("documents", "context") if k in value]
    if len(present) != 1:
        raise ValueError(
            f"{component} needs exactly one of 'documents' (a list of Documents) or 'context' "
            f"(a string); got keys {sorted(map(str, value))}"
        )
    source = value[present[0]]
    if isinstance(source, str):
        if not source.strip():
            raise ValueError(f"{component}: the context under {present[0]!r} is empty")
        return question, None, source
    if isinstance(source, (bytes, Mapping, Document)) or not isinstance(source, Sequence):
        raise TypeError(
            f"{component}: {present[0]!r} must be a list of Documents or a string, "
            f"got a {type(source).__name__}"
        )
    docs = [Document(page_content=d) if isinstance(d, str) else d for d in source]
    docs = check_documents(docs, present[0])
    if not docs:
        raise ValueError(f"{component}: {present[0]!r} is empty; there is nothing to answer from")
    return question, docs, None


__all__ = [
    "METADATA_KEY",
    "EmbeddingsFields",
    "LangChainEmbedder",
    "LangChainGenerator",
    "LazyModel",
    "annotate",
    "check_documents",
    "check_spec",
    "cut_at_stop",
    "metadata_scores",
    "openai_scorer",
    "read_input",
    "resolve_embedder",
    "resolve_generator",
    "resolve_scorer",
    "to_passage",
]
