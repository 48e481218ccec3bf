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
the prefix first, stores it, then the suffix the same way as a hit's, so a prompt's
score does not depend on whether its prefix was cached. A call's prompts share a head
(the chat template's opening and the instruction, up to the first passage: 56 tokens
for the embedded model's QA prompt), so a miss computes only its own tokens on the
head's states, the head itself computed once and kept as an entry (its lookups are not
counted as hits or misses). A score differs from the
uncached forward by float rounding: within 1e-5 in float32 (the same passages kept, in
the same order, on 200 dev questions); in bfloat16 up to 0.07 in a mean log-likelihood,
about as far as bfloat16 is from float32 (``tests/test_prefix_cache.py``,
``benchmarks/reuse.py``, docs/models.md).

Memory: an entry's bytes are the sum of its tensors' ``nbytes`` (layers x 2 x
key/value heads x head dim x dtype bytes per token: 46,080 per token for the embedded
model in float32, 23,040 in bfloat16). After each store the oldest entries are dropped
until the total is within the bound; an entry larger than the bound is not stored.

Batching: with the cache on, each missing prefix is computed as one row (no padding: the
fast causal attention path on CPU; on an accelerator, the batching of these prefixes is
given up), then the suffixes of a call's prompts go through the model together, up to
``max_batch_size`` rows and :data:`SUFFIX_BATCH_TOKENS` slots a forward, each on its own
past (left-padded, masked). A query's ten hits are thus one forward of about ten
questions' tokens: on CPU a forward of a few tokens costs about one read of the
weights, so one forward per hit would cost several times more. Sliding-window layers
(Gemma 3) keep plain full layers here, as in the greedy batch, the window applied by
the mask (tested past Gemma 3's 512-token window); a model whose cache does not come
out as plain layers (hybrid layers) is scored uncached, and
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

    def get(self, key: Hashable, tokens: int = 0, *, count: bool = True) -> KV | None:
        """The entry under ``key`` (now the most recently used), or None; counts a hit
        (of ``tokens`` prefix tokens) or a miss, unless ``count`` is False (a shared head's
        lookup: the counters speak of the prompts' own prefixes)."""
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                self._misses += count
                return None
            self._entries.move_to_end(key)
            self._hits += count
            self._reused += tokens if count else 0
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


SUFFIX_BATCH_TOKENS = 4096
"""At most this many past and suffix slots (rows x width) in one suffix forward: the
merged past of such a group is 189 MB for the embedded model in float32."""


@torch.inference_mode()
def cached_target_logprobs(
    model: TransformersModel,
    cache: PrefixCache,
    batch_ids: list[list[int]],
    batch_targets: list[list[int]],
) -> list[torch.Tensor] | None:
    """log p(ids[j] | ids[:j]) for each j in each row's ``targets`` (ascending), float32,
    one tensor per row, computing only what ``cache`` does not hold (module doc); None
    when the model's cache layers are not plain full attention (the caller scores
    uncached)."""
    if cache.unsupported is not None:
        return None
    prefixes = [
        ids[: targets[0] - 1] for ids, targets in zip(batch_ids, batch_targets, strict=True)
    ]
    head = _Head(shared_head(prefixes))
    pasts: list[KV] = []
    for prefix in prefixes:
        kv = _prefix(model, cache, prefix, head)
        if kv is None:
            return None
        pasts.append(kv)
    groups: list[list[int]] = [[]]
    width = 0  # the current group's longest past plus suffix
    for i, (kv, targets) in enumerate(zip(pasts, batch_targets, strict=True)):
        need, group = _length(kv) + len(targets), groups[-1]
        if group and (
            len(group) >= model.max_batch_size
            or (len(group) + 1) * max(width, need) > SUFFIX_BATCH_TOKENS
        ):
            groups.append([])
            width = 0
        groups[-1].append(i)
        width = max(width, need)
    out: list[torch.Tensor] = []
    for group in groups:
        rows_ids, rows_targets = [batch_ids[r] for r in group], [batch_targets[r] for r in group]
        out += _suffixes(model, [pasts[r] for r in group], rows_ids, rows_targets)
    return out


def _length(kv: KV) -> int:
    return kv[0][0].shape[-2] if kv else 0


MIN_HEAD_TOKENS = 16
"""A call's prompts share a head (:func:`shared_head`) only from this many tokens on."""


def shared_head(prefixes: list[list[int]]) -> list[int]:
    """The longest token prefix that every one of ``prefixes`` (two or more) extends
    strictly, when it has at least :data:`MIN_HEAD_TOKENS` tokens; else ``[]``. For
    one-passage prompts it is the chat template's head and the instruction (56 tokens
    for the embedded model's QA prompt), computed once for a call's misses.

    Example:
        >>> shared_head([list(range(20)) + [7, 8], list(range(20)) + [9]]) == list(range(20))
        True
        >>> shared_head([list(range(20)) + [7]]), shared_head([[1, 2, 3], [1, 2, 4]])
        ([], [])
    """
    if len(prefixes) < 2:
        return []
    first, n = prefixes[0], min(len(p) for p in prefixes) - 1  # strictly: a row goes on
    common = next((i for i in range(n) if any(p[i] != first[i] for p in prefixes)), n)
    return first[:common] if common >= MIN_HEAD_TOKENS else []


class _Head:
    """A call's shared head (:func:`shared_head`'s tokens) and, from the call's first miss
    on, its key/value states."""

    def __init__(self, tokens: list[int]) -> None:
        self.tokens = tokens
        self.kv: KV | None = None


def _prefix(
    model: TransformersModel, cache: PrefixCache, prefix: list[int], head: _Head
) -> KV | None:
    """The key/value states of ``prefix``: from the cache, else computed (one row, no
    padding) on top of the ``head``'s states (a strict prefix of it, or no tokens: read
    from the cache, its lookup uncounted, else computed and stored, once a call) and
    stored; ``()`` for no prefix; None (and ``cache.unsupported`` set) when the model's
    cache layers are not plain full attention."""
    if not prefix:
        return ()
    kv = cache.get(_key(model, prefix), len(prefix))
    if kv is not None:
        return kv
    if head.tokens and head.kv is None:
        head.kv = cache.get(_key(model, head.tokens), count=False)
        if head.kv is None:
            head.kv = _extend(model, cache, (), head.tokens)
            if head.kv is None:
                return None
            cache.put(_key(model, head.tokens), head.kv)
    past = head.kv or ()
    kv = _extend(model, cache, past, prefix[_length(past) :])
    if kv is not None:
        cache.put(_key(model, prefix), kv)
    return kv


def _key(model: TransformersModel, prefix: list[int]) -> Hashable:
    return (model.name, id(model), str(model.dtype), str(model.device), tuple(prefix))


def _extend(model: TransformersModel, cache: PrefixCache, past: KV, tokens: list[int]) -> KV | None:
    """The key/value states of ``past`` followed by ``tokens`` (one forward of ``tokens``
    on ``past``, which is not written to); None (and ``cache.unsupported`` set) when the
    model's cache layers are not plain full attention."""
    from transformers.cache_utils import DynamicCache, DynamicLayer

    from rag_position.models.transformers_backend import cache_name

    name = cache_name()
    with model.meter.timed(0, len(tokens)):
        out = model.decoder(
            input_ids=torch.tensor([tokens], device=model.device),
            use_cache=True,
            # plain layers, as the greedy batch's (module doc)
            **{name: DynamicCache(ddp_cache_data=past) if past else DynamicCache()},
        )
    layers = getattr(out, name).layers
    if not all(type(layer) is DynamicLayer for layer in layers):
        kinds = sorted({type(layer).__name__ for layer in layers})
        cache.unsupported = f"{model.name}: cache layers {', '.join(kinds)}"
        return None
    return tuple((_owned(layer.keys), _owned(layer.values)) for layer in layers)


def _suffixes(
    model: TransformersModel, pasts: list[KV], batch_ids: list[list[int]], targets: list[list[int]]
) -> list[torch.Tensor]:
    """One forward of every row's suffix ``ids[p:last]`` on its past (left-padded to the
    longest past, suffixes right-padded, padding masked; each row at its own positions)."""
    from transformers.cache_utils import DynamicCache

    from rag_position.models.transformers_backend import cache_name

    lengths = [_length(kv) for kv in pasts]
    suffixes = [ids[p : t[-1]] for ids, p, t in zip(batch_ids, lengths, targets, strict=True)]
    rows, width, q = len(pasts), max(lengths), max(len(s) for s in suffixes)
    input_ids = torch.full((rows, q), model.tokenizer.pad_token_id, dtype=torch.long)
    mask = torch.zeros((rows, width + q), dtype=torch.long)
    positions = torch.zeros((rows, q), dtype=torch.long)
    for r, (p, suffix) in enumerate(zip(lengths, suffixes, strict=True)):
        input_ids[r, : len(suffix)] = torch.tensor(suffix)
        mask[r, width - p : width + len(suffix)] = 1
        positions[r] = torch.arange(p, p + q)
    merged: list[tuple[torch.Tensor, torch.Tensor]] = []
    if width:
        template = next(kv for kv in pasts if kv)
        for j, (keys, values) in enumerate(template):
            shape = (rows, keys.shape[1], width, keys.shape[3])
            merged.append((keys.new_zeros(shape), values.new_zeros(shape)))
            for r, kv in enumerate(pasts):
                if kv:
                    merged[j][0][r, :, width - lengths[r] :] = kv[j][0][0]
                    merged[j][1][r, :, width - lengths[r] :] = kv[j][1][0]
    device = model.device
    with model.meter.timed(rows, sum(len(s) for s in suffixes)):
        hidden = model.decoder(
            input_ids=input_ids.to(device),
            attention_mask=mask.to(device),
            position_ids=positions.to(device),
            use_cache=True,
            **{cache_name(): DynamicCache(ddp_cache_data=merged) if merged else DynamicCache()},
        ).last_hidden_state
        del merged
        at_rows = torch.tensor([r for r, t in enumerate(targets) for _ in t], device=device)
        at_cols = torch.tensor(
            [j - 1 - lengths[r] for r, t in enumerate(targets) for j in t], device=device
        )
        wanted = torch.tensor([batch_ids[r][j] for r, t in enumerate(targets) for j in t])
        wanted = wanted.to(device)
        chunk = 1024  # bounds the (positions x vocabulary) logits held at once
        parts = [
            model.project(
                hidden[at_rows[s : s + chunk], at_cols[s : s + chunk]], wanted[s : s + chunk]
            )
            for s in range(0, len(wanted), chunk)
        ]
    return list(torch.split(torch.cat(parts), [len(t) for t in targets]))


def _owned(t: torch.Tensor) -> torch.Tensor:
    """``t``, copied when it is a view of a larger storage (so ``nbytes`` is what it holds)."""
    return t.clone() if t.untyped_storage().nbytes() > t.nbytes else t


__all__ = [
    "MIN_HEAD_TOKENS",
    "SUFFIX_BATCH_TOKENS",
    "PrefixCache",
    "PrefixCacheStats",
    "cached_target_logprobs",
    "kv_nbytes",
    "shared_head",
]
