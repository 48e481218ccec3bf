"""SelectAndPlace in both frameworks (:data:`framework_adapters.FRAMEWORKS`): each item scored
alone, the likeliest kept (mass, top_n), then placed. Scripted scorers pin what is kept, the
order, the record and the options (the posterior chosen so every value is computable by
hand); the embedded model (``slow``) checks the component equals the core function.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from framework_adapters import FACTS, FRAMEWORKS, GOLD, QUESTION, Framework

from rag_position._integration import record_keys
from rag_position.strategies import STRATEGIES, PositionProfile, select_and_place
from rag_position.testing.scripted import OnePassageScorer

pytestmark = pytest.mark.parametrize("fw", FRAMEWORKS)

N_TOKENS = 4
# The posterior of each item (Lyon, Paris, Berlin, Madrid, Rome): a SpanScore.sum of
# ln(weight) makes the softmax of the sums exactly these weights (they sum to 1).
WEIGHTS = [0.10, 0.60, 0.01, 0.25, 0.04]
SUMS = {text: math.log(w) for (_, text), w in zip(FACTS, WEIGHTS, strict=True)}
MEANS = [math.log(w) / N_TOKENS for w in WEIGHTS]  # the record's score: the mean
RANKED = [1, 3, 0, 4, 2]  # Paris, Madrid, Lyon, Rome, Berlin (most likely first)
# mass=0.9: 0.60 + 0.25 = 0.85 < 0.9 <= 0.95 = 0.60 + 0.25 + 0.10, so three are kept.
KEPT = [1, 3, 0]
DROPPED = [4, 2]
LAST = [0, 3, 1]  # the most likely last, the others before it by falling score
ALL = [2, 4, 0, 3, 1]  # all, by score, the best last


class AloneScorer(OnePassageScorer):
    """Each prompt holds ONE passage; its total is ``SUMS[text]`` over ``N_TOKENS`` tokens."""

    def __init__(self) -> None:
        super().__init__(QUESTION, SUMS, N_TOKENS)


def select(fw: Framework, items: list[Any], **options: Any) -> Any:
    return fw.compress(fw.component("SelectAndPlace", scorer=AloneScorer(), **options), items)


def core_result(fw: Framework, items: list[Any], scorer: Any = None, **options: Any) -> Any:
    return select_and_place(QUESTION, fw.passages(items), scorer or AloneScorer(), **options)


def test_the_default_mass_keeps_three_and_places_the_likeliest_last(fw: Framework) -> None:
    items = fw.items(5)
    before = fw.snapshot(items)
    scorer = AloneScorer()
    out = fw.compress(fw.component("SelectAndPlace", scorer=scorer), items)
    assert set(record_keys("select_and_place")) == {"likelihood_rank", "posterior", "dropped"}
    assert fw.check_record(out, items, "select_and_place") == LAST and fw.text(out[-1]) == GOLD
    assert [fw.score(x) for x in out] == [fw.score(items[i]) for i in LAST]  # the retriever's
    assert len(scorer.calls) == 1 and len(scorer.calls[0]) == 5  # N one-item prompts, batched
    assert all(p.count("Document [") == 1 for p in scorer.calls[0])
    core = core_result(fw, items)
    for r in fw.records(out):
        i = r["original_rank"]
        assert r["score"] == pytest.approx(MEANS[i]) == core.scores[i]  # the MEAN, not the sum
        assert r["score"] != pytest.approx(math.log(WEIGHTS[i]))
        assert r["likelihood_rank"] == RANKED.index(i)
        assert r["posterior"] == pytest.approx(WEIGHTS[i]) == core.details["posterior"][i]
        assert r["dropped"] == DROPPED == core.details["dropped"]
    assert [r["likelihood_rank"] for r in fw.records(out)] == [2, 1, 0]
    kept_mass = sum(r["posterior"] for r in fw.records(out))
    assert kept_mass == pytest.approx(0.95) and kept_mass <= 1.0
    lists = [r["dropped"] for r in fw.records(out)]  # no shared lists
    assert len({id(x) for x in lists}) == len(lists)
    before.check()  # inputs untouched


@pytest.mark.parametrize(
    ("options", "order", "dropped"),
    [
        ({}, LAST, DROPPED),
        ({"top_n": 1}, [1], [3, 0, 4, 2]),
        ({"top_n": 2}, [3, 1], [0, 4, 2]),  # the smaller of mass's 3 and top_n
        ({"mass": 0.5}, [1], [3, 0, 4, 2]),  # 0.60 alone holds it
        ({"mass": 0.85}, [3, 1], [0, 4, 2]),  # exactly the top two's share
        ({"mass": None}, ALL, []),
        ({"mass": 1.0}, ALL, []),
        ({"mass": None, "top_n": 4}, [4, 0, 3, 1], [2]),
        ({"mass": None, "top_n": 3}, LAST, DROPPED),
        ({"placement": "first"}, KEPT, DROPPED),  # the best first, then by falling score
        ({"mass": None, "placement": "first"}, RANKED, []),
        # three kept; this profile reads the middle best, then the end, then the start
        ({"placement": "profile", "profile": [0.2, 0.9, 0.5]}, [0, 1, 3], DROPPED),
        ({"placement": "profile", "profile": PositionProfile([0.1, 0.9, 0.2])}, [0, 1, 3], DROPPED),
        (
            {"placement": "profile", "profile": [0.1, 0.4, 0.2, 0.3, 0.5], "mass": None},
            [2, 3, 4, 0, 1],
            [],
        ),
        ({"template": "{search_results}\nQ: {question}\nA:"}, LAST, DROPPED),
    ],
)
def test_what_is_kept_dropped_and_where_is_the_core_functions(
    fw: Framework, options: dict[str, Any], order: list[int], dropped: list[int]
) -> None:
    items = fw.items(5)
    out = select(fw, items, **options)
    core = core_result(fw, items, **options)
    assert fw.check_record(out, items, "select_and_place") == order == core.order
    assert [fw.ident(x) for x in out] == [f"id-{i}" for i in order]
    assert [fw.text(x) for x in out] == [fw.text(items[i]) for i in order]
    assert [fw.text(x) for x in out] == [p.text for p in core.passages]
    records = fw.records(out)
    assert [r["score"] for r in records] == [core.scores[i] for i in order]
    assert [r["posterior"] for r in records] == [core.details["posterior"][i] for i in order]
    ranks = [core.details["ranked"].index(i) for i in order]
    assert [r["likelihood_rank"] for r in records] == ranks
    assert all(r["dropped"] == dropped == core.details["dropped"] for r in records)
    assert sum(r["posterior"] for r in records) <= 1.0 + 1e-12


def test_fewer_than_two_items_are_not_scored(fw: Framework) -> None:
    scorer = AloneScorer()
    reorder = fw.component("SelectAndPlace", scorer=scorer)
    assert fw.compress(reorder, []) == []
    one = fw.compress(reorder, fw.items(1))
    assert fw.records(one) == [
        {"strategy": "select_and_place", "score": None, "rank": 0, "original_rank": 0,
         "likelihood_rank": 0, "posterior": 1.0, "dropped": []}
    ]  # fmt: skip
    assert scorer.calls == []
    assert fw.records(one)[0]["dropped"] is not record_keys("select_and_place")["dropped"]


def test_the_defaults_are_the_core_functions(fw: Framework) -> None:
    fields = fw.package.SelectAndPlace.model_fields
    assert fields["mass"].default == 0.9 and fields["top_n"].default is None
    assert fields["placement"].default == "last" and fields["profile"].default is None
    assert set(STRATEGIES["select_and_place"].option_model.model_fields) <= set(fields)


def test_the_position_aware_retriever_keeps_the_subset(fw: Framework) -> None:
    items = fw.items(5)
    before = fw.snapshot(items)
    aware = fw.retriever(items, "select_and_place", scorer=AloneScorer())
    assert isinstance(fw.reorderer(aware), fw.package.SelectAndPlace)
    out = fw.retrieve(aware)
    assert fw.check_record(out, items, "select_and_place") == LAST and fw.text(out[-1]) == GOLD
    aware = fw.retriever(items, "select_and_place", scorer=AloneScorer(), top_n=2)
    out = fw.retrieve(aware, use_async=True)
    assert fw.check_record(out, items, "select_and_place") == [3, 1]
    assert fw.records(out)[0]["dropped"] == [0, 4, 2]
    aware = fw.retriever(
        items, "select_and_place_profile", scorer=AloneScorer(), profile=[0.2, 0.9, 0.5]
    )
    reorderer = fw.reorderer(aware)
    assert isinstance(reorderer, fw.package.SelectAndPlace) and reorderer.placement == "profile"
    out = fw.retrieve(aware)
    assert fw.check_record(out, items, "select_and_place") == [0, 1, 3] and fw.text(out[1]) == GOLD
    before.check()


@pytest.mark.slow
def test_on_the_embedded_model_it_equals_the_core_and_keeps_the_gold_last(
    fw: Framework, embedded_fp32: Any
) -> None:
    items = fw.items(4)  # Lyon, Paris, Berlin, Madrid
    out = fw.compress(fw.component("SelectAndPlace", scorer=embedded_fp32), items)
    core = core_result(fw, items, embedded_fp32)
    assert fw.check_record(out, items, "select_and_place") == core.order
    records = fw.records(out)
    assert [r["score"] for r in records] == pytest.approx([core.scores[i] for i in core.order])
    posteriors = [core.details["posterior"][i] for i in core.order]
    assert [r["posterior"] for r in records] == pytest.approx(posteriors)
    assert fw.records(out)[0]["dropped"] == core.details["dropped"]
    assert core.cost.lm_calls == 4
    assert fw.text(out[-1]) == GOLD and fw.records(out)[-1]["likelihood_rank"] == 0
    assert 1 <= len(out) < len(items)  # a sure ranking: something is dropped
    assert sum(r["posterior"] for r in fw.records(out)) <= 1 + 1e-9
