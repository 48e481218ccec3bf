"""Models as the integrations receive them: a spec string, our model, or a framework's.

:class:`~rag_position.models.lazy.LazyModel` (a model given now or loaded on first use,
once, thread-safe; re-exported);
:func:`resolve_scorer`, :func:`resolve_generator`, :func:`resolve_embedder`: what a
``scorer=`` / ``llm=`` / embeddings argument may be (a spec string, one of our model
objects, or a framework object the integration maps through its ``adapters`` table);
:func:`openai_scorer`, the ``openai:`` backend from plain values; and the checks every
framework generator and embedder makes (:func:`check_generation`, :func:`unit_rows`).
Nothing here imports LangChain or LlamaIndex.
"""

from __future__ import annotations

import json
import math
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from rag_position import models
from rag_position.errors import ModelSpecError
from rag_position.models import ACCEPTED_SPECS, Embedder, Generator, Scorer, check_spec, openai_spec
from rag_position.models.lazy import LazyModel
from rag_position.models.protocols import check_generation, cut_at_stop

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


# ---------------------------------------------------------------------- describing, specs
def describe(obj: Any) -> str:
    """``"<module>.<Class> object"``, for error messages."""
    return f"{type(obj).__module__}.{type(obj).__name__} object"


def model_label(model: Any) -> str:
    """A model's ``name`` if it has one, else its class name."""
    return str(getattr(model, "name", None) or type(model).__name__)


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


def optional_embedder(
    owner: str,
    value: Any,
    load_kwargs: Mapping[str, Any],
    resolve: Callable[[Any, Mapping[str, Any]], LazyModel[Embedder]],
    *,
    field: str,
    kwargs_field: str,
    needed_by: str | None = None,
) -> LazyModel[Embedder] | None:
    """A component's optional embedder field, resolved: ``None`` when not given, unless
    ``needed_by`` (an option that needs one, e.g. ``"`similar`"``) says it must be."""
    if value is not None:
        return resolve(value, load_kwargs)
    if load_kwargs:
        raise ValueError(f"{owner}: `{kwargs_field}` need an `{field}` spec string")
    if needed_by:
        raise ValueError(f"{owner}: {needed_by} needs `{field}` ({EMBEDDER_FORMS})")
    return None


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
    scorer: Scorer = models.load_model(openai_spec(str(base_url)), **options)
    return scorer


# ---------------------------------------------------------------------- generation, embedding
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


_RAW_VIEWS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_RAW_LOCK = threading.Lock()


def conversation(
    model: Any, turns: Sequence[tuple[str, str]], who: str, one: str = "user"
) -> tuple[str, Any]:
    """``turns`` (``(role, text)``, roles ``system``, ``user``, ``assistant``) as ``model``'s
    chat template renders them, and the view of ``model`` that generates from that prompt
    as given (the same weights, no template of its own, one per model). A ``ValueError``
    naming ``who`` for a model without a chat template, which takes one ``one`` message.
    """
    tokenizer = getattr(model, "tokenizer", None)
    if (
        type(model).__name__ != "TransformersModel"
        or not getattr(model, "use_chat_template", False)
        or tokenizer is None
    ):
        raise ValueError(
            f"{who} over a {type(model).__name__} takes one {one} message; a "
            "conversation needs a local transformers model with a chat template"
        )
    messages = [{"role": role, "content": text} for role, text in turns]
    rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    prompt = str(rendered)
    with _RAW_LOCK:
        view = _RAW_VIEWS.get(model)
        if view is None:
            from rag_position.models.transformers_backend import TransformersModel

            view = TransformersModel(
                model.model, model.tokenizer, name=model.name, chat_template=False
            )
            for setting in ("max_context", "max_batch_tokens", "max_batch_size",
                            "score_batch_size", "split_prefill", "meter"):  # fmt: skip
                setattr(view, setting, getattr(model, setting))  # its window, its usage
            _RAW_VIEWS[model] = view
    return prompt, view


def serialised_model(who: str, model: Any, data: dict[str, Any], *derived: str) -> Any:
    """The model to load: ``data``'s ``spec`` where ``data`` is a serialised component's
    (``from_dict``/``from_json``: it holds ``spec``), else ``model``; ``derived`` keys (read
    from the model) leave ``data``. A component serialised around a model object, which
    its dict does not hold, is a ``TypeError`` naming it, not a silent other model."""
    if "spec" not in data:
        return model
    spec = data.pop("spec")
    for key in derived:
        data.pop(key, None)
    if spec is None:
        raise TypeError(
            f"this {who} was serialised around a model object, which its dict does not hold; "
            f"build it again from the object: {who}(model_object, ...)"
        )
    return spec


SECRET_WORDS = ("key", "token", "secret", "password", "auth", "header")


def secret_name(name: str) -> bool:
    """Whether a load keyword named ``name`` holds a credential (an API key, a token,
    headers): kept out of cache keys, traces and serialised components."""
    return any(word in name.lower() for word in SECRET_WORDS)


def shareable_kwargs(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Load keywords as a serialised component holds them: no credential (pass it again
    when reading it back), each value JSON or its ``repr``."""

    def plain(value: Any) -> Any:
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            return repr(value)
        return value

    return {k: plain(v) for k, v in kwargs.items() if not secret_name(k)}
