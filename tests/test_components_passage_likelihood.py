"""PassageLikelihoodReorder and SelectAndPlace (each item scored alone, the likeliest placed;
SelectAndPlace keeps only the likeliest) in both frameworks equal their core functions."""

from __future__ import annotations

import copy
import inspect
import math
from pathlib import Path
from typing import Any

import pytest
from framework_adapters import FACTS, FRAMEWORKS, GOLD, QUESTION, Framework

from rag_position._integration import component_of, record_keys
from rag_position.strategies import STRATEGIES, PositionProfile
from rag_position.testing.scripted import ClosenessEmbedder, OnePassageScorer

pytestmark = pytest.mark.parametrize("fw", FRAMEWORKS)
by_strategy = pytest.mark.parametrize("strategy", ["passage_likelihood", "select_and_place"])

N_TOKENS = 4
# The posterior of each item (Lyon, Paris, Berlin, Madrid, Rome): a SpanScore.sum of
# ln(weight) makes the softmax of the sums exactly these weights (they sum to 1).
WEIGHTS = [0.10, 0.60, 0.01, 0.25, 0.04]
SUMS = {text: math.log(w) for (_, text), w in zip(FACTS, WEIGHTS, strict=True)}
MEANS = [math.log(w) / N_TOKENS for w in WEIGHTS]  # the record's score: the mean
RANKED = [1, 3, 0, 4, 2]  # Paris, Madrid, Lyon, Rome, Berlin (most likely first)
FIRST = [1, 0, 2, 3, 4]  # passage_likelihood: the likeliest first, the rest as given
# mass=0.9: 0.60 + 0.25 = 0.85 < 0.9 <= 0.95 = 0.60 + 0.25 + 0.10, so three are kept.
KEPT = [1, 3, 0]
DROPPED = [4, 2]
LAST = [0, 3, 1]  # the most likely last, the others before it by falling score
ALL = [2, 4, 0, 3, 1]  # all, by score, the best last
PROFILED = [0, 2, 3, 4, 1]  # [0.1, 0.4, 0.2, 0.3, 0.5]: the last position reads best
PROFILE = [0.1, 0.4, 0.2, 0.3, 0.5]


def scorer() -> OnePassageScorer:
    """Each prompt holds ONE passage; its total is ``SUMS[text]`` over ``N_TOKENS`` tokens."""
    return OnePassageScorer(QUESTION, SUMS, N_TOKENS)


def core(fw: Framework, strategy: str, items: list[Any], model: Any = None, **options: Any) -> Any:
    return STRATEGIES[strategy].function(QUESTION, fw.passages(items), model or scorer(), **options)


@by_strategy
def test_each_item_is_scored_alone_in_one_batch(fw: Framework, strategy: str) -> None:
    items = fw.items(5)
    before = fw.snapshot(items)
    alone = scorer()
    made = copy.deepcopy(fw.components[strategy](scorer=alone))  # shares its model
    out = fw.compress(made, items)
    order = fw.check_record(out, items, strategy)
    assert order == {"passage_likelihood": FIRST, "select_and_place": LAST}[strategy]
    assert [fw.score(x) for x in out] == [fw.score(items[i]) for i in order]  # the retriever's
    assert len(alone.calls) == 1 and len(alone.calls[0]) == 5  # N one-item prompts, batched
    assert all(p.count("Document [") == 1 for p in alone.calls[0])
    assert "(Title: Paris)" in alone.calls[0][1]
    before.check()  # inputs untouched
    alone = scorer()
    fw.compress(fw.components[strategy](scorer=alone, title_key=None), items)
    assert "Title: Paris" not in alone.calls[0][1]


PL_ROWS: list[tuple[dict[str, Any], list[int]]] = [
    ({}, FIRST),
    ({"rest": "scores"}, [1, 3, 0, 4, 2]),
    ({"placement": "last"}, [0, 2, 3, 4, 1]),
    ({"placement": "last", "rest": "scores"}, ALL),
    ({"placement": "profile", "profile": PROFILE}, PROFILED),
    ({"placement": "profile", "profile": PROFILE, "rest": "keep"}, PROFILED),
    (
        {"placement": "profile", "profile": PositionProfile([0.1, 0.2, 0.9, 0.3, 0])},
        [0, 2, 1, 3, 4],
    ),
    ({"template": "{search_results}\nQ: {question}\nA:"}, FIRST),
]
SP_ROWS: list[tuple[dict[str, Any], list[int], list[int]]] = [
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
    ({"placement": "profile", "profile": PROFILE, "mass": None}, [2, 3, 4, 0, 1], []),
    ({"template": "{search_results}\nQ: {question}\nA:"}, LAST, DROPPED),
]
ROWS = [("passage_likelihood", *row, None) for row in PL_ROWS] + [
    ("select_and_place", *row) for row in SP_ROWS
]


@pytest.mark.parametrize(
    ("strategy", "options", "order", "dropped"),
    ROWS,
    ids=[f"{s}-{'-'.join(o) or 'defaults'}" for s, o, _, _ in ROWS],
)
def test_the_order_and_the_record_are_the_core_functions(
    fw: Framework, strategy: str, options: dict[str, Any], order: list[int], dropped: Any
) -> None:
    items = fw.items(5)
    out = fw.compress(fw.components[strategy](scorer=scorer(), **options), items)
    result = core(fw, strategy, items, **options)
    assert fw.check_record(out, items, strategy) == order == result.order
    assert [fw.text(x) for x in out] == [p.text for p in result.passages]
    records = fw.records(out)
    assert [r["score"] for r in records] == [result.scores[i] for i in order]
    for r in records:  # the MEAN, not the sum
        i = r["original_rank"]
        assert r["score"] == pytest.approx(MEANS[i])
        assert r["score"] != pytest.approx(math.log(WEIGHTS[i]))
    if strategy == "passage_likelihood":
        gold = [r["original_rank"] for r in records if r["gold"]]
        assert gold == [1] == [result.details["gold"]]
        return
    ranks = [result.details["ranked"].index(i) for i in order]
    assert [r["likelihood_rank"] for r in records] == ranks == [RANKED.index(i) for i in order]
    posteriors = [r["posterior"] for r in records]
    assert posteriors == [result.details["posterior"][i] for i in order]
    assert posteriors == pytest.approx([WEIGHTS[i] for i in order])
    assert sum(posteriors) <= 1.0 + 1e-12
    assert all(r["dropped"] == dropped == result.details["dropped"] for r in records)
    assert len({id(r["dropped"]) for r in records}) == len(records)  # no shared lists


@pytest.mark.parametrize(
    ("strategy", "extras"),
    [
        ("passage_likelihood", {"gold": False}),
        (
            "select_and_place",
            {"likelihood_rank": 0, "posterior": 1.0, "similar_rank": None, "dropped": []},
        ),
    ],
)
def test_fewer_than_two_items_are_not_scored(
    fw: Framework, strategy: str, extras: dict[str, Any]
) -> None:
    alone = scorer()
    reorder = fw.components[strategy](scorer=alone)
    assert fw.compress(reorder, []) == []
    one = fw.compress(reorder, fw.items(1))
    assert set(record_keys(strategy)) == set(extras)
    assert fw.records(one) == [
        {"strategy": strategy, "score": None, "rank": 0, "original_rank": 0, **extras}
    ]
    assert alone.calls == []
    record = fw.records(one)[0]  # not the table's own lists
    assert all(record[k] is not v for k, v in record_keys(strategy).items() if isinstance(v, list))


@pytest.mark.parametrize(
    ("strategy", "defaults"),
    [
        ("passage_likelihood", {"placement": "first", "profile": None}),
        ("select_and_place", {"mass": 0.9, "top_n": None, "placement": "last", "profile": None}),
    ],
)
def test_the_options_are_the_core_functions_names_and_defaults(
    fw: Framework, strategy: str, defaults: dict[str, Any]
) -> None:
    function = STRATEGIES[strategy].function
    params = inspect.signature(function).parameters.values()
    wanted = {p.name: p.default for p in params if p.default is not p.empty}
    wanted.pop("embedder", None)  # a model, not an option
    assert set(STRATEGIES[strategy].option_model.model_fields) == set(wanted)
    fields = fw.components[strategy].model_fields
    assert {name: fields[name].default for name in wanted} == wanted
    assert {name: fields[name].default for name in defaults} == defaults
    assert {"scorer", "scorer_kwargs", "metadata_key", "title_key"} <= set(fields)
    lazy = fw.components[strategy](scorer="embedded", scorer_kwargs={"dtype": "float32"})
    assert lazy._scorer is not None and not lazy._scorer.loaded  # a spec loads on first use


def test_similar_keeps_the_closest_too_with_the_frameworks_embedder(fw: Framework) -> None:
    """``similar=1`` with the framework's embedder field: the core's union, recorded."""
    component = fw.components["select_and_place"]
    field = "embeddings" if "embeddings" in component.model_fields else "embed_model"
    assert field not in fw.components["passage_likelihood"].model_fields
    items = fw.items(5)
    close = ClosenessEmbedder([0.1, 0.2, 0.9, 0.3, 0.4])  # Berlin (2), dropped by mass, closest
    out = fw.compress(component(scorer=scorer(), similar=1, **{field: close}), items)
    result = core(fw, "select_and_place", items, similar=1, embedder=close)
    assert fw.check_record(out, items, "select_and_place") == result.order == [2, 0, 3, 1]
    assert [(r["similar_rank"], r["dropped"]) for r in fw.records(out)] == [(0, [4])] + [
        (None, [4])
    ] * 3
    with pytest.raises((ValueError, TypeError), match=f"`similar` needs `{field}`"):
        component(scorer=scorer(), similar=1)


def test_a_profile_file_is_read_at_construction(fw: Framework, tmp_path: Path) -> None:
    path = tmp_path / "profile.json"
    PositionProfile((0.1, 0.9, 0.2)).save(path)
    component = fw.component(
        "PassageLikelihoodReorder", scorer=scorer(), placement="profile", profile=path
    )
    path.unlink()  # read already (LangChain's field holds the profile: its own tests)
    out = fw.compress(component, fw.items(3))
    assert fw.text(out[1]) == GOLD  # the middle position reads best here


@pytest.mark.parametrize(
    ("name", "options", "use_async", "order"),
    [
        ("passage_likelihood", {}, False, FIRST),
        ("passage_likelihood_profile", {"profile": [0.1, 0.2, 0.3, 0.4, 0.9]}, True, PROFILED),
        ("select_and_place", {}, False, LAST),
        ("select_and_place", {"top_n": 2}, True, [3, 1]),
        ("select_and_place_profile", {"profile": [0.2, 0.9, 0.5]}, False, [0, 1, 3]),
    ],
)
def test_the_position_aware_retriever_knows_every_name(
    fw: Framework, name: str, options: dict[str, Any], use_async: bool, order: list[int]
) -> None:
    """Each name builds its component (``_profile``: placed by the profile) and runs it."""
    items = fw.items(5)
    before = fw.snapshot(items)
    aware = fw.retriever(items, name, scorer=scorer(), **options)
    reorderer = fw.reorderer(aware)
    assert type(reorderer) is fw.components[name]
    assert (reorderer.placement == "profile") == name.endswith("_profile")
    out = fw.retrieve(aware, use_async=use_async)
    assert fw.check_record(out, items, type(reorderer).strategy_name) == order
    by_hand = fw.components[name](scorer=scorer(), **STRATEGIES[name].fixed, **options)
    assert fw.outcome(out) == fw.outcome(fw.compress(by_hand, items))
    assert fw.records(out)[0].get("dropped", []) == [i for i in RANKED if i not in order]
    before.check()


# every row of the table placed by the profile that the retriever takes
PROFILE_ROWS = [n for n, row in STRATEGIES.items() if row.fixed.get("placement") == "profile"]
RETRIEVABLE_PROFILE_ROWS = [n for n in PROFILE_ROWS if component_of(n) is not None]


@pytest.mark.parametrize("strategy", RETRIEVABLE_PROFILE_ROWS)
def test_a_profile_name_needs_a_profile_and_fixes_the_placement(
    fw: Framework, strategy: str
) -> None:
    items = fw.items(3)
    with pytest.raises(ValueError, match="profile="):
        fw.retriever(items, strategy, scorer=scorer())
    with pytest.raises(TypeError, match="sets placement itself"):
        fw.retriever(items, strategy, scorer=scorer(), profile=[0.1, 0.2], placement="first")


@pytest.mark.slow
@by_strategy
def test_on_the_embedded_model_it_equals_the_core_and_finds_the_gold(
    fw: Framework, strategy: str, embedded_fp32: Any
) -> None:
    items = fw.items(4)  # Lyon, Paris, Berlin, Madrid
    out = fw.compress(fw.components[strategy](scorer=embedded_fp32), items)
    result = core(fw, strategy, items, embedded_fp32)
    assert fw.check_record(out, items, strategy) == result.order
    records = fw.records(out)
    assert [r["score"] for r in records] == pytest.approx([result.scores[i] for i in result.order])
    assert result.cost.lm_calls == 4
    if strategy == "passage_likelihood":
        assert fw.text(out[0]) == GOLD and records[0]["gold"] is True
        return
    posteriors = [result.details["posterior"][i] for i in result.order]
    assert [r["posterior"] for r in records] == pytest.approx(posteriors)
    assert records[0]["dropped"] == result.details["dropped"]
    assert fw.text(out[-1]) == GOLD and records[-1]["likelihood_rank"] == 0
    assert 1 <= len(out) < len(items)  # a sure ranking: something is dropped
    assert sum(r["posterior"] for r in records) <= 1 + 1e-9
