"""select_and_place: each passage scored alone, the likeliest kept (mass, top_n), placed."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from rag_position import STRATEGIES, PositionProfile
from rag_position.models.protocols import Span, SpanScore
from rag_position.prompts import render_qa
from rag_position.strategies import passage_likelihood, select_and_place
from rag_position.strategies._select_and_place import kept_count, posterior

QUESTION = "who wrote the opera carmen?"
PASSAGES = [
    "Lyon is the third-largest city of France.",
    "Carmen is an opera in four acts by the French composer Georges Bizet.",
    "The Seine flows through Paris.",
    "Bizet died in 1875, three months after the premiere.",
]
# Mean log-likelihood per passage (over 2 question tokens): Carmen best, Bizet's death
# next, close behind; the two others far off.
MEANS = [-6.0, -1.0, -7.0, -1.5]


class TableScorer:
    """Scores each one-passage prompt by ``MEANS`` of the passage it holds (2 tokens)."""

    def __init__(self, means: Sequence[float] = MEANS) -> None:
        self.means = list(means)
        self.calls: list[list[str]] = []

    def score_spans(self, prompts: Sequence[str], spans: Sequence[Span]) -> list[SpanScore]:
        self.calls.append(list(prompts))
        out = []
        for prompt in prompts:
            (i,) = [i for i, p in enumerate(PASSAGES) if p in prompt]
            out.append(SpanScore(self.means[i], 2 * self.means[i], 2))
        return out


def shares() -> list[float]:
    weights = [math.exp(2 * m) for m in MEANS]
    return [w / sum(weights) for w in weights]


def test_one_batched_call_and_the_posterior_of_the_totals() -> None:
    scorer = TableScorer()
    result = select_and_place(QUESTION, PASSAGES, scorer, mass=None)
    assert scorer.calls == [[render_qa(QUESTION, [p]) for p in PASSAGES]]
    assert result.scores == MEANS
    assert result.details["posterior"] == pytest.approx(shares())
    assert result.details["ranked"] == [1, 3, 0, 2]
    # nothing dropped: every passage, by falling score, the best last
    assert result.order == [2, 0, 3, 1] and result.details["dropped"] == []
    assert result.passages == [PASSAGES[i] for i in result.order]
    assert result.cost.lm_calls == 4


def test_the_mass_rule_keeps_the_fewest_passages_that_hold_it() -> None:
    p = shares()  # about 0.731, 0.269 for the top two, the rest ~1e-5
    assert p[1] > 0.7 and p[1] + p[3] > 0.999
    default = select_and_place(QUESTION, PASSAGES, TableScorer())  # mass=0.9
    assert default.order == [3, 1] and default.details["dropped"] == [0, 2]
    assert select_and_place(QUESTION, PASSAGES, TableScorer(), mass=0.7).order == [1]
    assert select_and_place(QUESTION, PASSAGES, TableScorer(), mass=1.0).order == [2, 0, 3, 1]


def test_top_n_caps_what_the_mass_keeps() -> None:
    one = select_and_place(QUESTION, PASSAGES, TableScorer(), top_n=1)
    assert one.passages == [PASSAGES[1]] and one.details["dropped"] == [3, 0, 2]
    three = select_and_place(QUESTION, PASSAGES, TableScorer(), mass=None, top_n=3)
    assert three.order == [0, 3, 1]


def test_placement_first_and_profile() -> None:
    first = select_and_place(QUESTION, PASSAGES, TableScorer(), mass=None, placement="first")
    assert first.order == [1, 3, 0, 2]
    # three kept; the profile (interpolated to 3) reads the middle best, then the end
    profile = PositionProfile([0.2, 0.9, 0.5])
    row = STRATEGIES["select_and_place_profile"]
    placed = row(QUESTION, PASSAGES, scorer=TableScorer(), profile=profile, mass=None, top_n=3)
    assert placed.order == [0, 1, 3]


def test_the_kept_passages_are_passage_likelihoods_ranking() -> None:
    """Its top passage is passage_likelihood's gold candidate (the same scores)."""
    ranked = passage_likelihood(QUESTION, PASSAGES, TableScorer(), rest="scores")
    kept = select_and_place(QUESTION, PASSAGES, TableScorer(), placement="first", mass=None)
    assert kept.order == ranked.order and kept.scores == ranked.scores


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mass": 0.0}, "`mass` must be"),
        ({"mass": 1.5}, "`mass` must be"),
        ({"mass": "most"}, "`mass` must be"),
        ({"top_n": 0}, "`top_n` must be"),
        ({"top_n": True}, "`top_n` must be"),
        ({"placement": "middle"}, "`placement` must be"),
        ({"placement": "profile"}, "pass a `profile` exactly when"),
        ({"template": "no placeholders"}, "template"),
    ],
)
def test_bad_options_are_named_before_scoring(kwargs: dict[str, object], message: str) -> None:
    scorer = TableScorer()
    with pytest.raises(ValueError, match=message):
        select_and_place(QUESTION, PASSAGES, scorer, **kwargs)  # type: ignore[arg-type]
    assert scorer.calls == []


def test_empty_and_single_inputs() -> None:
    scorer = TableScorer()
    empty = select_and_place(QUESTION, [], scorer)
    assert empty.passages == [] and empty.details["dropped"] == []
    one = select_and_place(QUESTION, ["only"], scorer)
    assert one.passages == ["only"] and one.details["gold"] == 0 and scorer.calls == []


def test_kept_count_and_posterior_edges() -> None:
    assert posterior([0.0]) == [1.0]
    assert posterior([-1000.0, -1000.0]) == [0.5, 0.5]  # no underflow
    assert kept_count([1 / 3] * 3, [0, 1, 2], mass=1.0, top_n=None) == 3  # rounding
    assert kept_count([0.2, 0.8], [1, 0], mass=0.01, top_n=None) == 1  # at least one


@pytest.mark.slow
def test_on_the_embedded_model_the_answering_passage_is_kept_and_last(
    embedded_fp32: object,
) -> None:
    result = select_and_place(QUESTION, PASSAGES, embedded_fp32)  # type: ignore[arg-type]
    alone = passage_likelihood(QUESTION, PASSAGES, embedded_fp32)  # type: ignore[arg-type]
    assert result.scores == alone.scores  # the same prompts, the same numbers
    assert result.passages[-1] == PASSAGES[1] and result.details["gold"] == 1
    assert sorted([*result.order, *result.details["dropped"]]) == [0, 1, 2, 3]
    assert math.isclose(sum(result.details["posterior"]), 1.0)
    assert 1 <= len(result.passages) < len(PASSAGES)
