"""passage_likelihood: the question's likelihood after each passage alone, then placement."""

from __future__ import annotations

import pytest

from rag_position import STRATEGIES, PositionProfile
from rag_position.prompts import render_qa
from rag_position.strategies import passage_likelihood, question_likelihood
from rag_position.testing.scripted import OnePassageScorer

QUESTION = "who wrote the opera carmen?"
PASSAGES = [
    "Lyon is the third-largest city of France.",
    "Carmen is an opera in four acts by the French composer Georges Bizet.",
    "The Seine flows through Paris.",
    "Bizet died in 1875, three months after the premiere.",
]


def scorer() -> OnePassageScorer:
    """Each one-passage prompt scored by a script (means over 3 question tokens)."""
    means = zip(PASSAGES, [-5.0, -3.5, -5.0, -4.0], strict=True)
    return OnePassageScorer(QUESTION, {p: 3 * m for p, m in means}, n_tokens=3)


def test_one_batched_call_of_one_passage_each_and_the_top_first() -> None:
    one = scorer()
    result = passage_likelihood(QUESTION, PASSAGES, one)
    assert one.calls == [[render_qa(QUESTION, [p]) for p in PASSAGES]]
    assert result.scores == [-5.0, -3.5, -5.0, -4.0]
    assert result.details["gold"] == 1
    assert result.order == [1, 0, 2, 3]  # rest keeps its order
    assert result.passages == [PASSAGES[i] for i in result.order]
    ranked = passage_likelihood(QUESTION, PASSAGES, one, placement="last", rest="scores")
    assert ranked.order == [2, 0, 3, 1]  # ties to the earlier passage, the top at the end


def test_profile_placement_puts_the_ranking_down_the_profile() -> None:
    profile = PositionProfile([0.3, 0.1, 0.2, 0.9])  # best last, then first, then third
    result = passage_likelihood(QUESTION, PASSAGES, scorer(), placement="profile",
                                profile=profile, rest="scores")  # fmt: skip
    assert result.order == [3, 2, 0, 1]  # 1st ranked last, 2nd (3) first, 3rd (0) third
    kept = passage_likelihood(QUESTION, PASSAGES, scorer(), placement="profile", profile=profile)
    assert kept.order == [0, 2, 3, 1]  # the default: only the top moves, the rest keep order
    row = STRATEGIES["passage_likelihood_profile"]
    assert row(QUESTION, PASSAGES, scorer=scorer(), profile=profile).order == kept.order


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"placement": "middle"}, "`placement` must be"),
        ({"placement": "profile"}, "pass a `profile` exactly when"),
        ({"profile": [0.1, 0.2]}, "pass a `profile` exactly when"),
        ({"rest": "random"}, "`rest` must be"),
        ({"template": "no placeholders"}, "template"),
    ],
)
def test_bad_options_are_named_before_scoring(kwargs: dict[str, object], message: str) -> None:
    one = scorer()
    with pytest.raises(ValueError, match=message):
        passage_likelihood(QUESTION, PASSAGES, one, **kwargs)  # type: ignore[arg-type]
    assert one.calls == []


def test_empty_and_single_inputs() -> None:
    one = scorer()
    assert passage_likelihood(QUESTION, [], one).passages == []
    single = passage_likelihood(QUESTION, ["only"], one)
    assert single.passages == ["only"] and single.details["gold"] == 0 and one.calls == []
    with pytest.raises(ValueError, match="question"):
        passage_likelihood("  ", PASSAGES, one)


@pytest.mark.slow
def test_on_the_embedded_model_it_is_the_gauge_of_each_passage_alone(embedded_raw: object) -> None:
    """The scores equal question_likelihood of each one-passage prompt (the same numbers),
    and the passage that answers the question is the gold candidate."""
    result = passage_likelihood(QUESTION, PASSAGES, embedded_raw)  # type: ignore[arg-type]
    for i, passage in enumerate(PASSAGES):
        alone = question_likelihood(QUESTION, [passage], embedded_raw)  # type: ignore[arg-type]
        assert result.scores[i] == pytest.approx(alone.scores[0], abs=1e-5)
    assert result.details["gold"] == 1
    assert result.cost.lm_calls == len(PASSAGES)
