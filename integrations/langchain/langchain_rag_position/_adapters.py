"""Adapters between LangChain objects and the rag-position protocols.

``scorer=``, ``llm=`` and ``embeddings=`` arguments all go through here: a
``load_model``/``load_embedder`` spec string (loaded lazily, once per component),
one of our own protocol objects, or a LangChain object adapted to the protocol.
Documents become :class:`~rag_position.passages.Passage` views for the core and
come back through the core's ``order`` (``result.passages[i] is passages[order[i]]``).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseLanguageModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable

from rag_position.errors import ModelSpecError
from rag_position.models import Embedder, Generator, Scorer
from rag_position.passages import Passage

METADATA_KEY = "rag_position"
"""The metadata key every reordering component writes by default."""

SPEC_FORMS = (
    "'embedded', 'hf:<name-or-folder>' or 'openai:<base_url>' (see rag_position.load_model)"
)
SCORER_FORMS = (
    "a load_model spec string (" + SPEC_FORMS + "), an object with score_spans() "
    "(rag_position's Scorer protocol, e.g. load_model('embedded')), ChatRagPosition, or an "
    "OpenAI-compatible LangChain model (ChatOpenAI/OpenAI with base_url=) pointed at a server "
    "that returns prompt log-probabilities (vLLM, rag-position serve)"
)
GENERATOR_FORMS = (
    "a LangChain chat model or LLM, a load_model spec string (" + SPEC_FORMS + "), or an "
    "object with generate() (rag_position's Generator protocol)"
)
EMBEDDER_FORMS = (
    "a LangChain Embeddings object, the spec string 'embedded' (or a sentence-transformers "
    "name), or an object with embed() (rag_position's Embedder protocol)"
)
_MAX_TOKEN_FIELDS = ("max_tokens", "max_new_tokens", "max_output_tokens", "num_predict")


class LazyModel:
    """A model given now, or loaded on first use by ``loader`` (once, thread-safe).

    Example:
        >>> lazy = LazyModel(loader=lambda: load_model("embedded"), label="'embedded'")
        >>> lazy.get() is lazy.get()       # loaded once, on the first call
        True
    """

    def __init__(
        self,
        value: Any = None,
        *,
        loader: Callable[[], Any] | None = None,
        label: str = "",
        check: Callable[[Any], Any] | None = None,
    ) -> None:
        self._value = value
        self._loader = loader
        self._check = check
        self._lock = threading.Lock()
        self.label = label

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory (a given object always is)."""
        return self._loader is None

    def get(self) -> Any:
        """The model, loading it first if needed."""
        if self._loader is None:
            return self._value
        with self._lock:
            if self._loader is not None:
                value = self._loader()
                if self._check is not None:
                    value = self._check(value)
                self._value, self._loader = value, None
        return self._value


def check_spec(spec: str, what: str) -> None:
    """Refuse a spec string ``load_model`` would refuse, before anything is loaded."""
    ok = (
        spec == "embedded"
        or (spec.startswith("hf:") and len(spec) > 3)
        or (spec.startswith("openai:") and len(spec) > 7)
    )
    if not ok:
        raise ModelSpecError(f"`{what}` got the unknown model spec {spec!r}; use {SPEC_FORMS}")


def _is_ours(obj: Any, class_name: str) -> bool:
    return type(obj).__module__.startswith("langchain_rag_position") and any(
        c.__name__ == class_name for c in type(obj).__mro__
    )


def _describe(obj: Any) -> str:
    return f"{type(obj).__module__}.{type(obj).__name__} object"


# ---------------------------------------------------------------------- scorer
def resolve_scorer(scorer: Any, load_kwargs: Mapping[str, Any] | None = None) -> LazyModel:
    """A :class:`LazyModel` that yields a Scorer; ``TypeError``/``ValueError`` when it cannot.

    Accepted: a spec string (loaded lazily with ``load_kwargs``), a Scorer, a
    ``ChatRagPosition`` (its model), or an OpenAI-compatible LangChain model
    (``ChatOpenAI``/``OpenAI`` with a ``base_url``; duck-typed by its
    ``openai_api_base``, ``model_name`` and ``openai_api_key`` attributes).
    """
    kwargs = dict(load_kwargs or {})
    if isinstance(scorer, str):
        check_spec(scorer, "scorer")
        from rag_position.models import load_model

        return LazyModel(
            loader=lambda: load_model(scorer, **kwargs),
            label=repr(scorer),
            check=lambda m: _need_scorer(m, repr(scorer)),
        )
    if kwargs:
        raise ValueError("`scorer_kwargs` only applies when `scorer` is a load_model spec string")
    if _is_ours(scorer, "ChatRagPosition"):
        chat = scorer
        if chat.is_loaded:
            _need_scorer(chat.core_model, _describe(chat))
        return LazyModel(
            loader=lambda: chat.core_model,
            label=_describe(chat),
            check=lambda m: _need_scorer(m, _describe(chat)),
        )
    if isinstance(scorer, BaseLanguageModel):
        return LazyModel(openai_scorer(scorer), label=_describe(scorer))
    if callable(getattr(scorer, "score_spans", None)):
        return LazyModel(scorer, label=_describe(scorer))
    if scorer is None:
        raise ValueError(f"`scorer` is required; pass {SCORER_FORMS}")
    raise TypeError(f"{_describe(scorer)} cannot score question likelihoods; pass {SCORER_FORMS}")


def openai_scorer(llm: BaseLanguageModel[Any]) -> Scorer:
    """Our OpenAI backend pointed where an OpenAI-compatible LangChain model points.

    The model's base URL, model name, API key, timeout and retries are read from its
    attributes (``openai_api_base``, ``model_name``, ``openai_api_key``,
    ``request_timeout``, ``max_retries``), so ``langchain-openai`` is needed only by the
    user who has such a model. Scoring uses ``/v1/completions`` with ``echo`` and
    ``logprobs``; a server without prompt log-probabilities raises
    ``ScoringUnsupportedError`` at the first scoring call.
    """
    if not hasattr(llm, "openai_api_base"):
        raise TypeError(
            f"{_describe(llm)} cannot score question likelihoods: LangChain chat models and "
            "LLMs do not return prompt log-probabilities, except OpenAI-compatible ones "
            f"pointed at a server that does. Pass {SCORER_FORMS}"
        )
    base = llm.openai_api_base
    if not base:
        raise ValueError(
            f"{_describe(llm)} points at OpenAI's hosted API, which does not return prompt "
            "log-probabilities, so it cannot score; set base_url= to a vLLM (or "
            "`rag-position serve`) server, or pass another scorer"
        )
    name = getattr(llm, "model_name", None) or getattr(llm, "model", None)
    if not isinstance(name, str) or not name:
        raise ValueError(f"{_describe(llm)} names no model (model=...), so it cannot score")
    key = getattr(llm, "openai_api_key", None)
    if key is not None and hasattr(key, "get_secret_value"):
        key = key.get_secret_value()
    options: dict[str, Any] = {"model": name, "api_key": key or None}
    timeout = getattr(llm, "request_timeout", None)
    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout > 0:
        options["timeout"] = float(timeout)
    retries = getattr(llm, "max_retries", None)
    if isinstance(retries, int) and not isinstance(retries, bool) and retries >= 0:
        options["max_retries"] = retries
    from rag_position.models import load_model

    model: Scorer = load_model("openai:" + str(base), **options)
    return model


def _need_scorer(model: Any, label: str) -> Any:
    if not callable(getattr(model, "score_spans", None)):
        raise TypeError(f"{label} gave a {type(model).__name__}, which cannot score spans")
    return model


# ---------------------------------------------------------------------- generator
def resolve_generator(
    llm: Any, load_kwargs: Mapping[str, Any] | None = None, *, max_concurrency: int | None = None
) -> LazyModel:
    """A :class:`LazyModel` yielding a Generator for ``llm`` (see :data:`GENERATOR_FORMS`).

    A ``ChatRagPosition`` gives its own model (one batched call, no LangChain round
    trip); any other LangChain model is wrapped in :class:`LangChainGenerator`.
    """
    kwargs = dict(load_kwargs or {})
    if isinstance(llm, str):
        check_spec(llm, "llm")
        from rag_position.models import load_model

        return LazyModel(loader=lambda: load_model(llm, **kwargs), label=repr(llm))
    if kwargs:
        raise ValueError("`llm_kwargs` only applies when `llm` is a load_model spec string")
    if _is_ours(llm, "ChatRagPosition"):
        chat = llm
        return LazyModel(loader=lambda: chat.core_model, label=_describe(chat))
    # Checked before the protocol: every LangChain model has a (different) generate(), and
    # a RunnableBinding (llm.bind(...)) forwards attribute lookups to the model it binds.
    if isinstance(llm, (BaseLanguageModel, Runnable)):
        return LazyModel(
            LangChainGenerator(llm, max_concurrency=max_concurrency), label=_describe(llm)
        )
    if isinstance(llm, Generator):
        return LazyModel(llm, label=_describe(llm))
    if llm is None:
        raise ValueError(f"`llm` is required; pass {GENERATOR_FORMS}")
    raise TypeError(f"{_describe(llm)} cannot generate text; pass {GENERATOR_FORMS}")


class LangChainGenerator:
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
        """The model with the generation settings this call asks for (a shallow copy)."""
        fields = getattr(type(self.llm), "model_fields", {})
        update: dict[str, Any] = {}
        token_field = next((f for f in _MAX_TOKEN_FIELDS if f in fields), None)
        if token_field is not None:
            update[token_field] = max_new_tokens
        if "temperature" in fields:
            update["temperature"] = temperature
        if seed is not None and "seed" in fields:
            update["seed"] = seed
        if not update:
            return self.llm
        copied: Runnable[Any, Any] = self.llm.model_copy(update=update)  # type: ignore[attr-defined]
        return copied

    def generate(
        self,
        prompts: Sequence[str],
        *,
        max_new_tokens: int = 100,
        temperature: float = 0.0,
        seed: int | None = None,
        stop: Sequence[str] | None = None,
    ) -> list[str]:
        """One completion per prompt, in order."""
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        if not prompts:
            return []
        model = self.configured(max_new_tokens, temperature, seed)
        stops = [s for s in stop or () if s]
        config: dict[str, Any] = {}
        if self.max_concurrency is not None:
            config["max_concurrency"] = self.max_concurrency
        outputs = model.batch(list(prompts), config or None, stop=stops or None)  # type: ignore[arg-type]
        return [cut_at_stop(output_text(o), stops) for o in outputs]


def output_text(output: Any) -> str:
    """The text of a chat model's message or an LLM's string."""
    if isinstance(output, str):
        return output
    if isinstance(output, BaseMessage):
        return str(output.text)
    raise TypeError(f"the model returned a {type(output).__name__}, not a message or a string")


def cut_at_stop(text: str, stops: Sequence[str]) -> str:
    """``text`` up to the first occurrence of any stop string."""
    cut = min((i for i in (text.find(s) for s in stops if s) if i >= 0), default=len(text))
    return text[:cut]


# ---------------------------------------------------------------------- embedder
def resolve_embedder(embeddings: Any) -> LazyModel:
    """A :class:`LazyModel` yielding an Embedder (see :data:`EMBEDDER_FORMS`)."""
    if isinstance(embeddings, str):
        if not embeddings:
            raise ModelSpecError(f"`embeddings` got an empty spec; pass {EMBEDDER_FORMS}")
        from rag_position.models import load_embedder

        return LazyModel(loader=lambda: load_embedder(embeddings), label=repr(embeddings))
    if _is_ours(embeddings, "RagPositionEmbeddings"):
        wrapper = embeddings
        return LazyModel(loader=lambda: wrapper.core_embedder, label=_describe(wrapper))
    if isinstance(embeddings, Embeddings):
        return LazyModel(LangChainEmbedder(embeddings), label=_describe(embeddings))
    if isinstance(embeddings, Embedder):
        return LazyModel(embeddings, label=_describe(embeddings))
    if embeddings is None:
        raise ValueError(f"`embeddings` is required; pass {EMBEDDER_FORMS}")
    raise TypeError(f"{_describe(embeddings)} cannot embed texts; pass {EMBEDDER_FORMS}")


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
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        rows = np.asarray(self.embeddings.embed_documents(list(texts)), dtype=np.float64)
        if rows.ndim != 2 or rows.shape[0] != len(texts):
            raise ValueError(
                f"{type(self.embeddings).__name__}.embed_documents returned shape {rows.shape} "
                f"for {len(texts)} texts"
            )
        norms = np.linalg.norm(rows, axis=1)
        bad = [i for i, n in enumerate(norms) if not math.isfinite(n) or n == 0]
        if bad:
            raise ValueError(
                f"{type(self.embeddings).__name__} gave text {bad[0]} a zero or non-finite "
                "vector, which has no cosine similarity"
            )
        unit: npt.NDArray[np.float32] = (rows / norms[:, None]).astype(np.float32)
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


def to_passage(doc: Document) -> Passage:
    """The text view the core renders: ``page_content``, and ``metadata["title"]`` if a str."""
    title = doc.metadata.get("title")
    return Passage(text=doc.page_content, title=title if isinstance(title, str) else "", id=doc.id)


def metadata_scores(docs: Sequence[Document], key: str) -> list[float | None]:
    """``doc.metadata[key]`` as floats (``None`` where missing); errors name the document."""
    values: list[float | None] = []
    for i, d in enumerate(docs):
        raw = d.metadata.get(key)
        if raw is None:
            values.append(None)
            continue
        try:
            value = float(raw)
        except (TypeError, ValueError):
            raise ValueError(
                f"documents[{i}].metadata[{key!r}] must be a number, got {raw!r}"
            ) from None
        if math.isnan(value):
            raise ValueError(f"documents[{i}].metadata[{key!r}] is NaN")
        values.append(value)
    if docs and all(v is None for v in values):
        keys = sorted({str(k) for d in docs for k in d.metadata})
        raise ValueError(
            f"no document has the score key {key!r} in its metadata (keys found: {keys}); "
            "name the key your retriever writes, or leave score_key=None to use the given order"
        )
    return values


def annotate(
    docs: Sequence[Document],
    order: Sequence[int],
    scores: Sequence[float | None] | None,
    strategy: str,
    key: str | None,
) -> list[Document]:
    """The documents in ``order``, each a shallow copy whose NEW metadata dict holds ``key``.

    ``key=None``: the caller's very objects, untouched. ``scores[i]`` is input document
    ``i``'s score (``None``/NaN written as ``None``).
    """
    if len(set(order)) != len(order) or not all(0 <= i < len(docs) for i in order):
        raise AssertionError(f"the strategy returned {order!r}, not a selection of the documents")
    if key is None:
        return [docs[i] for i in order]
    out = []
    for rank, i in enumerate(order):
        doc = docs[i]
        score = None if scores is None else scores[i]
        if score is not None and math.isnan(score):
            score = None
        info = {
            "strategy": strategy,
            "score": None if score is None else float(score),
            "rank": rank,
            "original_rank": i,
        }
        out.append(doc.model_copy(update={"metadata": {**doc.metadata, key: info}}))
    return out


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
