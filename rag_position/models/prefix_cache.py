"""A passage-prefix cache for span scoring: each prompt's key/value states up to its span.

Scoring a question after one passage (``select_and_place``'s N one-passage prompts)
reads ``instruction + passage + question``: everything before the question does not
depend on the question, so a causal model's key/value states for it can be kept and
reused by the next query that brings the same passage. :class:`PrefixCache` is a
bounded least-recently-used store of those states, one per model instance
(``load_model(..., prefix_cache_mb=512)``; off, the default, it does not exist and
scoring runs exactly as before).

What is cached: the key/value states of a prompt's tokens ``ids[:p]``, where ``p`` is
one before the first scored token (the last hidden state needed is the one that
predicts it), as tokenised from the whole rendered prompt, chat template included.
The key is the model's name and instance, its dtype and device, and those exact
token ids: a cache never serves another model or dtype, and a prefix whose tokens
differ in one id is another entry. A scoring call then computes only
``ids[p:last]`` (the scored tokens' predictions; what follows the last scored token
is never computed, attention being causal) on top of the cached states. A miss runs
the prefix alone first, stores it, then the suffix the same way, so a prompt's score
does not depend on whether its prefix was cached (within float rounding of the
uncached forward: 1e-5 in float32, measured in ``tests/test_prefix_cache.py``).

Memory: an entry's bytes are the sum of its tensors' ``nbytes`` (layers x 2 x
key/value heads x head dim x dtype bytes per token: 46,080 per token for the embedded
model in float32, 23,040 in bfloat16). After each store the oldest entries are dropped
until the total is within the bound; an entry larger than the bound is not stored.

Batching: with the cache on, every prompt is scored in its own forward passes (one
prompt at a time, as on CPU already): a hit costs only its suffix; on an accelerator,
the batching of misses is given up. Models whose key/value cache is not plain full
attention (sliding windows, hybrid layers, e.g. Gemma 3) are scored uncached, and
:attr:`PrefixCache.unsupported` says why.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from rag_position.models.transformers_backend import TransformersModel

KV = tuple[tuple[torch.Tensor, torch.Tensor], ...]
"""Per layer: (keys, values), each ``(1, kv_heads, tokens, head_dim)``."""


@dataclass(frozen=True)
class PrefixCacheStats:
    """A snapshot of a :class:`PrefixCache`'s counters (hits and misses since made or cleared)."""

    hits: int
    misses: int
    entries: int
    bytes_held: int
    max_bytes_held: int  # the most ever held at once since made or cleared
    capacity_bytes: int
    evictions: int
    too_large: int  # prefixes not stored because one alone exceeds the bound
    tokens_reused: int  # prefix tokens read from the cache instead of computed

    @property
    def hit_rate(self) -> float:
        """Hits over lookups (0.0 before any lookup)."""
        lookups = self.hits + self.misses
        return self.hits / lookups if lookups else 0.0


def kv_nbytes(kv: KV) -> int:
    """The bytes an entry holds: the sum of its tensors' ``nbytes``."""
    return sum(k.nbytes + v.nbytes for k, v in kv)


class PrefixCache:
    """A least-recently-used store of prefix key/value states, at most ``max_mb`` MiB.

    Thread-safe (a lock around every lookup and store). Stored tensors are never
    written to: a scoring call builds a fresh transformers cache from them, whose
    forward pass concatenates into new tensors.

    Example:
        >>> cache = PrefixCache(1)                    # 1 MiB
        >>> kv = ((torch.zeros(1, 1, 4, 8), torch.zeros(1, 1, 4, 8)),)
        >>> cache.put("a", kv), cache.get("a") is kv, cache.get("b")
        (True, True, None)
        >>> s = cache.stats(); (s.hits, s.misses, s.bytes_held)
        (1, 1, 256)
    """

    def __init__(self, max_mb: float) -> None:
        if isinstance(max_mb, bool) or not (
            isinstance(max_mb, (int, float)) and math.isfinite(max_mb) and max_mb > 0
        ):
            raise ValueError(f"prefix_cache_mb must be a finite number > 0, got {max_mb!r}")
        self.capacity_bytes = int(max_mb * 2**20)
        self.unsupported: str | None = None
        """Why this model is scored uncached (set on its first miss), else None."""
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, tuple[KV, int]] = OrderedDict()
        self._reset()

    def _reset(self) -> None:
        self._entries.clear()
        self._bytes = self._max_bytes = 0
        self._hits = self._misses = self._evictions = self._too_large = self._reused = 0

    def get(self, key: Hashable, tokens: int = 0) -> KV | None:
        """The entry under ``key`` (now the most recently used), or None; counts a hit
        (of ``tokens`` prefix tokens) or a miss."""
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                self._misses += 1
                return None
            self._entries.move_to_end(key)
            self._hits += 1
            self._reused += tokens
            return found[0]

    def put(self, key: Hashable, kv: KV) -> bool:
        """Store ``kv`` under ``key``, dropping the least recently used entries until the
        total is within the bound; False (nothing stored) if ``kv`` alone exceeds it."""
        size = kv_nbytes(kv)
        with self._lock:
            if size > self.capacity_bytes:
                self._too_large += 1
                return False
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            while self._entries and self._bytes + size > self.capacity_bytes:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._bytes -= dropped
                self._evictions += 1
            self._entries[key] = (kv, size)
            self._bytes += size
            self._max_bytes = max(self._max_bytes, self._bytes)
            return True

    def stats(self) -> PrefixCacheStats:
        """The counters now."""
        with self._lock:
            return PrefixCacheStats(
                hits=self._hits,
                misses=self._misses,
                entries=len(self._entries),
                bytes_held=self._bytes,
                max_bytes_held=self._max_bytes,
                capacity_bytes=self.capacity_bytes,
                evictions=self._evictions,
                too_large=self._too_large,
                tokens_reused=self._reused,
            )

    def clear(self) -> None:
        """Drop every entry and zero the counters (as a new cache)."""
        with self._lock:
            self._reset()

    def __len__(self) -> int:
        return len(self._entries)


@torch.inference_mode()
def cached_target_logprobs(
    model: TransformersModel, cache: PrefixCache, ids: list[int], targets: list[int]
) -> torch.Tensor | None:
    """log p(ids[j] | ids[:j]) for each j in ``targets`` (ascending), float32, computing
    only what ``cache`` does not hold (module doc); None when the model's cache layers are
    not plain full attention (the caller scores it uncached)."""
    from transformers.cache_utils import DynamicCache, DynamicLayer

    from rag_position.models.transformers_backend import cache_name

    if cache.unsupported is not None:
        return None
    name, device = cache_name(), model.device
    p = targets[0] - 1
    key = (model.name, id(model), str(model.dtype), str(device), tuple(ids[:p]))
    kv = cache.get(key, p) if p > 0 else None
    suffix = ids[p : targets[-1]]
    computed = len(suffix) + (p if kv is None else 0)
    with model._meter.timed(1, computed):
        if kv is None and p > 0:
            out = model._decoder(
                input_ids=torch.tensor([ids[:p]], device=device),
                use_cache=True,
                **{name: DynamicCache(config=model.model.config)},
            )
            layers = getattr(out, name).layers
            if not all(type(layer) is DynamicLayer for layer in layers):
                kinds = sorted({type(layer).__name__ for layer in layers})
                cache.unsupported = f"{model.name}: cache layers {', '.join(kinds)}"
                return None
            kv = tuple((_owned(layer.keys), _owned(layer.values)) for layer in layers)
            cache.put(key, kv)
        past = {name: DynamicCache(ddp_cache_data=kv)} if kv else {}
        hidden = model._decoder(
            input_ids=torch.tensor([suffix], device=device), use_cache=bool(kv), **past
        )
        states = hidden.last_hidden_state[0]
        at = torch.tensor([j - 1 - p for j in targets], device=device)
        wanted = torch.tensor([ids[j] for j in targets], device=device)
        chunk = 1024  # bounds the (positions x vocabulary) logits held at once
        parts = [
            model._project(states[at[s : s + chunk]], wanted[s : s + chunk])
            for s in range(0, len(targets), chunk)
        ]
    return torch.cat(parts)


def _owned(t: torch.Tensor) -> torch.Tensor:
    """``t``, copied when it is a view of a larger storage (so ``nbytes`` is what it holds)."""
    return t.clone() if t.untyped_storage().nbytes() > t.nbytes else t


__all__ = ["PrefixCache", "PrefixCacheStats", "cached_target_logprobs", "kv_nbytes"]
