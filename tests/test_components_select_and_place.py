"""SelectAndPlace in both frameworks: each item scored alone, the likeliest kept (mass,
top_n), then placed.

Every test runs once per framework (:data:`framework_adapters.FRAMEWORKS`). Scripted
scorers pin what is kept and dropped, the order, the record and the options (the
posterior is chosen so every expected value is computable by hand); one test runs the
embedded model (marked ``slow``) and checks the component equals the core function on
it. LlamaIndex's ``replace_score`` and missing query, and LangChain's
``ContextualCompressionRetriever``, are in each framework's own tests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pytest
from framework_adapters import FACTS, FRAMEWORKS, GOLD, QUESTION, Framework
from pydantic import ValidationError

from rag_position._integration import METADATA_KEY, RECORD_KEYS, record_keys
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
EXPECTED_RECORD_KEYS = {*RECORD_KEYS, "likelihood_rank", "posterior", "dropped"}


class AloneScorer(OnePassageScorer):
    """Each prompt holds ONE passage; its total is ``SUMS[text]`` over ``N_TOKENS`` tokens."""

    def __init__(self) -> None:
        super().__init__(QUESTION, SUMS, N_TOKENS)


def check_record(fw: Framework, out: Sequence[Any], items: list[Any]) -> list[int]:
    """The one schema, each kept input once, documented copies; returns the order kept."""
    order = [r["original_rank"] for r in fw.records(out)]
    assert len(set(order)) == len(order) and all(0 <= i < len(items) for i in order)
    assert set(record_keys("select_and_place")) == {"likelihood_rank", "posterior", "dropped"}
    dropped = sorted(set(range(len(items))) - set(order))
    for rank, (x, i) in enumerate(zip(out, order, strict=True)):
        record = fw.metadata(x)[METADATA_KEY]
        assert set(record) == EXPECTED_RECORD_KEYS
        assert record["strategy"] == "select_and_place" and record["rank"] == rank
        assert sorted(record["dropped"]) == dropped
        fw.check_copy(items[i], x)
    return order


def select(fw: Framework, items: list[Any], **options: Any) -> Any:
    return fw.compress(fw.component("SelectAndPlace", scorer=AloneScorer(), **options), items)


def core_result(fw: Framework, items: list[Any], scorer: Any = None, **options: Any) -> Any:
    passages = [fw.passage(x) for x in items]
    return select_and_place(QUESTION, passages, scorer or AloneScorer(), **options)


# ---------------------------------------------------------------------- what is kept
def test_the_default_mass_keeps_three_and_places_the_likeliest_last(fw: Framework) -> None:
    items = fw.items(5)
    before = fw.snapshot(items)
    scorer = AloneScorer()
    out = fw.compress(fw.component("SelectAndPlace", scorer=scorer), items)
    assert check_record(fw, out, items) == LAST
    assert fw.text(out[-1]) == GOLD
    assert [r["dropped"] for r in fw.records(out)] == [DROPPED] * 3
    assert [fw.score(x) for x in out] == [fw.score(items[i]) for i in LAST]  # the retriever's
    assert len(scorer.calls) == 1 and len(scorer.calls[0]) == 5  # N one-item prompts, batched
    assert all(p.count("Document [") == 1 for p in scorer.calls[0])
    before.check()  # inputs untouched


def test_the_record_of_each_kept_item(fw: Framework) -> None:
    items = fw.items(5)
    out = select(fw, items)
    core = core_result(fw, items)
    for r in fw.records(out):
        i = r["original_rank"]
        assert r["score"] == pytest.approx(MEANS[i]) == core.scores[i]  # the MEAN, not the sum
        assert r["score"] != pytest.approx(math.log(WEIGHTS[i]))
        assert r["likelihood_rank"] == RANKED.index(i)
        assert (
            r["posterior"] == pytest.approx(WEIGHTS[i])
            and r["posterior"] == (core.details["posterior"][i])
        )
        assert r["dropped"] == DROPPED == core.details["dropped"]
    assert [r["likelihood_rank"] for r in fw.records(out)] == [2, 1, 0]
    kept_mass = sum(r["posterior"] for r in fw.records(out))
    assert kept_mass == pytest.approx(0.95) and kept_mass <= 1.0


@pytest.mark.parametrize(
    ("options", "order", "dropped"),
    [
        ({}, LAST, DROPPED),
        ({"top_n": 1}, [1], [3, 0, 4, 2]),
        ({"top_n": 2}, [3, 1], [0, 4, 2]),  # the smaller of mass's 3 and top_n
        ({"mass": 0.5}, [1], [3, 0, 4, 2]),  # 0.60 alone holds it
        ({"mass": 0.85}, [3, 1], [0, 4, 2]),  # exactly the top two's share
        ({"mass": None}, [2, 4, 0, 3, 1], []),  # all, by score, the best last
        ({"mass": 1.0}, [2, 4, 0, 3, 1], []),
        ({"mass": None, "top_n": 4}, [4, 0, 3, 1], [2]),
        ({"placement": "first"}, KEPT, DROPPED),  # the best first, then by falling score
        ({"mass": None, "placement": "first"}, RANKED, []),
        # three kept; this profile reads the middle best, then the end, then the start
        ({"placement": "profile", "profile": [0.2, 0.9, 0.5]}, [0, 1, 3], DROPPED),
    ],
)
def test_what_is_kept_dropped_and_where(
    fw: Framework, options: dict[str, Any], order: list[int], dropped: list[int]
) -> None:
    items = fw.items(5)
    out = select(fw, items, **options)
    assert check_record(fw, out, items) == order
    assert all(r["dropped"] == dropped for r in fw.records(out))
    assert [fw.ident(x) for x in out] == [f"id-{i}" for i in order]
    assert [fw.text(x) for x in out] == [fw.text(items[i]) for i in order]


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"top_n": 1},
        {"top_n": 2},
        {"mass": None},
        {"mass": 0.5},
        {"mass": 1.0},
        {"mass": None, "top_n": 3},
        {"placement": "first"},
        {"placement": "profile", "profile": [0.2, 0.9, 0.5]},
        {"placement": "profile", "profile": [0.1, 0.4, 0.2, 0.3, 0.5], "mass": None},
        {"template": "{search_results}\nQ: {question}\nA:"},
    ],
)
def test_the_result_is_the_core_functions(fw: Framework, options: dict[str, Any]) -> None:
    items = fw.items(5)
    out = select(fw, items, **options)
    core = core_result(fw, items, **options)
    assert check_record(fw, out, items) == core.order
    assert [fw.text(x) for x in out] == [p.text for p in core.passages]
    assert [r["score"] for r in fw.records(out)] == [core.scores[i] for i in core.order]
    assert [r["posterior"] for r in fw.records(out)] == [
        core.details["posterior"][i] for i in core.order
    ]
    assert [r["likelihood_rank"] for r in fw.records(out)] == [
        core.details["ranked"].index(i) for i in core.order
    ]
    assert all(r["dropped"] == core.details["dropped"] for r in fw.records(out))
    assert sum(r["posterior"] for r in fw.records(out)) <= 1.0 + 1e-12


def test_the_profile_component_places_down_the_profile(fw: Framework) -> None:
    items = fw.items(5)
    profile = PositionProfile([0.1, 0.9, 0.2])  # three kept: the middle reads best
    out = select(fw, items, placement="profile", profile=profile)
    assert fw.text(out[1]) == GOLD and fw.records(out)[1]["likelihood_rank"] == 0


def test_metadata_key_none_returns_the_callers_items(fw: Framework) -> None:
    items = fw.items(5)
    out = select(fw, items, metadata_key=None)
    assert [id(x) for x in out] == [id(items[i]) for i in LAST]
    assert all(METADATA_KEY not in fw.metadata(x) for x in out)


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


def test_async_equals_sync(fw: Framework) -> None:
    items = fw.items(5)
    for options in ({}, {"top_n": 1}, {"mass": None, "placement": "first"}):
        reorder = fw.component("SelectAndPlace", scorer=AloneScorer(), **options)
        sync = fw.run(reorder, items, QUESTION, False)
        asyn = fw.run(reorder, items, QUESTION, True)
        assert [(fw.ident(x), fw.text(x), fw.metadata(x), fw.score(x)) for x in sync] == [
            (fw.ident(x), fw.text(x), fw.metadata(x), fw.score(x)) for x in asyn
        ]


# ---------------------------------------------------------------------- options
def test_the_defaults_are_the_core_functions(fw: Framework) -> None:
    fields = fw.package.SelectAndPlace.model_fields
    assert fields["mass"].default == 0.9 and fields["top_n"].default is None
    assert fields["placement"].default == "last" and fields["profile"].default is None
    assert set(STRATEGIES["select_and_place"].option_model.model_fields) <= set(fields)


@pytest.mark.parametrize(
    "options",
    [
        {"mass": 0},
        {"mass": 0.0},
        {"mass": 1.5},
        {"mass": -0.1},
        {"mass": "most"},
        {"top_n": 0},
        {"top_n": -1},
        {"placement": "middle"},
    ],
)
def test_bad_options_are_refused_at_construction(fw: Framework, options: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        fw.component("SelectAndPlace", scorer=AloneScorer(), **options)


def test_bad_placement_names_and_models_are_refused_at_construction(fw: Framework) -> None:
    error, match = fw.unknown_option("rest")
    with pytest.raises(error, match=match):
        fw.component("SelectAndPlace", scorer=AloneScorer(), rest="scores")  # not ours
    with pytest.raises(ValueError, match="profile"):
        fw.component("SelectAndPlace", scorer=AloneScorer(), placement="profile")
    with pytest.raises(ValueError, match="profile"):
        fw.component("SelectAndPlace", scorer=AloneScorer(), profile=[0.1, 0.2])  # "last"
    with pytest.raises(ValueError, match="scorer"):
        fw.component("SelectAndPlace")
    with pytest.raises(TypeError, match="score"):
        fw.component("SelectAndPlace", scorer=object())


# ---------------------------------------------------------------------- the retriever
def test_the_position_aware_retriever_keeps_the_subset(fw: Framework) -> None:
    assert fw.components["select_and_place"] is fw.package.SelectAndPlace
    assert fw.components["select_and_place_profile"] is fw.package.SelectAndPlace
    items = fw.items(5)
    before = fw.snapshot(items)
    aware = fw.retriever(items, "select_and_place", scorer=AloneScorer())
    assert isinstance(fw.reorderer(aware), fw.package.SelectAndPlace)
    out = fw.retrieve(aware)
    assert check_record(fw, out, items) == LAST and fw.text(out[-1]) == GOLD
    aware = fw.retriever(items, "select_and_place", scorer=AloneScorer(), top_n=2)
    out = fw.retrieve(aware, use_async=True)
    assert check_record(fw, out, items) == [3, 1] and fw.records(out)[0]["dropped"] == [0, 4, 2]
    aware = fw.retriever(
        items, "select_and_place_profile", scorer=AloneScorer(), profile=[0.2, 0.9, 0.5]
    )
    reorderer = fw.reorderer(aware)
    assert isinstance(reorderer, fw.package.SelectAndPlace) and reorderer.placement == "profile"
    out = fw.retrieve(aware)
    assert check_record(fw, out, items) == [0, 1, 3] and fw.text(out[1]) == GOLD
    before.check()


# ---------------------------------------------------------------------- the embedded model
@pytest.mark.slow
def test_on_the_embedded_model_it_equals_the_core_and_keeps_the_gold_last(
    fw: Framework, embedded_fp32: Any
) -> None:
    items = fw.items(4)  # Lyon, Paris, Berlin, Madrid
    out = fw.compress(fw.component("SelectAndPlace", scorer=embedded_fp32), items)
    core = core_result(fw, items, embedded_fp32)
    assert check_record(fw, out, items) == core.order
    assert [r["score"] for r in fw.records(out)] == pytest.approx(
        [core.scores[i] for i in core.order]
    )
    assert [r["posterior"] for r in fw.records(out)] == pytest.approx(
        [core.details["posterior"][i] for i in core.order]
    )
    assert fw.records(out)[0]["dropped"] == core.details["dropped"]
    assert core.cost.lm_calls == 4
    assert fw.text(out[-1]) == GOLD and fw.records(out)[-1]["likelihood_rank"] == 0
    assert 1 <= len(out) < len(items)  # a sure ranking: something is dropped
    assert sum(r["posterior"] for r in fw.records(out)) <= 1 + 1e-9


# ---------------------------------------------------------------------- no shared lists
def test_a_single_items_record_does_not_alias_the_registry_default(fw: Framework) -> None:
    default = record_keys("select_and_place")["dropped"]
    out = fw.compress(fw.component("SelectAndPlace", scorer=AloneScorer()), fw.items(1))
    assert fw.records(out)[0]["dropped"] is not default


def test_each_kept_items_dropped_list_is_its_own(fw: Framework) -> None:
    out = fw.compress(fw.component("SelectAndPlace", scorer=AloneScorer()), fw.items(5))
    lists = [r["dropped"] for r in fw.records(out)]
    assert len(lists) > 1 and len({id(x) for x in lists}) == len(lists)
