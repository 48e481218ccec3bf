"""ConvexScore at scale (issue 30): the cap on N, and the bookkeeping refactor changes nothing:
every field matches the code before it, kept below verbatim (NaN where it had NaN)."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence
from typing import Any

import pytest

from rag_position._integration import reorder as adapters
from rag_position._integration.models import LazyModel
from rag_position.strategies import PositionProfile, convex_score, profile_reorder
from rag_position.strategies._base import check_seed, distinct_orders
from rag_position.strategies._convex_score import (
    MAX_PASSAGES,
    MAX_PLACEMENTS,
    authors_scores,
    convex_design,
    convex_scores,
    likelihood_table,
)
from rag_position.strategies._question_likelihood import question_likelihood
from rag_position.strategies.profiles import place
from rag_position.testing.scripted import HashScorer, ScriptedScorer

QUESTION = "who wrote the play?"


# --------------------------------------------------------------- the old code, verbatim


def _old_design(
    n: int, n_base_orders: int = 1, n_rotations: int | None = None, seed: int = 0, design: str = ""
) -> list[list[int]]:
    if design == "authors":
        n_base_orders = n
    m = n if n_rotations is None else n_rotations
    rng = random.Random(check_seed(seed))
    tails = distinct_orders(n - 1, n_base_orders, rng)
    orders: list[list[int]] = []
    for r in range(n_base_orders):
        cycle = [0] + [x + 1 for x in tails[r % len(tails)]]
        shift = rng.randrange(n)
        base = cycle[shift:] + cycle[:shift]
        for i in range(m):
            k = i * n // m
            orders.append([base[(p + k) % n] for p in range(n)])
    return orders


def _old_table(
    orders: Sequence[Sequence[int]], prompt_scores: Sequence[float], n: int
) -> list[list[float]]:
    sums = [[0.0] * n for _ in range(n)]
    counts = [[0] * n for _ in range(n)]
    for order, s in zip(orders, prompt_scores, strict=True):
        for p, d in enumerate(order):
            sums[d][p] += s
            counts[d][p] += 1
    return [
        [sums[d][p] / counts[d][p] if counts[d][p] else math.nan for p in range(n)]
        for d in range(n)
    ]


def _old_convex_scores(
    table: Sequence[Sequence[float]], edge_weight: float = 1.0, curvature_weight: float = 1.0
) -> tuple[list[float], list[float], list[float]]:
    scores, edges, curvatures = [], [], []
    for row in table:
        n = len(row)
        ends = [v for v in (row[0], row[n - 1]) if not math.isnan(v)]
        inner = [v for v in row[1 : n - 1] if not math.isnan(v)]
        e = 2 * sum(ends) / len(ends) if ends else math.nan
        if n <= 2:
            c = 0.0
        elif ends and inner:
            c = sum(ends) / len(ends) - sum(inner) / len(inner)
        else:
            c = math.nan
        total = 0.0
        for w, term in ((edge_weight, e), (curvature_weight, c)):
            if w:
                total += w * term
        scores.append(-math.inf if math.isnan(total) else total)
        edges.append(e)
        curvatures.append(c)
    return scores, edges, curvatures


def _old_authors(
    orders: Sequence[Sequence[int]], prompt_scores: Sequence[float], n: int
) -> list[float]:
    totals = [0.0] * n
    for order, s in zip(orders, prompt_scores, strict=True):
        for p, d in enumerate(order):
            totals[d] += s if p in (0, n - 1) else -s
    return [t / len(orders) for t in totals]


def _reference_convex_score(
    docs: Sequence[str],
    scorer: Any,
    *,
    n_base_orders: int = 1,
    n_rotations: int | None = None,
    seed: int = 0,
    design: str = "rotations",
    edge_weight: float = 1.0,
    curvature_weight: float = 1.0,
    variant: str = "convex",
) -> dict[str, Any]:
    n = len(docs)
    orders = _old_design(n, n_base_orders, n_rotations, seed, design)
    gauge = question_likelihood(QUESTION, docs, scorer, orders=orders)
    table = _old_table(orders, gauge.scores, n)
    if variant == "authors":
        scores = _old_authors(orders, gauge.scores, n)
        edge, curvature = [math.nan] * n, [math.nan] * n
    else:
        scores, edge, curvature = _old_convex_scores(table, edge_weight, curvature_weight)
    ranked = sorted(range(n), key=lambda d: (-scores[d], d))
    return {
        "order": place(ranked, "first", None, None),
        "scores": scores,
        "gold": ranked[0],
        "likelihoods": table,
        "edge": edge,
        "curvature": curvature,
        "orders": orders,
        "prompt_scores": gauge.scores,
    }


def _same(a: Any, b: Any) -> bool:
    """Exact equality, NaN equal to NaN, through nested lists."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b) and type(a) is type(b)


CASES: list[dict[str, Any]] = [
    {},
    {"seed": 3},
    {"variant": "authors"},
    {"n_base_orders": 3, "seed": 5},
    {"n_rotations": 2, "seed": 1},
    {"n_rotations": 3, "curvature_weight": 0.0},
    {"n_rotations": 1},  # most passages never sit at an end: -inf scores, NaN cells
    {"edge_weight": 0.3, "curvature_weight": 2.0, "seed": 2},
    {"design": "authors", "seed": 4},
    {"design": "authors", "variant": "authors"},
]


@pytest.mark.parametrize("n", [2, 3, 5, 8, 13])
@pytest.mark.parametrize("kwargs", CASES, ids=lambda k: ",".join(f"{a}={b}" for a, b in k.items()))
def test_refactor_matches_the_old_code_exactly(n: int, kwargs: dict[str, Any]) -> None:
    if kwargs.get("n_rotations", 0) > n:
        pytest.skip("more rotations than positions")
    docs = [f"passage {i} of {n}" for i in range(n)]
    for scorer_new, scorer_old in (
        (HashScorer(), HashScorer()),  # distinct scores
        (ScriptedScorer([-1.0, -2.0, -1.0]), ScriptedScorer([-1.0, -2.0, -1.0])),  # ties
        (ScriptedScorer([-0.1, -0.7, -0.3, -1e-9]), ScriptedScorer([-0.1, -0.7, -0.3, -1e-9])),
    ):
        old = _reference_convex_score(docs, scorer_old, **kwargs)
        new = convex_score(QUESTION, docs, scorer_new, **kwargs)
        for field, value in old.items():
            assert _same(getattr(new, field), value), (field, getattr(new, field), value)
        assert new.passages == [docs[i] for i in old["order"]]


def test_the_helpers_match_the_old_code_on_ragged_designs() -> None:
    """Repeated and missing (passage, position) cells: sums, counts and NaN as before."""
    rng = random.Random(11)
    for n, n_prompts in itertools.product([2, 4, 7], [1, 3, 10]):
        orders = [rng.sample(range(n), n) for _ in range(n_prompts)]
        scores = [rng.uniform(-5, 0) for _ in orders]
        table = likelihood_table(orders, scores, n)
        assert _same(table, _old_table(orders, scores, n))
        assert _same(authors_scores(orders, scores, n), _old_authors(orders, scores, n))
        for weights in ((1.0, 1.0), (0.0, 1.0), (2.5, 0.0), (0.3, -1.2)):
            assert _same(
                list(convex_scores(table, *weights)), list(_old_convex_scores(table, *weights))
            )


@pytest.mark.parametrize("n", [2, 6, 31])
def test_the_design_is_the_old_design(n: int) -> None:
    designs: list[dict[str, Any]] = [{}, {"seed": 9}, {"n_base_orders": 3}, {"n_rotations": 2}]
    for kwargs in designs:
        assert convex_design(n, **kwargs) == _old_design(n, **kwargs)
    if n <= 6:
        assert convex_design(n, design="authors") == _old_design(n, design="authors")


# --------------------------------------------------------------------------- the cap


@pytest.mark.parametrize("n", [MAX_PASSAGES + 1, 2_000, 10_000])
def test_too_many_passages_is_refused_before_any_scoring(n: int) -> None:
    """By convex_score, its design, profile_reorder and the integrations."""
    scorer = HashScorer()
    docs = [f"passage {i}" for i in range(n)]
    with pytest.raises(ValueError) as error:
        convex_score(QUESTION, docs, scorer)
    message = str(error.value)
    assert f"{n:,} passages" in message
    assert f"at most {MAX_PASSAGES:,}" in message
    assert "passage_likelihood" in message
    profile = PositionProfile((0.0,) * n)
    convex = {"relevance": "convex_score"}
    for call in (
        lambda: convex_design(n),
        lambda: profile_reorder(QUESTION, docs, profile=profile, scorer=scorer, **convex),
        lambda: adapters.profile_reordering(
            QUESTION, docs, profile, scorer=LazyModel(scorer), convex_options={"seed": 3}, **convex
        ),
    ):
        with pytest.raises(ValueError, match=f"at most {MAX_PASSAGES:,}"):
            call()
    assert scorer.calls == 0


def test_the_cap_counts_placements() -> None:
    """The cap itself is allowed; it counts placements (prompts x N), not only N."""
    assert MAX_PLACEMENTS == MAX_PASSAGES**2
    docs = [f"passage {i}" for i in range(MAX_PASSAGES)]
    r = convex_score(QUESTION, docs, HashScorer(), n_rotations=2)
    assert r.cost.lm_calls == 2 and sorted(r.order) == list(range(MAX_PASSAGES))
    with pytest.raises(ValueError, match=r"n_base_orders=2.*placements") as error:
        convex_design(MAX_PASSAGES, n_base_orders=2)
    assert f"{MAX_PLACEMENTS:,}" in str(error.value)
    n = math.ceil(MAX_PLACEMENTS ** (1 / 3)) + 1  # N³ placements just over the cap
    scorer = HashScorer()
    with pytest.raises(ValueError, match=r"design='authors'") as error:
        convex_score(QUESTION, [f"p{i}" for i in range(n)], scorer, design="authors")
    assert f"{n**3:,} passage placements" in str(error.value)
    assert scorer.calls == 0
    assert len(convex_design(MAX_PASSAGES, n_base_orders=4, n_rotations=MAX_PASSAGES // 4)) == (
        MAX_PASSAGES
    )
