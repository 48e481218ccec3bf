"""Accuracy with seeded 95% bootstrap intervals, and the per-setting summary rows."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from rag_position.eval.engine.common import derive_seed

GROUP_FIELDS = ("task", "model", "strategy", "setting")
COST_FIELDS = ("lm_calls", "prompt_tokens", "generated_tokens", "seconds")


def bootstrap_ci(
    values: Sequence[float],
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """``(mean, low, high)``: the mean and its percentile bootstrap interval.

    Resamples ``values`` with replacement ``n_resamples`` times with a generator seeded
    by ``seed``, so the same values and seed always give the same interval. A single
    value gives a zero-width interval.

    Example:
        >>> bootstrap_ci([1, 0, 1, 1], seed=0)[0]
        0.75
    """
    if not values:
        raise ValueError("`values` is empty: no interval for no data")
    if not 0 < confidence < 1:
        raise ValueError(f"`confidence` must be in (0, 1), got {confidence}")
    if n_resamples < 1:
        raise ValueError(f"`n_resamples` must be >= 1, got {n_resamples}")
    data = np.asarray(values, dtype=np.float64)
    mean = float(data.mean())
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(data), size=(n_resamples, len(data)))
    means = data[draws].mean(axis=1)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return mean, float(low), float(high)


def summarize(
    records: Iterable[Mapping[str, Any]],
    *,
    seed: int = 0,
    n_resamples: int = 2000,
    metric: Callable[[Mapping[str, Any]], float] | None = None,
) -> list[dict[str, Any]]:
    """One row per (task, model, strategy, setting), in order of first appearance.

    A row holds the key fields, the record ``fields`` every member shares (gold
    position, passage count...), ``n``, ``accuracy`` with ``ci_low``/``ci_high``
    (fractions; the interval's seed is derived from ``seed`` and the row's key, so it
    does not depend on which other rows exist), the mean cost per prediction
    (``None`` where a backend could not count), and the mean of each numeric ``info``
    value (e.g. the question log-likelihood of the gauge). ``metric(record)`` in
    ``[0, 1]`` replaces the record's ``correct`` flag as what ``accuracy`` averages
    (e.g. the share of needle values recalled).

    Example:
        >>> key = {"task": "demo", "model": "m", "strategy": "baseline", "setting": "gold=0"}
        >>> records = [{**key, "correct": c} for c in (True, False, True, True)]
        >>> row = summarize(records)[0]
        >>> row["n"], row["accuracy"], row["ci_low"] <= 0.75 <= row["ci_high"]
        (4, 0.75, True)
    """
    groups: dict[tuple[str, ...], list[Mapping[str, Any]]] = {}
    for record in records:
        groups.setdefault(tuple(str(record[f]) for f in GROUP_FIELDS), []).append(record)
    rows = []
    for key, members in groups.items():
        row: dict[str, Any] = dict(zip(GROUP_FIELDS, key, strict=True))
        row.update(_shared_fields(members))
        correct = [
            float(metric(m)) if metric is not None else 1.0 if m["correct"] else 0.0
            for m in members
        ]
        mean, low, high = bootstrap_ci(
            correct, n_resamples=n_resamples, seed=derive_seed(seed, *key)
        )
        row.update(n=len(members), accuracy=mean, ci_low=low, ci_high=high)
        for name in COST_FIELDS:
            row[name] = _mean([m.get("cost", {}).get(name) for m in members])
        for part in ("scorer", "reader"):  # a run with a separate scorer (--scorer)
            if all(f"{part}_cost" in m for m in members):
                for name in COST_FIELDS:
                    row[f"{part}_{name}"] = _mean([m[f"{part}_cost"].get(name) for m in members])
        row.update(_info_means(members))
        rows.append(row)
    return rows


def _shared_fields(members: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    first = dict(members[0].get("fields", {}))
    return {
        name: value
        for name, value in first.items()
        if all(m.get("fields", {}).get(name) == value for m in members[1:])
    }


def _info_means(members: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    names = {n for m in members for n, v in m.get("info", {}).items() if _is_number(v)}
    out = {}
    for name in sorted(names):
        values = [m.get("info", {}).get(name) for m in members]
        mean = _mean(values)
        if mean is not None:
            out[name] = mean
    return out


def _mean(values: Sequence[Any]) -> float | None:
    if not values or not all(_is_number(v) for v in values):
        return None
    return float(sum(values) / len(values))


def _is_number(value: Any) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )


def sign_test(wins: int, losses: int) -> float:
    """The two-sided exact sign test's p-value for ``wins`` against ``losses`` (ties left out).

    Example:
        >>> round(sign_test(9, 1), 4), sign_test(0, 0), sign_test(3, 3)
        (0.0215, 1.0, 1.0)
    """
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1)) / 2**n
    return float(min(1.0, 2 * tail))


def paired(
    records: Iterable[Mapping[str, Any]], against: str
) -> dict[tuple[str, str], tuple[int, int, float]]:
    """Per (strategy, setting): questions it got right that ``against`` got wrong (wins),
    the reverse (losses), and the sign test's p-value, over the instances both answered.

    Example:
        >>> rec = lambda s, i, c: {"strategy": s, "setting": "x", "instance": i, "correct": c}
        >>> records = [rec("base", 1, False), rec("base", 2, True), rec("new", 1, True),
        ...            rec("new", 2, True)]
        >>> paired(records, "base")[("new", "x")]
        (1, 0, 1.0)
    """
    by: dict[tuple[str, str], dict[str, bool]] = {}
    for r in records:
        by.setdefault((str(r["strategy"]), str(r["setting"])), {})[str(r["instance"])] = bool(
            r["correct"]
        )
    out: dict[tuple[str, str], tuple[int, int, float]] = {}
    for (strategy, setting), answers in by.items():
        base = by.get((against, setting))
        if base is None or strategy == against:
            continue
        both = answers.keys() & base.keys()
        wins = sum(1 for i in both if answers[i] and not base[i])
        losses = sum(1 for i in both if base[i] and not answers[i])
        out[(strategy, setting)] = (wins, losses, sign_test(wins, losses))
    return out
