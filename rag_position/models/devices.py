"""Where and in what precision a local model runs: device checks and the ``auto`` dtype."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import torch

from rag_position.errors import ModelSpecError

DType = Literal["auto", "float32", "bfloat16", "float16"]


def cpu_supports_bf16() -> bool:
    """True when this CPU computes bfloat16 matrix products natively (AVX512-BF16 or AMX)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def check_device(device: str) -> None:
    """Raise :class:`ModelSpecError` for a device torch cannot name, use, or does not have.

    A tensor is made on the device to be sure (an index past the last GPU, a backend
    torch was built without), so a bad ``device`` fails here, before any weights load.

    Example:
        >>> check_device("cpu")
        >>> check_device("gpu")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        rag_position.errors.ModelSpecError: device 'gpu' is not a torch device...
    """
    try:
        kind = torch.device(device).type
    except (RuntimeError, TypeError) as exc:
        raise ModelSpecError(
            f"device {device!r} is not a torch device (cpu, cuda, cuda:1, mps...): {exc}"
        ) from None
    if kind == "meta":
        raise ModelSpecError("device 'meta' holds no data: a model cannot run there")
    if kind == "cuda" and not torch.cuda.is_available():
        raise ModelSpecError(
            f"device {device!r} asked for, but torch {torch.__version__} sees no CUDA device"
        )
    try:
        torch.empty(0, device=device)
    except Exception as exc:  # each backend fails its own way (RuntimeError, ImportError...)
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0].split(". ")[0]
        raise ModelSpecError(f"device {device!r} cannot be used here: {reason}") from None


DTYPE_ENV = "RAG_POSITION_DTYPE"
"""Overrides ``dtype="auto"`` everywhere (a notebook, a test run): ``float32`` runs as on
a CPU without bfloat16."""


def resolve_dtype(dtype: DType | torch.dtype, device: str) -> torch.dtype:
    """``"auto"``: ``$RAG_POSITION_DTYPE`` when set; else bfloat16 where the hardware
    computes it natively (float16 on a GPU without it), else float32."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype == "auto" and os.environ.get(DTYPE_ENV):
        chosen = os.environ[DTYPE_ENV]
        if chosen not in ("float32", "bfloat16", "float16"):
            raise ValueError(
                f"${DTYPE_ENV}={chosen!r} is not one of 'float32', 'bfloat16', 'float16'"
            )
        dtype = chosen  # type: ignore[assignment]
    if dtype == "auto":
        kind = torch.device(device).type
        if kind == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        if kind == "cpu" and cpu_supports_bf16():
            return torch.bfloat16
        return torch.float32
    try:
        return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[
            dtype
        ]
    except KeyError:
        raise ValueError(
            f"dtype {dtype!r} is not one of 'auto', 'float32', 'bfloat16', 'float16'"
        ) from None
