"""A tuned file's model, for :mod:`rag_position.tuned`: with whose consent it loads, how.

A tuned file names the model it was measured on (``spec``, ``dtype``). Its spec loads
as written only for the packaged models (:func:`spec_needs_trust`); any other only with
the caller's consent, and an ``hf:`` hub name then from the local Hugging Face cache
alone (:func:`trusted_spec`, :func:`hub_name`), with the file's ``dtype``
(:func:`load_kwargs`). A model in use of another name than the file's draws a
``UserWarning`` naming both (:func:`warn_if_other_model`).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_position.errors import ModelSpecError

if TYPE_CHECKING:
    from rag_position.tuned import TunedChoice

__all__ = [
    "hub_name",
    "load_kwargs",
    "model_label",
    "spec_needs_trust",
    "trusted_spec",
    "warn_if_other_model",
]


def model_label(model: Any) -> str | None:
    """A model's ``name`` when it has a non-empty string one, else ``None``."""
    name = getattr(model, "name", None)
    return name if isinstance(name, str) and name else None


def warn_if_other_model(choice: TunedChoice, model: Any, *, stacklevel: int = 2) -> None:
    """A ``UserWarning`` when ``model`` has a ``name`` other than the one ``choice`` was
    measured on (nothing for a model without a name)."""
    name = model_label(model)
    if name is not None and name != choice.model:
        warnings.warn(
            f"the tuned strategy {choice.strategy!r} was measured on model {choice.model!r} "
            f"(spec {choice.spec!r}), but it now runs on model {name!r}; tune again for "
            f"this model (rag-position tune --model SPEC --out FILE)",
            UserWarning,
            stacklevel=stacklevel + 1,
        )


def spec_needs_trust(spec: str) -> bool:
    """Whether a tuned file's model spec is loaded only with the caller's consent: every
    spec but the packaged models' (``embedded``, ``embedded:...``), which load from the
    installed packages, offline. An ``openai:`` server would receive the questions, the
    passages and the API key; an ``hf:`` spec loads weights from wherever it names."""
    from rag_position.models import find_backend

    backend = find_backend(spec)
    return backend is None or not backend.prefix.startswith("embedded")


def trusted_spec(choice: TunedChoice, *, trust_spec: bool = False) -> str:
    """The spec that loads ``choice``'s own model, as the caller allows it.

    A packaged model's spec is loaded as written. Any other (``openai:``, ``hf:``) is a
    :class:`~rag_position.errors.ModelSpecError` unless ``trust_spec`` (the caller has
    read the file and accepts its server or model); an ``hf:`` hub name then loads from
    the local Hugging Face cache only (the spec returned names its folder there): a
    tuned file never makes the library download anything.
    """
    from rag_position.models import find_backend

    spec = choice.spec
    if not spec_needs_trust(spec):
        return spec
    if not trust_spec:
        raise ModelSpecError(
            f"the tuned file names the model spec {spec!r} (measured on {choice.model!r}), "
            "which is not loaded from a file unless you say so: an openai: server would "
            "receive your questions, passages and API key, an hf: spec loads weights from "
            "wherever it names. Pass your own model (e.g. scorer=load_model(SPEC)), or "
            "trust_spec=True once you have read the file and accept its spec (an hf: model "
            "then loads from the local Hugging Face cache only)"
        )
    backend = find_backend(spec)
    if backend is not None and backend.prefix == "hf:":
        return _cached_hub_spec(spec)
    return spec


def _cached_hub_spec(spec: str) -> str:
    """``hf:<name>`` as the ``hf:`` spec of its folder in the local Hugging Face cache
    (never the hub); a path that is there is kept."""
    target = spec.removeprefix("hf:")
    if Path(target).expanduser().exists():
        return spec
    try:
        from huggingface_hub import snapshot_download

        folder = snapshot_download(target, local_files_only=True)
    except Exception:  # not cached, not a hub name, no huggingface_hub
        raise ModelSpecError(
            f"the tuned file's model spec {spec!r}: {target!r} is not in the local Hugging "
            "Face cache, and a tuned file's hf: model loads from the cache only (nothing is "
            "downloaded for a file): download it yourself, or pass your own model"
        ) from None
    return f"hf:{folder}"


def hub_name(spec: str) -> str | None:
    """The hub name an ``hf:`` spec names, when it is not a path that is there."""
    if not spec.startswith("hf:"):
        return None
    target = spec.removeprefix("hf:")
    return None if Path(target).expanduser().exists() else target


def load_kwargs(choice: TunedChoice) -> dict[str, Any]:
    """The ``load_model`` keyword arguments that load ``choice.spec`` as it was measured
    (its ``dtype``, for a local backend)."""
    from rag_position.models import find_backend

    backend = find_backend(choice.spec)
    if choice.dtype is None or backend is None or not backend.local:
        return {}
    return {"dtype": choice.dtype}
