"""SelectAndPlace: each node scored alone, the likeliest kept (mass, top_n), then placed.

Scripted scorers pin what is kept and dropped, the order, the record, ``replace_score``
and the options (the posterior is chosen so every expected value is computable by
hand); one test runs the embedded model (marked ``slow``) and checks the postprocessor
equals the core function on it.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import Any

import pytest
from li_testkit import DOCS, make_nodes
from li_testkit import node_records as _records
from li_testkit import node_snapshot as _snapshot
from li_testkit import node_text as _text
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.postprocessor.rag_position import (
    COMPONENTS,
    METADATA_KEY,
    PositionAwareRetriever,
    SelectAndPlace,
)
from llama_index.postprocessor.rag_position._nodes import node_passage
from pydantic import ValidationError

from rag_position._integration import RECORD_KEYS, record_keys
from rag_position.strategies import STRATEGIES, PositionProfile, select_and_place
from rag_position.testing.scripted import OnePassageScorer

QUESTION = "Who wrote Hamlet?"
GOLD = DOCS[1][1]  # Hamlet
N_TOKENS = 4
# The posterior of each text (Paris, Hamlet, Everest, Python): a SpanScore.sum of
# ln(weight) makes the softmax of the sums exactly these weights (they sum to 1).
WEIGHTS = [0.10, 0.70, 0.05, 0.15]
SUMS = {text: math.log(w) for (_, text), w in zip(DOCS, WEIGHTS, strict=True)}
MEANS = [math.log(w) / N_TOKENS for w in WEIGHTS]  # the record's score: the mean
RANKED = [1, 3, 0, 2]  # Hamlet, Python, Paris, Everest (most likely first)
# mass=0.9: 0.70 + 0.15 = 0.85 < 0.9 <= 0.95 = 0.70 + 0.15 + 0.10, so three are kept.
KEPT = [1, 3, 0]
DROPPED = [2]
LAST = [0, 3, 1]  # the most likely last, the others before it by falling score
EXPECTED_RECORD_KEYS = {*RECORD_KEYS, "likelihood_rank", "posterior", "dropped"}


class AloneScorer(OnePassageScorer):
    """Each prompt holds ONE passage; its total is ``SUMS[text]`` over ``N_TOKENS`` tokens."""

    def __init__(self) -> None:
        super().__init__(QUESTION, SUMS, N_TOKENS)


def check_record(out: Sequence[NodeWithScore], nodes: list[NodeWithScore]) -> list[int]:
    """The one schema, each kept input once, new wrappers around copies; returns the order."""
    order = [r["original_rank"] for r in _records(out)]
    assert len(set(order)) == len(order) and all(0 <= i < len(nodes) for i in order)
    assert set(record_keys("select_and_place")) == {
        "likelihood_rank",
        "posterior",
        "dropped",
    }
    dropped = sorted(set(range(len(nodes))) - set(order))
    for rank, (n, i) in enumerate(zip(out, order, strict=True)):
        record = n.node.metadata[METADATA_KEY]
        assert set(record) == EXPECTED_RECORD_KEYS
        assert record["strategy"] == "select_and_place" and record["rank"] == rank
        assert sorted(record["dropped"]) == dropped
        assert n is not nodes[i] and n.node is not nodes[i].node
        assert n.node.node_id == nodes[i].node.node_id and _text(n) == _text(nodes[i])
        meta = {k: v for k, v in n.node.metadata.items() if k != METADATA_KEY}
        assert meta == nodes[i].node.metadata
        assert METADATA_KEY in n.node.excluded_llm_metadata_keys  # never in a prompt
    return order


def postprocess(nodes: list[NodeWithScore], **options: Any) -> list[NodeWithScore]:
    return SelectAndPlace(scorer=AloneScorer(), **options).postprocess_nodes(
        nodes, query_str=QUESTION
    )


def core_result(nodes: list[NodeWithScore], scorer: Any = None, **options: Any) -> Any:
    passages = [node_passage(n, "title") for n in nodes]
    return select_and_place(QUESTION, passages, scorer or AloneScorer(), **options)


# ---------------------------------------------------------------------- what is kept
def test_the_default_mass_keeps_three_and_places_the_likeliest_last() -> None:
    nodes = make_nodes()
    before = _snapshot(nodes)
    scorer = AloneScorer()
    out = SelectAndPlace(scorer=scorer).postprocess_nodes(nodes, query_str=QUESTION)
    assert check_record(out, nodes) == LAST
    assert GOLD in _text(out[-1])
    assert [r["dropped"] for r in _records(out)] == [DROPPED] * 3
    assert [n.score for n in out] == [nodes[i].score for i in LAST]  # the retriever's kept
    assert len(scorer.calls) == 1 and len(scorer.calls[0]) == 4  # N one-node prompts, batched
    assert all(p.count("Document [") == 1 for p in scorer.calls[0])
    assert _snapshot(nodes) == before  # inputs untouched


def test_the_record_of_each_kept_node() -> None:
    nodes = make_nodes()
    out = postprocess(nodes)
    core = core_result(nodes)
    for r in _records(out):
        i = r["original_rank"]
        assert r["score"] == pytest.approx(MEANS[i]) == core.scores[i]  # the MEAN, not the sum
        assert r["score"] != pytest.approx(math.log(WEIGHTS[i]))
        assert r["likelihood_rank"] == RANKED.index(i)
        assert (
            r["posterior"] == pytest.approx(WEIGHTS[i])
            and r["posterior"] == (core.details["posterior"][i])
        )
        assert r["dropped"] == DROPPED == core.details["dropped"]
    assert [r["likelihood_rank"] for r in _records(out)] == [2, 1, 0]
    kept_mass = sum(r["posterior"] for r in _records(out))
    assert kept_mass == pytest.approx(0.95) and kept_mass <= 1.0


@pytest.mark.parametrize(
    ("options", "order", "dropped"),
    [
        ({}, LAST, DROPPED),
        ({"top_n": 1}, [1], [3, 0, 2]),
        ({"top_n": 2}, [3, 1], [0, 2]),  # the smaller of mass's 3 and top_n
        ({"mass": 0.5}, [1], [3, 0, 2]),  # 0.70 alone holds it
        ({"mass": 0.85}, [3, 1], [0, 2]),  # exactly the top two's share
        ({"mass": None}, [2, 0, 3, 1], []),  # all, by score, the best last
        ({"mass": 1.0}, [2, 0, 3, 1], []),
        ({"mass": None, "top_n": 3}, [0, 3, 1], [2]),
        ({"placement": "first"}, KEPT, DROPPED),  # the best first, then by falling score
        ({"mass": None, "placement": "first"}, RANKED, []),
        # three kept; this profile reads the middle best, then the end, then the start
        ({"placement": "profile", "profile": [0.2, 0.9, 0.5]}, [0, 1, 3], DROPPED),
    ],
)
def test_what_is_kept_dropped_and_where(
    options: dict[str, Any], order: list[int], dropped: list[int]
) -> None:
    nodes = make_nodes()
    out = postprocess(nodes, **options)
    assert check_record(out, nodes) == order
    assert all(r["dropped"] == dropped for r in _records(out))
    assert [_text(n) for n in out] == [_text(nodes[i]) for i in order]


def test_top_n_2_keeps_two_nodes() -> None:
    nodes = make_nodes()
    out = postprocess(nodes, top_n=2)
    assert len(out) == 2 and GOLD in _text(out[-1])
    assert [n.node.node_id for n in out] == ["node-3", "node-1"]


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
        {"placement": "profile", "profile": [0.1, 0.4, 0.2, 0.3], "mass": None},
        {"template": "{search_results}\nQ: {question}\nA:"},
    ],
)
def test_the_result_is_the_core_functions(options: dict[str, Any]) -> None:
    nodes = make_nodes()
    out = postprocess(nodes, **options)
    core = core_result(nodes, **options)
    assert check_record(out, nodes) == core.order
    assert [_text(n) for n in out] == [p.text for p in core.passages]
    assert [r["score"] for r in _records(out)] == [core.scores[i] for i in core.order]
    assert [r["posterior"] for r in _records(out)] == [
        core.details["posterior"][i] for i in core.order
    ]
    assert [r["likelihood_rank"] for r in _records(out)] == [
        core.details["ranked"].index(i) for i in core.order
    ]
    assert all(r["dropped"] == core.details["dropped"] for r in _records(out))
    assert sum(r["posterior"] for r in _records(out)) <= 1.0 + 1e-12


def test_the_profile_component_places_down_the_profile() -> None:
    nodes = make_nodes()
    profile = PositionProfile([0.1, 0.9, 0.2])  # three kept: the middle reads best
    out = postprocess(nodes, placement="profile", profile=profile)
    assert GOLD in _text(out[1]) and _records(out)[1]["likelihood_rank"] == 0


def test_replace_score_and_metadata_key_none() -> None:
    nodes = make_nodes()
    out = postprocess(nodes, replace_score=True)
    assert [n.score for n in out] == [r["score"] for r in _records(out)]
    assert [n.score for n in out] == pytest.approx([MEANS[i] for i in LAST])
    own = postprocess(nodes, metadata_key=None)
    assert [id(n) for n in own] == [id(nodes[i]) for i in LAST]  # the caller's objects
    assert all(METADATA_KEY not in n.node.metadata for n in own)


def test_fewer_than_two_nodes_are_not_scored_and_the_query_is_needed() -> None:
    scorer = AloneScorer()
    reorder = SelectAndPlace(scorer=scorer)
    assert reorder.postprocess_nodes([], query_str=QUESTION) == []
    one = reorder.postprocess_nodes(make_nodes(scores=[0.3]), query_str=QUESTION)
    assert _records(one) == [
        {"strategy": "select_and_place", "score": None, "rank": 0, "original_rank": 0,
         "likelihood_rank": 0, "posterior": 1.0, "dropped": []}
    ]  # fmt: skip
    assert scorer.calls == []
    with pytest.raises(ValueError, match="query"):
        reorder.postprocess_nodes(make_nodes())


def test_async_equals_sync() -> None:
    nodes = make_nodes()
    for options in ({}, {"top_n": 1}, {"mass": None, "placement": "first"}):
        reorder = SelectAndPlace(scorer=AloneScorer(), **options)
        sync = reorder.postprocess_nodes(nodes, query_str=QUESTION)
        asyn = asyncio.run(reorder.apostprocess_nodes(nodes, query_str=QUESTION))
        assert [(n.node.node_id, n.node.metadata, n.score) for n in sync] == [
            (n.node.node_id, n.node.metadata, n.score) for n in asyn
        ]


# ---------------------------------------------------------------------- options
def test_the_defaults_are_the_core_functions() -> None:
    fields = SelectAndPlace.model_fields
    assert fields["mass"].default == 0.9 and fields["top_n"].default is None
    assert fields["placement"].default == "last" and fields["profile"].default is None
    assert fields["replace_score"].default is False
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
def test_bad_options_are_refused_at_construction(options: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        SelectAndPlace(scorer=AloneScorer(), **options)


def test_bad_placement_names_and_models_are_refused_at_construction() -> None:
    with pytest.raises(TypeError, match="rest"):
        SelectAndPlace(scorer=AloneScorer(), rest="scores")  # passage_likelihood's, not ours
    with pytest.raises(ValueError, match="profile"):
        SelectAndPlace(scorer=AloneScorer(), placement="profile")
    with pytest.raises(ValueError, match="profile"):
        SelectAndPlace(scorer=AloneScorer(), profile=[0.1, 0.2])  # placement="last"
    with pytest.raises(ValueError, match="scorer"):
        SelectAndPlace()
    with pytest.raises(TypeError, match="score"):
        SelectAndPlace(scorer=object())


# ---------------------------------------------------------------------- the retriever
class ListRetriever(BaseRetriever):
    def __init__(self, nodes: list[NodeWithScore]) -> None:
        self.nodes = nodes
        super().__init__()

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return list(self.nodes)


def test_the_position_aware_retriever_keeps_the_subset() -> None:
    assert COMPONENTS["select_and_place"] is SelectAndPlace
    assert COMPONENTS["select_and_place_profile"] is SelectAndPlace
    nodes = make_nodes()
    before = _snapshot(nodes)
    aware = PositionAwareRetriever(ListRetriever(nodes), "select_and_place", scorer=AloneScorer())
    assert isinstance(aware.postprocessor, SelectAndPlace)
    out = aware.retrieve(QUESTION)
    assert check_record(out, nodes) == LAST and GOLD in _text(out[-1])
    aware = PositionAwareRetriever(
        ListRetriever(nodes), "select_and_place", scorer=AloneScorer(), top_n=2
    )
    out = asyncio.run(aware.aretrieve(QUESTION))
    assert check_record(out, nodes) == [3, 1] and _records(out)[0]["dropped"] == [0, 2]
    aware = PositionAwareRetriever(
        ListRetriever(nodes),
        "select_and_place_profile",
        scorer=AloneScorer(),
        profile=[0.2, 0.9, 0.5],
    )
    post = aware.postprocessor
    assert isinstance(post, SelectAndPlace) and post.placement == "profile"
    out = aware.retrieve(QUESTION)
    assert check_record(out, nodes) == [0, 1, 3] and GOLD in _text(out[1])
    assert _snapshot(nodes) == before


# ---------------------------------------------------------------------- the embedded model
@pytest.mark.slow
def test_on_the_embedded_model_it_equals_the_core_and_keeps_the_gold_last(li_model: Any) -> None:
    nodes = [
        NodeWithScore(node=TextNode(text=text, id_=f"n{i}", metadata={"title": title}), score=0.5)
        for i, (title, text) in enumerate(DOCS)
    ]  # Paris, Hamlet, Everest, Python
    out = SelectAndPlace(scorer=li_model).postprocess_nodes(nodes, query_str=QUESTION)
    core = core_result(nodes, li_model)
    assert check_record(out, nodes) == core.order
    assert [r["score"] for r in _records(out)] == pytest.approx(
        [core.scores[i] for i in core.order]
    )
    assert [r["posterior"] for r in _records(out)] == pytest.approx(
        [core.details["posterior"][i] for i in core.order]
    )
    assert _records(out)[0]["dropped"] == core.details["dropped"]
    assert core.cost.lm_calls == 4
    assert _text(out[-1]) == GOLD and _records(out)[-1]["likelihood_rank"] == 0
    assert 1 <= len(out) < len(nodes)  # a sure ranking: something is dropped
    assert sum(r["posterior"] for r in _records(out)) <= 1 + 1e-9


# ---------------------------------------------------------------------- no shared lists
def test_a_single_nodes_record_does_not_alias_the_registry_default() -> None:
    default = record_keys("select_and_place")["dropped"]
    out = SelectAndPlace(scorer=AloneScorer()).postprocess_nodes(
        make_nodes(scores=[0.3]), query_str=QUESTION
    )
    assert out[0].node.metadata[METADATA_KEY]["dropped"] is not default


def test_each_kept_nodes_dropped_list_is_its_own() -> None:
    out = SelectAndPlace(scorer=AloneScorer()).postprocess_nodes(make_nodes(), query_str=QUESTION)
    lists = [n.node.metadata[METADATA_KEY]["dropped"] for n in out]
    assert len(lists) > 1 and len({id(x) for x in lists}) == len(lists)
