"""PassageLikelihoodReorder: each node scored alone, the likeliest one placed; the core's result.

Scripted scorers pin the order, the record, ``replace_score`` and the options; one test
runs the embedded model (marked ``slow``) and checks the postprocessor equals the core
function on it.
"""

from __future__ import annotations

import asyncio
import inspect
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
    PassageLikelihoodReorder,
    PositionAwareRetriever,
)
from llama_index.postprocessor.rag_position._nodes import node_passage
from pydantic import ValidationError

from rag_position._integration import RECORD_KEYS, component_of, record_keys
from rag_position.strategies import STRATEGIES, PositionProfile, passage_likelihood
from rag_position.testing.scripted import OnePassageScorer

QUESTION = "Who wrote Hamlet?"
GOLD = DOCS[1][1]  # Hamlet
# The question's likelihood after each text alone: Hamlet best, Python next.
VALUES = {DOCS[0][1]: -2.0, DOCS[1][1]: -0.5, DOCS[2][1]: -3.0, DOCS[3][1]: -1.0}


class AloneScorer(OnePassageScorer):
    """Each prompt holds ONE passage; its total is ``VALUES`` of its text."""

    def __init__(self) -> None:
        super().__init__(QUESTION, VALUES)


def check_record(out: Sequence[NodeWithScore], nodes: list[NodeWithScore]) -> list[int]:
    """The one schema, every input once, new wrappers around copies; returns the order."""
    order = [r["original_rank"] for r in _records(out)]
    assert sorted(order) == list(range(len(nodes)))
    for rank, (n, i) in enumerate(zip(out, order, strict=True)):
        record = n.node.metadata[METADATA_KEY]
        assert (
            set(record)
            == {*RECORD_KEYS, *record_keys("passage_likelihood")}
            == {
                *RECORD_KEYS,
                "gold",
            }
        )
        assert record["strategy"] == "passage_likelihood" and record["rank"] == rank
        assert n is not nodes[i] and n.node is not nodes[i].node
        assert n.node.node_id == nodes[i].node.node_id
        assert METADATA_KEY in n.node.excluded_llm_metadata_keys  # never in a prompt
    return order


# ---------------------------------------------------------------------- order and record
def test_the_likeliest_node_alone_goes_first_and_the_rest_keep_their_order() -> None:
    nodes = make_nodes()
    before = _snapshot(nodes)
    scorer = AloneScorer()
    out = PassageLikelihoodReorder(scorer=scorer).postprocess_nodes(nodes, query_str=QUESTION)
    order = check_record(out, nodes)
    assert GOLD in _text(out[0]) and order == [1, 0, 2, 3]
    assert [r["gold"] for r in _records(out)] == [True, False, False, False]
    assert [r["score"] for r in _records(out)] == [-0.5, -2.0, -3.0, -1.0]
    assert [n.score for n in out] == [nodes[i].score for i in order]  # the retriever's kept
    assert len(scorer.calls) == 1 and len(scorer.calls[0]) == 4  # N one-node prompts, batched
    assert all(p.count("Document [") == 1 for p in scorer.calls[0])
    assert _snapshot(nodes) == before  # inputs untouched


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"rest": "scores"},
        {"placement": "last"},
        {"placement": "last", "rest": "scores"},
        {"placement": "profile", "profile": [0.1, 0.4, 0.2, 0.3]},
        {"placement": "profile", "profile": [0.1, 0.4, 0.2, 0.3], "rest": "keep"},
        {"template": "{search_results}\nQ: {question}\nA:"},
    ],
)
def test_the_order_and_scores_are_the_core_functions(options: dict[str, Any]) -> None:
    nodes = make_nodes()
    out = PassageLikelihoodReorder(scorer=AloneScorer(), **options).postprocess_nodes(
        nodes, query_str=QUESTION
    )
    passages = [node_passage(n, "title") for n in nodes]
    core = passage_likelihood(QUESTION, passages, AloneScorer(), **options)
    assert check_record(out, nodes) == core.order
    assert [r["score"] for r in _records(out)] == [core.scores[i] for i in core.order]
    assert [r["original_rank"] for r in _records(out) if r["gold"]] == [core.details["gold"]]


def test_replace_score_puts_the_likelihood_on_the_node() -> None:
    nodes = make_nodes()
    out = PassageLikelihoodReorder(scorer=AloneScorer(), replace_score=True).postprocess_nodes(
        nodes, query_str=QUESTION
    )
    assert [n.score for n in out] == [r["score"] for r in _records(out)]
    out = PassageLikelihoodReorder(
        scorer=AloneScorer(), replace_score=True, metadata_key=None
    ).postprocess_nodes(nodes, query_str=QUESTION)
    assert out[0].node is nodes[1].node and out[0].score == -0.5  # the caller's node, rescored
    assert METADATA_KEY not in out[0].node.metadata


def test_placement_last_profile_and_metadata_key_none() -> None:
    nodes = make_nodes()
    last = PassageLikelihoodReorder(scorer=AloneScorer(), placement="last")
    assert GOLD in _text(last.postprocess_nodes(nodes, query_str=QUESTION)[-1])
    profile = PositionProfile([0.1, 0.2, 0.9, 0.3])  # position 2 reads best
    placed = PassageLikelihoodReorder(scorer=AloneScorer(), placement="profile", profile=profile)
    out = placed.postprocess_nodes(nodes, query_str=QUESTION)
    assert GOLD in _text(out[2]) and _records(out)[2]["gold"] is True
    own = PassageLikelihoodReorder(scorer=AloneScorer(), metadata_key=None).postprocess_nodes(
        nodes, query_str=QUESTION
    )
    assert own[0] is nodes[1] and sorted(map(id, own)) == sorted(map(id, nodes))


def test_title_key() -> None:
    nodes = make_nodes()
    scorer = AloneScorer()
    PassageLikelihoodReorder(scorer=scorer).postprocess_nodes(nodes, query_str=QUESTION)
    assert "(Title: Hamlet)" in scorer.calls[0][1]
    scorer = AloneScorer()
    reorder = PassageLikelihoodReorder(scorer=scorer, title_key=None)
    reorder.postprocess_nodes(nodes, query_str=QUESTION)
    assert "Title: Hamlet" not in scorer.calls[0][1]


def test_fewer_than_two_nodes_are_not_scored_and_the_query_is_needed() -> None:
    scorer = AloneScorer()
    reorder = PassageLikelihoodReorder(scorer=scorer)
    assert reorder.postprocess_nodes([], query_str=QUESTION) == []
    one = reorder.postprocess_nodes(make_nodes(scores=[0.3]), query_str=QUESTION)
    assert _records(one) == [
        {"strategy": "passage_likelihood", "score": None, "rank": 0, "original_rank": 0,
         "gold": False}
    ]  # fmt: skip
    assert scorer.calls == []
    with pytest.raises(ValueError, match="query"):
        reorder.postprocess_nodes(make_nodes())


def test_async_equals_sync() -> None:
    nodes = make_nodes()
    reorder = PassageLikelihoodReorder(scorer=AloneScorer(), rest="scores")
    sync = reorder.postprocess_nodes(nodes, query_str=QUESTION)
    asyn = asyncio.run(reorder.apostprocess_nodes(nodes, query_str=QUESTION))
    assert [(n.node.node_id, n.node.metadata, n.score) for n in sync] == [
        (n.node.node_id, n.node.metadata, n.score) for n in asyn
    ]


# ---------------------------------------------------------------------- options
def test_options_are_the_core_functions_names_and_defaults() -> None:
    core = {
        p.name: p.default
        for p in inspect.signature(passage_likelihood).parameters.values()
        if p.default is not inspect.Parameter.empty
    }
    assert set(STRATEGIES["passage_likelihood"].option_model.model_fields) == set(core)
    fields = PassageLikelihoodReorder.model_fields
    assert {name: fields[name].default for name in core} == core
    for name in ("scorer", "scorer_kwargs", "metadata_key", "title_key", "replace_score"):
        assert name in fields
    assert fields["replace_score"].default is False


def test_bad_options_are_refused_at_construction() -> None:
    scorer = AloneScorer()
    with pytest.raises(ValueError, match="profile"):
        PassageLikelihoodReorder(scorer=scorer, placement="profile")
    with pytest.raises(ValueError, match="profile"):
        PassageLikelihoodReorder(scorer=scorer, profile=[0.1, 0.2])  # placement="first"
    with pytest.raises(TypeError, match="numbers"):
        PassageLikelihoodReorder(scorer=scorer, placement="profile", profile=["high", "low"])
    with pytest.raises(ValidationError):
        PassageLikelihoodReorder(scorer=scorer, placement="middle")
    with pytest.raises(ValidationError):
        PassageLikelihoodReorder(scorer=scorer, rest="shuffle")
    with pytest.raises(TypeError, match="n_rotations"):
        PassageLikelihoodReorder(scorer=scorer, n_rotations=3)  # ConvexScore's, not ours
    with pytest.raises(ValueError, match="scorer"):
        PassageLikelihoodReorder()
    with pytest.raises(TypeError, match="score"):
        PassageLikelihoodReorder(scorer=object())


def test_a_spec_string_loads_on_first_use_and_serialises() -> None:
    reorder = PassageLikelihoodReorder(
        scorer="embedded", scorer_kwargs={"dtype": "float32"}, placement="profile",
        profile=PositionProfile((0.1, 0.9, 0.2)),
    )  # fmt: skip
    assert reorder._scorer is not None and not reorder._scorer.loaded
    data = reorder.to_dict()
    assert data["class_name"] == "RagPositionPassageLikelihoodReorder"
    assert data["scorer"] == "embedded" and data["placement"] == "profile"
    assert isinstance(data["profile"], dict)  # the profile as JSON data


# ---------------------------------------------------------------------- the retriever
class ListRetriever(BaseRetriever):
    def __init__(self, nodes: list[NodeWithScore]) -> None:
        self.nodes = nodes
        super().__init__()

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return list(self.nodes)


def test_the_retriever_knows_both_names() -> None:
    assert COMPONENTS["passage_likelihood"] is PassageLikelihoodReorder
    assert COMPONENTS["passage_likelihood_profile"] is PassageLikelihoodReorder
    nodes = make_nodes()
    aware = PositionAwareRetriever(ListRetriever(nodes), "passage_likelihood", scorer=AloneScorer())
    out = aware.retrieve(QUESTION)
    assert GOLD in _text(out[0]) and _records(out)[0]["strategy"] == "passage_likelihood"
    aware = PositionAwareRetriever(
        ListRetriever(nodes),
        "passage_likelihood_profile",
        scorer=AloneScorer(),
        profile=[0.1, 0.2, 0.3, 0.9],  # the last position reads best
    )
    post = aware.postprocessor
    assert isinstance(post, PassageLikelihoodReorder) and post.placement == "profile"
    out = asyncio.run(aware.aretrieve(QUESTION))
    assert GOLD in _text(out[-1]) and _records(out)[-1]["gold"] is True


PROFILE_ROWS = [n for n, row in STRATEGIES.items() if row.fixed.get("placement") == "profile"]
RETRIEVABLE_PROFILE_ROWS = [n for n in PROFILE_ROWS if component_of(n) is not None]


@pytest.mark.parametrize("strategy", RETRIEVABLE_PROFILE_ROWS)
def test_a_profile_name_needs_a_profile_and_fixes_the_placement(strategy: str) -> None:
    """Every row placed by the profile that the retriever takes (from the table)."""
    base = ListRetriever(make_nodes())
    with pytest.raises(ValueError, match="profile="):
        PositionAwareRetriever(base, strategy, scorer=AloneScorer())
    with pytest.raises(TypeError, match="sets placement itself"):
        PositionAwareRetriever(
            base, strategy, scorer=AloneScorer(), profile=[0.1, 0.2], placement="first"
        )


# ---------------------------------------------------------------------- the embedded model
@pytest.mark.slow
def test_on_the_embedded_model_it_equals_the_core_and_finds_the_gold(li_model: Any) -> None:
    nodes = [
        NodeWithScore(node=TextNode(text=text, id_=f"n{i}", metadata={"title": title}), score=0.5)
        for i, (title, text) in enumerate(DOCS)
    ]  # Paris, Hamlet, Everest, Python
    out = PassageLikelihoodReorder(scorer=li_model).postprocess_nodes(nodes, query_str=QUESTION)
    core = passage_likelihood(QUESTION, [node_passage(n, "title") for n in nodes], li_model)
    assert check_record(out, nodes) == core.order
    assert [r["score"] for r in _records(out)] == pytest.approx(
        [core.scores[i] for i in core.order]
    )
    assert core.cost.lm_calls == 4
    assert _text(out[0]) == GOLD and _records(out)[0]["gold"] is True
