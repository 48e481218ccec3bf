"""PassageLikelihoodReorder in both frameworks: each item scored alone, the likeliest
placed, as the core does.

Every test runs once per framework (:data:`framework_adapters.FRAMEWORKS`). Scripted
scorers pin the order, the record and the options; one test runs the embedded model
(marked ``slow``) and checks the component equals the core function on it.
LlamaIndex's ``replace_score``, missing query and serialisation are in its own tests.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from framework_adapters import FACTS, FRAMEWORKS, GOLD, QUESTION, Framework
from pydantic import ValidationError

from rag_position._integration import METADATA_KEY, RECORD_KEYS, component_of, record_keys
from rag_position.strategies import STRATEGIES, PositionProfile, passage_likelihood
from rag_position.testing.scripted import OnePassageScorer

pytestmark = pytest.mark.parametrize("fw", FRAMEWORKS)

# The question's likelihood after each item alone (by its text): Paris best, Madrid next.
LIKELIHOODS = [-2.0, -0.5, -3.0, -1.0, -2.5]
VALUES = {text: value for (_, text), value in zip(FACTS, LIKELIHOODS, strict=True)}


class AloneScorer(OnePassageScorer):
    """Each prompt holds ONE passage; its value is ``VALUES[text]``."""

    def __init__(self) -> None:
        super().__init__(QUESTION, VALUES)


def reorder(fw: Framework, scorer: Any = None, **options: Any) -> Any:
    return fw.component("PassageLikelihoodReorder", scorer=scorer or AloneScorer(), **options)


def check_record(fw: Framework, out: Sequence[Any], items: list[Any]) -> list[int]:
    """The one schema, every input once, documented copies; returns the order."""
    order = [r["original_rank"] for r in fw.records(out)]
    assert sorted(order) == list(range(len(items)))
    keys = {*RECORD_KEYS, *record_keys("passage_likelihood")}
    assert keys == {*RECORD_KEYS, "gold"}
    for rank, (x, i) in enumerate(zip(out, order, strict=True)):
        record = fw.metadata(x)[METADATA_KEY]
        assert set(record) == keys
        assert record["strategy"] == "passage_likelihood" and record["rank"] == rank
        fw.check_copy(items[i], x)
    return order


# ---------------------------------------------------------------------- order and record
def test_the_likeliest_item_alone_goes_first_and_the_rest_keep_their_order(
    fw: Framework,
) -> None:
    items = fw.items(4)
    before = fw.snapshot(items)
    scorer = AloneScorer()
    out = fw.compress(reorder(fw, scorer), items)
    order = check_record(fw, out, items)
    assert fw.text(out[0]) == GOLD and order == [1, 0, 2, 3]
    assert [r["gold"] for r in fw.records(out)] == [True, False, False, False]
    assert [r["score"] for r in fw.records(out)] == [-0.5, -2.0, -3.0, -1.0]
    assert [fw.score(x) for x in out] == [fw.score(items[i]) for i in order]  # the retriever's
    assert len(scorer.calls) == 1 and len(scorer.calls[0]) == 4  # N one-item prompts, batched
    assert all(p.count("Document [") == 1 for p in scorer.calls[0])
    before.check()  # inputs untouched


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"rest": "scores"},
        {"placement": "last"},
        {"placement": "last", "rest": "scores"},
        {"placement": "profile", "profile": [0.1, 0.4, 0.2, 0.3, 0.5]},
        {"placement": "profile", "profile": [0.1, 0.4, 0.2, 0.3, 0.5], "rest": "keep"},
        {"template": "{search_results}\nQ: {question}\nA:"},
    ],
)
def test_the_order_and_scores_are_the_core_functions(
    fw: Framework, options: dict[str, Any]
) -> None:
    items = fw.items(5)
    out = fw.compress(reorder(fw, **options), items)
    core = passage_likelihood(QUESTION, [fw.passage(x) for x in items], AloneScorer(), **options)
    assert check_record(fw, out, items) == core.order
    assert [r["score"] for r in fw.records(out)] == [core.scores[i] for i in core.order]
    assert [r["original_rank"] for r in fw.records(out) if r["gold"]] == [core.details["gold"]]


def test_placement_last_and_profile(fw: Framework) -> None:
    items = fw.items(4)
    assert fw.text(fw.compress(reorder(fw, placement="last"), items)[-1]) == GOLD
    profile = PositionProfile([0.1, 0.2, 0.9, 0.3])  # position 2 reads best
    out = fw.compress(reorder(fw, placement="profile", profile=profile), items)
    assert fw.text(out[2]) == GOLD and fw.records(out)[2]["gold"] is True


def test_title_key_and_metadata_key(fw: Framework) -> None:
    items = fw.items(3)
    scorer = AloneScorer()
    fw.compress(reorder(fw, scorer), items)
    assert "(Title: Paris)" in scorer.calls[0][1]
    scorer = AloneScorer()
    fw.compress(reorder(fw, scorer, title_key=None), items)
    assert "Title: Paris" not in scorer.calls[0][1]
    out = fw.compress(reorder(fw, metadata_key=None), items)
    assert out[0] is items[1] and sorted(map(id, out)) == sorted(map(id, items))
    out = fw.compress(reorder(fw, metadata_key="pos"), items)
    assert all("pos" in fw.metadata(x) and METADATA_KEY not in fw.metadata(x) for x in out)


def test_fewer_than_two_items_are_not_scored(fw: Framework) -> None:
    scorer = AloneScorer()
    component = reorder(fw, scorer)
    assert fw.compress(component, []) == []
    one = fw.compress(component, fw.items(1))
    assert fw.records(one) == [
        {"strategy": "passage_likelihood", "score": None, "rank": 0, "original_rank": 0,
         "gold": False}
    ]  # fmt: skip
    assert scorer.calls == []


def test_async_equals_sync(fw: Framework) -> None:
    items = fw.items(5)
    component = reorder(fw, rest="scores")
    sync = fw.run(component, items, QUESTION, False)
    asyn = fw.run(component, items, QUESTION, True)
    assert [(fw.ident(x), fw.metadata(x), fw.score(x)) for x in sync] == [
        (fw.ident(x), fw.metadata(x), fw.score(x)) for x in asyn
    ]


# ---------------------------------------------------------------------- options
def test_options_are_the_core_functions_names_and_defaults(fw: Framework) -> None:
    core = {
        p.name: p.default
        for p in inspect.signature(passage_likelihood).parameters.values()
        if p.default is not inspect.Parameter.empty
    }
    assert set(STRATEGIES["passage_likelihood"].option_model.model_fields) == set(core)
    fields = fw.package.PassageLikelihoodReorder.model_fields
    assert {name: fields[name].default for name in core} == core
    for name in ("scorer", "scorer_kwargs", "metadata_key", "title_key"):
        assert name in fields


def test_bad_options_are_refused_at_construction(fw: Framework) -> None:
    scorer = AloneScorer()
    with pytest.raises(ValueError, match="profile"):
        reorder(fw, scorer, placement="profile")
    with pytest.raises(ValueError, match="profile"):
        reorder(fw, scorer, profile=[0.1, 0.2])  # placement="first"
    with pytest.raises(TypeError, match="numbers"):
        reorder(fw, scorer, placement="profile", profile=["high", "low"])
    with pytest.raises(ValidationError):
        reorder(fw, scorer, placement="middle")
    with pytest.raises(ValidationError):
        reorder(fw, scorer, rest="shuffle")
    error, match = fw.unknown_option("n_rotations")
    with pytest.raises(error, match=match):
        reorder(fw, scorer, n_rotations=3)  # ConvexScore's, not ours
    with pytest.raises(ValueError, match="scorer"):
        fw.component("PassageLikelihoodReorder")
    with pytest.raises(TypeError, match="score"):
        fw.component("PassageLikelihoodReorder", scorer=object())


def test_a_spec_string_loads_on_first_use(fw: Framework) -> None:
    component = reorder(fw, "embedded", scorer_kwargs={"dtype": "float32"})
    assert component._scorer is not None and not component._scorer.loaded


def test_a_profile_file_is_read_at_construction(fw: Framework, tmp_path: Path) -> None:
    path = tmp_path / "profile.json"
    PositionProfile((0.1, 0.9, 0.2)).save(path)
    component = reorder(fw, placement="profile", profile=path)
    path.unlink()  # read already (LangChain's field holds the profile: its own tests)
    out = fw.compress(component, fw.items(3))
    assert fw.text(out[1]) == GOLD  # the middle position reads best here


# ---------------------------------------------------------------------- the retriever
def test_the_retriever_knows_both_names(fw: Framework) -> None:
    cls = fw.package.PassageLikelihoodReorder
    assert fw.components["passage_likelihood"] is cls
    assert fw.components["passage_likelihood_profile"] is cls
    items = fw.items(4)
    aware = fw.retriever(items, "passage_likelihood", scorer=AloneScorer())
    assert isinstance(fw.reorderer(aware), cls)
    out = fw.retrieve(aware)
    assert fw.text(out[0]) == GOLD and fw.records(out)[0]["strategy"] == "passage_likelihood"
    aware = fw.retriever(
        items,
        "passage_likelihood_profile",
        scorer=AloneScorer(),
        profile=[0.1, 0.2, 0.3, 0.9],  # the last position reads best
    )
    reorderer = fw.reorderer(aware)
    assert isinstance(reorderer, cls) and reorderer.placement == "profile"
    out = fw.retrieve(aware, use_async=True)
    assert fw.text(out[-1]) == GOLD and fw.records(out)[-1]["gold"] is True


PROFILE_ROWS = [n for n, row in STRATEGIES.items() if row.fixed.get("placement") == "profile"]
RETRIEVABLE_PROFILE_ROWS = [n for n in PROFILE_ROWS if component_of(n) is not None]


@pytest.mark.parametrize("strategy", RETRIEVABLE_PROFILE_ROWS)
def test_a_profile_name_needs_a_profile_and_fixes_the_placement(
    fw: Framework, strategy: str
) -> None:
    """Every row placed by the profile that the retriever takes (from the table)."""
    items = fw.items(3)
    with pytest.raises(ValueError, match="profile="):
        fw.retriever(items, strategy, scorer=AloneScorer())
    with pytest.raises(TypeError, match="sets placement itself"):
        fw.retriever(items, strategy, scorer=AloneScorer(), profile=[0.1, 0.2], placement="first")


# ---------------------------------------------------------------------- the embedded model
@pytest.mark.slow
def test_on_the_embedded_model_it_equals_the_core_and_finds_the_gold(
    fw: Framework, embedded_fp32: Any
) -> None:
    items = fw.items(4)  # Lyon, Paris, Berlin, Madrid
    out = fw.compress(reorder(fw, embedded_fp32), items)
    core = passage_likelihood(QUESTION, [fw.passage(x) for x in items], embedded_fp32)
    assert check_record(fw, out, items) == core.order
    assert [r["score"] for r in fw.records(out)] == pytest.approx(
        [core.scores[i] for i in core.order]
    )
    assert core.cost.lm_calls == 4
    assert fw.text(out[0]) == GOLD and fw.records(out)[0]["gold"] is True
