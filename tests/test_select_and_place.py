"""select_and_place: each passage scored alone, the likeliest kept (mass, top_n), placed."""

from __future__ import annotations

import math

import pytest
from test_passage_likelihood import PASSAGES, QUESTION

from rag_position import STRATEGIES, PositionProfile
from rag_position.prompts import render_qa
from rag_position.strategies import passage_likelihood, select_and_place
from rag_position.strategies._select_and_place import kept_count, posterior
from rag_position.testing.scripted import OnePassageScorer

# Mean log-likelihood per passage (over 2 question tokens): Carmen best, Bizet's death
# next, close behind; the two others far off.
MEANS = [-6.0, -1.0, -7.0, -1.5]


def scorer() -> OnePassageScorer:
    return OnePassageScorer(QUESTION, {p: 2 * m for p, m in zip(PASSAGES, MEANS, strict=True)}, 2)


def shares() -> list[float]:
    weights = [math.exp(2 * m) for m in MEANS]
    return [w / sum(weights) for w in weights]


def test_one_batched_call_and_the_posterior_of_the_totals() -> None:
    one = scorer()
    result = select_and_place(QUESTION, PASSAGES, one, mass=None)
    assert one.calls == [[render_qa(QUESTION, [p]) for p in PASSAGES]]
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
    default = select_and_place(QUESTION, PASSAGES, scorer())  # mass=0.9
    assert default.order == [3, 1] and default.details["dropped"] == [0, 2]
    assert select_and_place(QUESTION, PASSAGES, scorer(), mass=0.7).order == [1]
    assert select_and_place(QUESTION, PASSAGES, scorer(), mass=1.0).order == [2, 0, 3, 1]


def test_top_n_caps_what_the_mass_keeps() -> None:
    one = select_and_place(QUESTION, PASSAGES, scorer(), top_n=1)
    assert one.passages == [PASSAGES[1]] and one.details["dropped"] == [3, 0, 2]
    three = select_and_place(QUESTION, PASSAGES, scorer(), mass=None, top_n=3)
    assert three.order == [0, 3, 1]


def test_placement_first_and_profile() -> None:
    first = select_and_place(QUESTION, PASSAGES, scorer(), mass=None, placement="first")
    assert first.order == [1, 3, 0, 2]
    # its top passage is passage_likelihood's gold candidate (the same scores)
    ranked = passage_likelihood(QUESTION, PASSAGES, scorer(), rest="scores")
    assert first.order == ranked.order and first.scores == ranked.scores
    # three kept; the profile (interpolated to 3) reads the middle best, then the end
    profile = PositionProfile([0.2, 0.9, 0.5])
    row = STRATEGIES["select_and_place_profile"]
    placed = row(QUESTION, PASSAGES, scorer=scorer(), profile=profile, mass=None, top_n=3)
    assert placed.order == [0, 1, 3]


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
    one = scorer()
    with pytest.raises(ValueError, match=message):
        select_and_place(QUESTION, PASSAGES, one, **kwargs)  # type: ignore[arg-type]
    assert one.calls == []


def test_empty_and_single_inputs_and_edges() -> None:
    one = scorer()
    empty = select_and_place(QUESTION, [], one)
    assert empty.passages == [] and empty.details["dropped"] == []
    single = select_and_place(QUESTION, ["only"], one)
    assert single.passages == ["only"] and single.details["gold"] == 0 and one.calls == []
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
