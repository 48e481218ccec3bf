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
from typing import Any

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
        check_tokenizer(tokenizer, gguf.name)
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


PROBE = "The quick brown fox jumps over the lazy dog."
"""Nine English words: about ten tokens for any subword vocabulary."""


def check_tokenizer(tokenizer: Any, source: str) -> None:
    """Refuse a tokenizer converted wrongly from a GGUF file, before it is saved.

    Some transformers releases rebuild a GGUF file's tokenizer as one token per
    character or byte (seen: Gemma 3's file under transformers 5.17, 3,369 tokens for a
    908-token prompt); every prompt then reads as noise and every answer is garbage,
    with no error. A subword vocabulary splits :data:`PROBE` into about ten tokens.

    Example:
        >>> class Chars:
        ...     def __call__(self, text, add_special_tokens=False):
        ...         return {"input_ids": list(range(len(text)))}
        >>> check_tokenizer(Chars(), "model.gguf")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        rag_position.errors.ModelSpecError: the tokenizer transformers ... built from model.gguf splits a 9-word sentence into 44 tokens ...
    """  # noqa: E501
    n = len(tokenizer(PROBE, add_special_tokens=False)["input_ids"])
    if n > 2 * len(PROBE.split()):
        from importlib.metadata import version

        raise ModelSpecError(
            f"the tokenizer transformers {version('transformers')} built from {source} splits "
            f"a 9-word sentence into {n} tokens (a subword vocabulary gives about 10): its "
            "GGUF tokenizer conversion is broken for this file; install another transformers "
            "release (5.24 converts Gemma 3 and SmolLM2 correctly)"
        )


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


__all__ = ["cache_dir", "check_tokenizer", "export_gguf"]
