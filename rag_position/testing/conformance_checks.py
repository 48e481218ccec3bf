"""The conformance kit's checks: deep equality, identity of containers, snapshots that
prove nothing was mutated, and the permutation check (tests only; see
:mod:`rag_position.testing.conformance`)."""

from __future__ import annotations

import copy
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

# ---------------------------------------------------------------------- the checks


def deep_equal(a: Any, b: Any) -> bool:
    """Structural equality with NaN equal to NaN, types and key order included."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, Mapping):
        return list(a) == list(b) and all(deep_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(deep_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def containers(x: Any) -> list[int]:
    """The ids of every dict, list and tuple inside ``x``: a replaced one shows up here."""
    found: list[int] = []
    if isinstance(x, Mapping):
        found.append(id(x))
        for value in x.values():
            found += containers(value)
    elif isinstance(x, (list, tuple)):
        found.append(id(x))
        for value in x:
            found += containers(value)
    return found


class Snapshot:
    """What the caller holds before the call: the sequence, its items, their insides.

    ``state(item)``: its observable fields (deep-copied now, compared later);
    ``inner(item)``: the ids of the objects inside it that must stay the same objects.
    """

    def __init__(
        self,
        items: Sequence[Any],
        *others: Any,
        state: Callable[[Any], Any] = lambda x: x,
        inner: Callable[[Any], list[int]] = containers,
    ) -> None:
        self.items, self.others, self.state, self.inner_of = items, others, state, inner
        self.ids = [id(x) for x in items]
        self.deep = copy.deepcopy(([state(x) for x in items], others))
        self.inner = self._inner()

    def _inner(self) -> list[list[int]]:
        return [self.inner_of(x) for x in self.items] + [containers(o) for o in self.others]

    def check(self) -> None:
        ids = [id(x) for x in self.items]
        assert ids == self.ids, "the caller's sequence was reordered, or an item replaced"
        now = ([self.state(x) for x in self.items], self.others)
        assert deep_equal(now, self.deep), "an input (text, metadata, score) was mutated"
        assert self._inner() == self.inner, "a node, metadata dict or nested value was replaced"


def check_permutation(
    given: Sequence[Any],
    out: Any,
    order: Sequence[int] | None = None,
    drops: bool = False,
    identity: Callable[[Any], int] = id,
) -> None:
    """``out``: the caller's own objects (by ``identity``), each input position once (at
    most once if ``drops``); with ``order``, ``out[k] is given[order[k]]``."""
    assert isinstance(out, list) and out is not given, "the result must be a new list"
    if order is not None:
        assert len(out) == len(order) and len(set(order)) == len(order), f"order {order}"
        assert all(0 <= i < len(given) for i in order), f"order {order} is out of range"
        for k, i in enumerate(order):
            assert out[k] is given[i], f"passages[{k}] is not the caller's object #{i} (a copy?)"
    mine, theirs = Counter(map(identity, out)), Counter(map(identity, given))
    if drops:
        assert not mine - theirs, "copied or duplicated"
    else:
        assert mine == theirs, f"{len(given)} in, {len(out)} out: lost, copied or duplicated"
