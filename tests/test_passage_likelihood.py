"""passage_likelihood and select_and_place: each passage scored alone in one batched call,
then placed; select_and_place keeps the likeliest (mass, top_n)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from rag_position import STRATEGIES, PositionProfile
from rag_position.prompts import render_qa
from rag_position.strategies import passage_likelihood, question_likelihood, select_and_place
from rag_position.strategies._select_and_place import kept_count, posterior
from rag_position.testing.scripted import ClosenessEmbedder, OnePassageScorer

QUESTION = "who wrote the opera carmen?"
PASSAGES = [
    "Lyon is the third-largest city of France.",
    "Carmen is an opera in four acts by the French composer Georges Bizet.",
    "The Seine flows through Paris.",
    "Bizet died in 1875, three months after the premiere.",
]
MEANS = [-5.0, -3.5, -5.0, -4.0]  # mean log-likelihood per passage (3 question tokens)
SP_MEANS = [-6.0, -1.0, -7.0, -1.5]  # select_and_place's: Carmen best, Bizet's death close


def scorer(means: list[float] = MEANS, n_tokens: int = 3) -> OnePassageScorer:
    totals = {p: n_tokens * m for p, m in zip(PASSAGES, means, strict=True)}
    return OnePassageScorer(QUESTION, totals, n_tokens)


def sp_scorer() -> OnePassageScorer:
    return scorer(SP_MEANS, 2)


def shares() -> list[float]:
    weights = [math.exp(2 * m) for m in SP_MEANS]
    return [w / sum(weights) for w in weights]


@pytest.mark.parametrize(
    ("call", "means", "n_tokens", "order"),
    [
        (lambda s: passage_likelihood(QUESTION, PASSAGES, s), MEANS, 3, [1, 0, 2, 3]),
        (lambda s: select_and_place(QUESTION, PASSAGES, s, mass=None), SP_MEANS, 2, [2, 0, 3, 1]),
    ],
    ids=["passage_likelihood", "select_and_place"],
)
def test_one_batched_call_of_one_passage_each(
    call: Callable[[OnePassageScorer], Any], means: list[float], n_tokens: int, order: list[int]
) -> None:
    """The top first, the rest in order; select_and_place (mass=None): the best last."""
    one = scorer(means, n_tokens)
    result = call(one)
    assert one.calls == [[render_qa(QUESTION, [p]) for p in PASSAGES]]
    assert result.scores == means and result.order == order and result.details["gold"] == 1
    assert result.passages == [PASSAGES[i] for i in result.order]


def test_passage_likelihood_placements() -> None:
    ranked = passage_likelihood(QUESTION, PASSAGES, scorer(), placement="last", rest="scores")
    assert ranked.order == [2, 0, 3, 1]  # ties to the earlier passage, the top at the end
    profile = PositionProfile([0.3, 0.1, 0.2, 0.9])  # best last, then first, then third
    result = passage_likelihood(QUESTION, PASSAGES, scorer(), placement="profile",
                                profile=profile, rest="scores")  # fmt: skip
    assert result.order == [3, 2, 0, 1]  # 1st ranked last, 2nd (3) first, 3rd (0) third
    kept = passage_likelihood(QUESTION, PASSAGES, scorer(), placement="profile", profile=profile)
    assert kept.order == [0, 2, 3, 1]  # the default: only the top moves, the rest keep order
    row = STRATEGIES["passage_likelihood_profile"]
    assert row(QUESTION, PASSAGES, scorer=scorer(), profile=profile).order == kept.order


def test_select_and_place_posterior_mass_and_top_n() -> None:
    """The posterior of the totals; the fewest passages that hold ``mass``, capped by top_n."""
    every = select_and_place(QUESTION, PASSAGES, sp_scorer(), mass=None)
    assert every.details["posterior"] == pytest.approx(shares())
    assert every.details["ranked"] == [1, 3, 0, 2] and every.details["dropped"] == []
    assert every.cost.lm_calls == 4
    p = shares()  # about 0.731, 0.269 for the top two, the rest ~1e-5
    assert p[1] > 0.7 and p[1] + p[3] > 0.999
    default = select_and_place(QUESTION, PASSAGES, sp_scorer())  # mass=0.9
    assert default.order == [3, 1] and default.details["dropped"] == [0, 2]
    assert select_and_place(QUESTION, PASSAGES, sp_scorer(), mass=0.7).order == [1]
    assert select_and_place(QUESTION, PASSAGES, sp_scorer(), mass=1.0).order == [2, 0, 3, 1]
    one = select_and_place(QUESTION, PASSAGES, sp_scorer(), top_n=1)
    assert one.passages == [PASSAGES[1]] and one.details["dropped"] == [3, 0, 2]
    three = select_and_place(QUESTION, PASSAGES, sp_scorer(), mass=None, top_n=3)
    assert three.order == [0, 3, 1]


def test_select_and_place_first_and_profile() -> None:
    first = select_and_place(QUESTION, PASSAGES, sp_scorer(), mass=None, placement="first")
    assert first.order == [1, 3, 0, 2]
    # its top passage is passage_likelihood's gold candidate (the same scores)
    ranked = passage_likelihood(QUESTION, PASSAGES, sp_scorer(), rest="scores")
    assert first.order == ranked.order and first.scores == ranked.scores
    # three kept; the profile (interpolated to 3) reads the middle best, then the end
    profile = PositionProfile([0.2, 0.9, 0.5])
    row = STRATEGIES["select_and_place_profile"]
    placed = row(QUESTION, PASSAGES, scorer=sp_scorer(), profile=profile, mass=None, top_n=3)
    assert placed.order == [0, 1, 3]


def test_select_and_place_similar_keeps_the_closest_too() -> None:
    """``similar=k``: the likelihood's choice united with the embedder's top k, ranked and
    placed by likelihood; nothing embedded without it."""
    far = ClosenessEmbedder([0.1, 0.2, 0.9, 0.3])  # the Seine passage (2) closest
    union = select_and_place(QUESTION, PASSAGES, sp_scorer(), similar=1, embedder=far)
    assert far.calls == [[QUESTION, *PASSAGES]] and union.details["dropped"] == [0]
    assert union.order == [2, 3, 1] and union.details["similar"] == [2]  # most likely last
    two = select_and_place(QUESTION, PASSAGES, sp_scorer(), similar=2, embedder=far, top_n=1)
    assert two.details["similar"] == [2, 3] and two.order == [2, 3, 1]
    inside = ClosenessEmbedder([0.1, 0.9, 0.2, 0.3])  # already kept: the same as without
    same = select_and_place(QUESTION, PASSAGES, sp_scorer(), similar=1, embedder=inside)
    assert same.order == [3, 1] and same.details["dropped"] == [0, 2]
    row = STRATEGIES["select_and_place"]  # passes an embedder given; embeds only if asked
    assert row(QUESTION, PASSAGES, scorer=sp_scorer(), similar=1, embedder=far).order == [2, 3, 1]
    plain = row(QUESTION, PASSAGES, scorer=sp_scorer(), embedder=inside)
    assert plain.order == [3, 1] and plain.details["similar"] == [] and len(inside.calls) == 1


def test_edges() -> None:
    assert select_and_place(QUESTION, [], scorer()).details["dropped"] == []
    with pytest.raises(ValueError, match="question"):
        passage_likelihood("  ", PASSAGES, scorer())
    assert posterior([0.0]) == [1.0]
    assert posterior([-1000.0, -1000.0]) == [0.5, 0.5]  # no underflow
    assert kept_count([1 / 3] * 3, [0, 1, 2], mass=1.0, top_n=None) == 3  # rounding
    assert kept_count([0.2, 0.8], [1, 0], mass=0.01, top_n=None) == 1  # at least one


@pytest.mark.slow
def test_passage_likelihood_is_the_gauge_of_each_passage_alone(embedded_raw: object) -> None:
    """The same numbers as question_likelihood of each one-passage prompt; the gold found."""
    result = passage_likelihood(QUESTION, PASSAGES, embedded_raw)  # type: ignore[arg-type]
    for i, passage in enumerate(PASSAGES):
        alone = question_likelihood(QUESTION, [passage], embedded_raw)  # type: ignore[arg-type]
        assert result.scores[i] == pytest.approx(alone.scores[0], abs=1e-5)
    assert result.details["gold"] == 1
    assert result.cost.lm_calls == len(PASSAGES)


@pytest.mark.slow
def test_select_and_place_keeps_the_answering_passage_last(embedded_fp32: object) -> None:
    result = select_and_place(QUESTION, PASSAGES, embedded_fp32)  # type: ignore[arg-type]
    alone = passage_likelihood(QUESTION, PASSAGES, embedded_fp32)  # type: ignore[arg-type]
    assert result.scores == alone.scores  # the same prompts, the same numbers
    assert result.passages[-1] == PASSAGES[1] and result.details["gold"] == 1
    assert sorted([*result.order, *result.details["dropped"]]) == [0, 1, 2, 3]
    assert math.isclose(sum(result.details["posterior"]), 1.0)
    assert 1 <= len(result.passages) < len(PASSAGES)
    # the table's row embeds with the packaged all-MiniLM-L6-v2 when similar= asks
    row = STRATEGIES["select_and_place"]
    both = row(QUESTION, PASSAGES, scorer=embedded_fp32, similar=1, top_n=1)
    assert both.details["similar"] == [1] and both.passages == [PASSAGES[1]]
