"""PassageLikelihoodReorder in both frameworks (:data:`framework_adapters.FRAMEWORKS`): each
item scored alone, the likeliest placed, as the core does. Scripted scorers pin the order,
the record and the options; the embedded model (``slow``) checks it equals the core function.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
from framework_adapters import FACTS, FRAMEWORKS, GOLD, QUESTION, Framework

from rag_position._integration import component_of, record_keys
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


def test_the_likeliest_item_alone_goes_first_and_the_rest_keep_their_order(
    fw: Framework,
) -> None:
    items = fw.items(4)
    before = fw.snapshot(items)
    scorer = AloneScorer()
    out = fw.compress(reorder(fw, scorer), items)
    assert set(record_keys("passage_likelihood")) == {"gold"}
    order = fw.check_record(out, items, "passage_likelihood")
    assert fw.text(out[0]) == GOLD and order == [1, 0, 2, 3]
    assert [r["gold"] for r in fw.records(out)] == [True, False, False, False]
    assert [r["score"] for r in fw.records(out)] == [-0.5, -2.0, -3.0, -1.0]
    assert [fw.score(x) for x in out] == [fw.score(items[i]) for i in order]  # the retriever's
    assert len(scorer.calls) == 1 and len(scorer.calls[0]) == 4  # N one-item prompts, batched
    assert all(p.count("Document [") == 1 for p in scorer.calls[0])
    before.check()  # inputs untouched


PROFILED = [0, 2, 3, 4, 1]  # [0.1, 0.4, 0.2, 0.3, 0.5]: the last position reads best


@pytest.mark.parametrize(
    ("options", "order"),
    [
        ({}, [1, 0, 2, 3, 4]),
        ({"rest": "scores"}, [1, 3, 0, 4, 2]),
        ({"placement": "last"}, [0, 2, 3, 4, 1]),
        ({"placement": "last", "rest": "scores"}, [2, 4, 0, 3, 1]),
        ({"placement": "profile", "profile": [0.1, 0.4, 0.2, 0.3, 0.5]}, PROFILED),
        ({"placement": "profile", "profile": [0.1, 0.4, 0.2, 0.3, 0.5], "rest": "keep"}, PROFILED),
        (
            {"placement": "profile", "profile": PositionProfile([0.1, 0.2, 0.9, 0.3, 0])},
            [0, 2, 1, 3, 4],
        ),
        ({"template": "{search_results}\nQ: {question}\nA:"}, [1, 0, 2, 3, 4]),
    ],
)
def test_the_order_and_scores_are_the_core_functions(
    fw: Framework, options: dict[str, Any], order: list[int]
) -> None:
    items = fw.items(5)
    out = fw.compress(reorder(fw, **options), items)
    core = passage_likelihood(QUESTION, fw.passages(items), AloneScorer(), **options)
    assert fw.check_record(out, items, "passage_likelihood") == order == core.order
    assert [r["score"] for r in fw.records(out)] == [core.scores[i] for i in core.order]
    assert (
        [r["original_rank"] for r in fw.records(out) if r["gold"]] == [1] == [core.details["gold"]]
    )


def test_title_key(fw: Framework) -> None:
    items = fw.items(3)
    scorer = AloneScorer()
    fw.compress(reorder(fw, scorer), items)
    assert "(Title: Paris)" in scorer.calls[0][1]
    scorer = AloneScorer()
    fw.compress(reorder(fw, scorer, title_key=None), items)
    assert "Title: Paris" not in scorer.calls[0][1]


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


def test_options_are_the_core_functions_names_and_defaults(fw: Framework) -> None:
    core = {
        p.name: p.default
        for p in inspect.signature(passage_likelihood).parameters.values()
        if p.default is not inspect.Parameter.empty
    }
    assert set(STRATEGIES["passage_likelihood"].option_model.model_fields) == set(core)
    fields = fw.package.PassageLikelihoodReorder.model_fields
    assert {name: fields[name].default for name in core} == core
    assert {"scorer", "scorer_kwargs", "metadata_key", "title_key"} <= set(fields)


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


def test_the_retriever_knows_both_names(fw: Framework) -> None:
    cls = fw.package.PassageLikelihoodReorder
    items = fw.items(4)
    aware = fw.retriever(items, "passage_likelihood", scorer=AloneScorer())
    assert isinstance(fw.reorderer(aware), cls)
    out = fw.retrieve(aware)
    assert fw.text(out[0]) == GOLD and fw.records(out)[0]["strategy"] == "passage_likelihood"
    profile = [0.1, 0.2, 0.3, 0.9]  # the last position reads best
    aware = fw.retriever(items, "passage_likelihood_profile", scorer=AloneScorer(), profile=profile)
    reorderer = fw.reorderer(aware)
    assert isinstance(reorderer, cls) and reorderer.placement == "profile"
    out = fw.retrieve(aware, use_async=True)
    assert fw.text(out[-1]) == GOLD and fw.records(out)[-1]["gold"] is True


# every row of the table placed by the profile that the retriever takes
PROFILE_ROWS = [n for n, row in STRATEGIES.items() if row.fixed.get("placement") == "profile"]
RETRIEVABLE_PROFILE_ROWS = [n for n in PROFILE_ROWS if component_of(n) is not None]


@pytest.mark.parametrize("strategy", RETRIEVABLE_PROFILE_ROWS)
def test_a_profile_name_needs_a_profile_and_fixes_the_placement(
    fw: Framework, strategy: str
) -> None:
    items = fw.items(3)
    with pytest.raises(ValueError, match="profile="):
        fw.retriever(items, strategy, scorer=AloneScorer())
    with pytest.raises(TypeError, match="sets placement itself"):
        fw.retriever(items, strategy, scorer=AloneScorer(), profile=[0.1, 0.2], placement="first")


@pytest.mark.slow
def test_on_the_embedded_model_it_equals_the_core_and_finds_the_gold(
    fw: Framework, embedded_fp32: Any
) -> None:
    items = fw.items(4)  # Lyon, Paris, Berlin, Madrid
    out = fw.compress(reorder(fw, embedded_fp32), items)
    core = passage_likelihood(QUESTION, fw.passages(items), embedded_fp32)
    assert fw.check_record(out, items, "passage_likelihood") == core.order
    scores = [core.scores[i] for i in core.order]
    assert [r["score"] for r in fw.records(out)] == pytest.approx(scores)
    assert core.cost.lm_calls == 4
    assert fw.text(out[0]) == GOLD and fw.records(out)[0]["gold"] is True
