"""A vLLM logits processor that forces a request's output to given token ids, and a
plugin that lets a request for prompt log-probabilities read the prefix cache (:func:`register`)
and, where ``serve`` asks, shortens vLLM's busy-looping when idle (:func:`idle_spin`).

Loaded into the vLLM server that ``rag-position serve`` starts (``--logits-processors
rag_position_vllm:ForceTokens``; this folder is the server's ``PYTHONPATH``). It imports
vLLM and torch only, never rag-position: vLLM runs in its own environment.

Why: scoring a span of a prompt through the OpenAI API otherwise needs the prompt's
log-probabilities (``echo`` with ``logprobs``), for which vLLM computes the language
model head and a log-softmax over the whole vocabulary at *every* prompt position, and
reads nothing from its prefix cache. Forcing instead sends the prompt up to the span
and makes the server generate exactly the span's tokens: vLLM reports each generated
token's log-probability from the raw logits (``logprobs_mode="raw_logprobs"``, its
default, before any logits processor), so the numbers are the model's own, the head
runs only at the span, and the prefix cache serves the shared part of the prompts.

A request opts in with ``vllm_xargs={"rag_position_force": [id, id, ...]}``; at
output step ``k`` every logit but token ``ids[k]`` is set to ``-inf``. Other requests
are untouched. The client checks that the returned tokens are the forced ones, so a
server without this processor is detected, never trusted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from vllm import SamplingParams
from vllm.v1.sample.logits_processor import AdapterLogitsProcessor

KEY = "rag_position_force"


class ForceTokens(AdapterLogitsProcessor):  # type: ignore[misc]
    """Per request: the k-th output token is the k-th id of ``extra_args[KEY]``."""

    def __init__(self, vllm_config: Any, device: Any, is_pin_memory: bool) -> None:
        super().__init__(vllm_config, device, is_pin_memory)
        mode = getattr(vllm_config.model_config, "logprobs_mode", "raw_logprobs")
        if mode != "raw_logprobs":
            # the reported log-probabilities would be those after forcing (all 0)
            raise ValueError(
                f"rag_position_vllm.ForceTokens needs --logprobs-mode raw_logprobs, not {mode}"
            )

    @classmethod
    def validate_params(cls, params: SamplingParams) -> None:
        ids = (params.extra_args or {}).get(KEY)
        if ids is None:
            return
        if (
            not isinstance(ids, list)
            or not ids
            or not all(isinstance(i, int) and i >= 0 for i in ids)
        ):
            raise ValueError(f"{KEY} must be a non-empty list of token ids, got {ids!r}")

    def is_argmax_invariant(self) -> bool:
        return False  # it changes which token greedy decoding picks

    def new_req_logits_processor(
        self, params: SamplingParams
    ) -> Callable[[list[int], torch.Tensor], torch.Tensor] | None:
        ids = (params.extra_args or {}).get(KEY)
        if not ids:
            return None
        forced = [int(i) for i in ids]

        def force(output_ids: list[int], logits: torch.Tensor) -> torch.Tensor:
            step = len(output_ids)
            if step >= len(forced):
                return logits
            token = forced[step]
            if not 0 <= token < logits.shape[-1]:
                return logits  # not a token of this model: the client sees it unforced
            keep = logits[token].clone()
            logits.fill_(float("-inf"))
            logits[token] = keep
            return logits

        return force


# ---------------------------------------------------------------- prefix-cache reads
READ_KEY = "rag_position_read_prefix"


def register() -> None:
    """vLLM's general plugin (``rag_position_vllm-0.dist-info/entry_points.txt``, found on
    this folder's ``PYTHONPATH`` in each server process): a request with
    ``vllm_xargs={"rag_position_read_prefix": 1}`` reads the prefix cache though it asks
    for ``prompt_logprobs``.

    vLLM marks every such request ``skip_reading_prefix_cache`` (``vllm/sampling_params.py``)
    because the positions it reads from the cache get no prompt log-probability. Those
    positions are zeros here (token 0, 0.0), not vLLM's uninitialised memory (an arbitrary
    token id there would reach its detokenizer), so the client takes a span's values only
    where each entry holds that token's own id; ``serve`` reports each reply's cached
    tokens (``--enable-prompt-tokens-details``), which tells the client it may ask.
    Other requests are untouched; calling it twice patches once.
    """
    from vllm.v1.outputs import LogprobsTensors
    from vllm.v1.request import Request

    if getattr(Request.get_skip_reading_prefix_cache, "rag_position", False):
        return
    skips = Request.get_skip_reading_prefix_cache

    def get_skip_reading_prefix_cache(self: Any) -> bool:
        params = self.sampling_params
        if params is not None and (params.extra_args or {}).get(READ_KEY):
            return False
        return bool(skips(self))

    empty = LogprobsTensors.empty_cpu

    def zeroed_cpu(num_positions: int, num_tokens_per_position: int) -> Any:
        tensors = empty(num_positions, num_tokens_per_position)
        for tensor in (tensors.logprob_token_ids, tensors.logprobs, tensors.selected_token_ranks):
            tensor.zero_()
        return tensors

    get_skip_reading_prefix_cache.rag_position = True  # type: ignore[attr-defined]
    Request.get_skip_reading_prefix_cache = get_skip_reading_prefix_cache
    LogprobsTensors.empty_cpu = staticmethod(zeroed_cpu)
    idle_spin()


# ---------------------------------------------------------------- idle spinning
SPIN_ENV = "RAG_POSITION_VLLM_SPIN_SECONDS"
RECHECK_MS = 5


def idle_spin() -> None:
    """With ``RAG_POSITION_VLLM_SPIN_SECONDS`` set (``serve`` sets it on a CPU), how long a
    reader of vLLM's shared-memory queues keeps busy-looping after its last message
    before it sleeps on its socket; vLLM's own is 1 second (``SpinCondition``,
    ``vllm/distributed/device_communicators/shm_broadcast.py``). On a CPU the worker,
    waiting for its next step, holds a core that long after every request, so a scorer or
    anything else on the machine that starts within the second runs on what is left.

    A sleeping reader is woken by a notification that vLLM may lose (it re-reads its
    queue every 5 s for that reason: with a 0 s spin alone, 24 answers took 246 s against
    31 s), so a reader that sleeps here re-reads every ``RECHECK_MS`` milliseconds.
    Unset or empty: vLLM's values, untouched."""
    import logging
    import os

    value = os.environ.get(SPIN_ENV, "")
    if not value:
        return
    try:
        seconds = float(value)
    except ValueError:
        seconds = float("nan")
    if not 0 <= seconds < 60:
        raise ValueError(f"{SPIN_ENV} must be seconds in [0, 60), got {value!r}")
    log = logging.getLogger("vllm.rag_position_vllm")
    try:
        from vllm.distributed.device_communicators import shm_broadcast
    except ImportError:
        shm_broadcast = None
    condition = getattr(shm_broadcast, "SpinCondition", None)
    recheck = getattr(shm_broadcast, "SHM_READER_RECHECK_INTERVAL_MS", None)
    if (
        condition is None
        or getattr(condition.__init__, "__defaults__", None) not in ((1,), (seconds,))
        or not isinstance(recheck, int)
    ):  # another vLLM: not the code read here
        log.warning("rag_position_vllm: %s not applied: this vLLM's queues differ", SPIN_ENV)
        return
    condition.__init__.__defaults__ = (seconds,)
    shm_broadcast.SHM_READER_RECHECK_INTERVAL_MS = min(RECHECK_MS, recheck)
    log.info(
        "rag_position_vllm: queues busy-loop %g s before sleeping, re-read every %d ms (%s)",
        seconds,
        shm_broadcast.SHM_READER_RECHECK_INTERVAL_MS,
        SPIN_ENV,
    )
