"""GGUF files as transformers folders, converted once into the cache.

transformers reads a GGUF file by parsing and de-quantising it on every load (19 s
for the embedded 135M model on a 2-core CPU, minutes for larger files). The local
backend and ``rag-position serve`` both load the converted folder instead: float32
safetensors, the tokenizer and its chat template, written once per file.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
from pathlib import Path

from rag_position.errors import ModelSpecError

logger = logging.getLogger(__name__)


def cache_dir() -> Path:
    """Where exported model folders live: ``$RAG_POSITION_CACHE`` or ~/.cache/rag-position."""
    root = os.environ.get("RAG_POSITION_CACHE")
    return Path(root).expanduser() if root else Path.home() / ".cache" / "rag-position"


def export_gguf(gguf: Path, dest: Path | None = None) -> Path:
    """A transformers folder (float32 safetensors, tokenizer, chat template) from a GGUF file.

    Cached: the folder is named after the file's name, size and modification time, and
    an existing complete export is returned as is. The export is written to a temporary
    folder and renamed into place, so an interrupted export is never used.
    """
    gguf = Path(gguf).expanduser().resolve()
    if not gguf.is_file():
        raise ModelSpecError(f"GGUF file {gguf} does not exist")
    if dest is None:
        stat = gguf.stat()
        key = hashlib.sha256(f"{gguf.name}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()
        dest = cache_dir() / "models" / f"{gguf.stem}-{key[:12]}"
    if (dest / "config.json").is_file() and (dest / ".complete").is_file():
        return dest
    try:
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise ModelSpecError(
            "converting a GGUF file needs torch and transformers: pip install "
            f"'rag-position[local]' ({exc.name or exc} is missing)"
        ) from exc
    logger.info("converting %s to a transformers folder at %s (once)", gguf.name, dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=dest.name + ".", dir=dest.parent))
    try:
        folder, name = str(gguf.parent), gguf.name
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        config = AutoConfig.from_pretrained(folder, gguf_file=name)
        loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
        # save_pretrained refuses a model loaded from GGUF: copy its weights into a plain one.
        plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)  # type: ignore[no-untyped-call]
        plain.load_state_dict(loaded.state_dict())
        plain.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / ".complete").write_text(f"exported from {gguf}\n")
        _move_into_place(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def _move_into_place(tmp: Path, dest: Path) -> None:
    """Rename ``tmp`` to ``dest``; a complete export another process made first wins."""
    try:
        tmp.rename(dest)
        return
    except OSError:
        if (dest / ".complete").is_file():
            shutil.rmtree(tmp, ignore_errors=True)
            return
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)


__all__ = ["cache_dir", "export_gguf"]
