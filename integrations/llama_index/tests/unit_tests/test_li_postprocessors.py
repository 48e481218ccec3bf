"""What LlamaIndex alone has of the node postprocessors (their behaviour is tested for
both frameworks in ``tests/test_components_orderings.py``): the reading of
``NodeWithScore.score`` (retriever scores, NaN, infinities, ``use_scores``, parity with
LlamaIndex's ``LongContextReorder``), ``replace_score``, the missing query, nodes
without a title, and serialisation."""

from __future__ import annotations

import asyncio
import copy
import math
import random
from typing import Any

import pytest
from li_testkit import GoldAtEdgesScorer, GoldFirstScorer, make_nodes
from llama_index.core.postprocessor import LongContextReorder
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode
from llama_index.postprocessor.rag_position import (
    METADATA_KEY,
    ConvexScoreReorder,
    EdgeReorder,
    LikelihoodReorder,
    ProfileReorder,
)
from llama_index.postprocessor.rag_position._nodes import node_passage

QUESTION = "Who wrote Hamlet?"


def _texts(nodes: list[NodeWithScore]) -> list[str]:
    return [n.node.get_content(metadata_mode=MetadataMode.NONE) for n in nodes]


def _ids(nodes: list[NodeWithScore]) -> list[str]:
    return [n.node.node_id for n in nodes]


def _snapshot(nodes: list[NodeWithScore]) -> list[Any]:
    return [
        (id(n), id(n.node), n.score, n.node.model_dump(), copy.deepcopy(n.node.metadata))
        for n in nodes
    ]


# ---------------------------------------------------------------------------- retriever scores
def test_profile_reorder_uses_retriever_scores_then_order() -> None:
    nodes = make_nodes([0.1, 0.9, 0.5, 0.3])
    out = ProfileReorder(profile=[0.2, 0.1, 0.3, 0.4]).postprocess_nodes(nodes)
    # ranking of positions: 3, 2, 0, 1; relevance: node-1, node-2, node-3, node-0
    assert _ids(out) == ["node-3", "node-0", "node-2", "node-1"]
    assert {o.node.metadata[METADATA_KEY]["relevance"] for o in out} == {"passage_scores"}
    unscored = make_nodes([None, 0.9, 0.5, 0.3])
    by_order = ProfileReorder(profile=[0.2, 0.1, 0.3, 0.4]).postprocess_nodes(unscored)
    assert _ids(by_order) == ["node-2", "node-3", "node-1", "node-0"]
    assert by_order[0].node.metadata[METADATA_KEY]["score"] is None


def test_edge_reorder_haystack_puts_the_best_first_and_the_second_last() -> None:
    for n in range(2, 8):
        scores = [random.Random(n).random() for _ in range(n)]
        nodes = make_nodes(scores)
        ranked = sorted(range(n), key=lambda i: -scores[i])
        out = EdgeReorder(mode="haystack").postprocess_nodes(nodes)
        assert out[0].node.node_id == f"node-{ranked[0]}"
        assert out[-1].node.node_id == f"node-{ranked[1]}"
    # use_scores=False trusts the given order
    nodes = make_nodes([0.1, 0.2, 0.3, 0.4])
    out = EdgeReorder(mode="haystack", use_scores=False).postprocess_nodes(nodes)
    assert out[0].node.node_id == "node-0" and out[-1].node.node_id == "node-1"


# ---------------------------------------------------------------------------- LongContextReorder
EDGE_CASES: list[list[float | None]] = [
    [],
    [0.5],
    [0.1, 0.2],
    [0.3, 0.1, 0.2],
    [0.5, 0.5, 0.5, 0.5],  # ties: LlamaIndex keeps the LATER as more relevant
    [None, 0.2, None, -0.1, 0.4],  # None counts as 0: above negatives, below positives
    [-1.0, None, -2.0, 0.0, 0.0, 1.0],
    [None, None, None],
]


@pytest.mark.parametrize("scores", EDGE_CASES)
def test_edge_reorder_llamaindex_mode_is_long_context_reorder(scores: list[float | None]) -> None:
    nodes = make_nodes(scores)
    expected = LongContextReorder().postprocess_nodes(list(nodes))
    same = EdgeReorder(mode="llamaindex", metadata_key=None).postprocess_nodes(nodes)
    assert [id(x) for x in same] == [id(x) for x in expected]  # the very same objects
    annotated = EdgeReorder(mode="llamaindex").postprocess_nodes(nodes)
    assert _ids(annotated) == _ids(expected)
    assert [x.score for x in annotated] == [x.score for x in expected]


def test_edge_reorder_llamaindex_mode_matches_on_random_scores() -> None:
    rng = random.Random(7)
    for _ in range(200):
        n = rng.randrange(0, 10)
        scores = [rng.choice([None, round(rng.uniform(-1, 1), 1)]) for _ in range(n)]
        nodes = make_nodes(scores)
        expected = LongContextReorder().postprocess_nodes(list(nodes))
        got = EdgeReorder(mode="llamaindex", metadata_key=None).postprocess_nodes(nodes)
        assert [id(x) for x in got] == [id(x) for x in expected], scores


# ---------------------------------------------------------------------------- NaN retriever scores
NAN_READERS: dict[str, Any] = {  # each reads NodeWithScore.score
    "profile": lambda: ProfileReorder(profile=[0.2, 0.1, 0.3, 0.4]),
    "edge": lambda: EdgeReorder(),
    "edge_llamaindex": lambda: EdgeReorder(mode="llamaindex"),
    "edge_haystack": lambda: EdgeReorder(mode="haystack", top_k=2),
    "edge_llamaindex_no_use_scores": lambda: EdgeReorder(mode="llamaindex", use_scores=False),
}


@pytest.mark.parametrize("name", sorted(NAN_READERS))
def test_a_nan_node_score_is_refused_naming_the_node(name: str) -> None:
    """Issue 30: ProfileReorder returned the input order, EdgeReorder sorted on the NaN."""
    nodes = make_nodes([0.9, 0.5, math.nan, None])
    before = _snapshot(nodes)
    reorder = NAN_READERS[name]()
    message = r"^nodes\[2\]\.score is NaN: give every node a number; None for a missing score"
    with pytest.raises(ValueError, match=message):
        reorder.postprocess_nodes(nodes, query_str=QUESTION)
    with pytest.raises(ValueError, match=message):
        asyncio.run(reorder.apostprocess_nodes(nodes, query_str=QUESTION))
    assert _snapshot(nodes) == before
    one = reorder.postprocess_nodes(nodes[2:3])  # a single node: returned, its score unread
    assert _ids(one) == ["node-2"] and one[0].node.metadata[METADATA_KEY]["score"] is None


def test_a_nan_node_score_that_is_not_read_changes_nothing() -> None:
    nodes = make_nodes([0.9, math.nan, 0.5, 0.1])
    for node, value in zip(nodes, [0.2, 0.9, 0.4, 0.3], strict=True):
        node.node.metadata["relevance"] = value
    texts = _texts(nodes)
    plain = make_nodes([0.9, 0.0, 0.5, 0.1])
    for node in plain:
        node.node.metadata["relevance"] = nodes[int(node.node.node_id[-1])].node.metadata[
            "relevance"
        ]
    for build in (
        lambda: EdgeReorder(use_scores=False),  # the given order
        lambda: EdgeReorder(mode="haystack", score_key="relevance"),
        lambda: ProfileReorder(profile=[0.2, 0.1, 0.3, 0.4], score_key="relevance"),
        lambda: ProfileReorder(
            profile=[0.2, 0.1, 0.3, 0.4], scorer=GoldAtEdgesScorer(texts, texts[2])
        ),
    ):
        assert _ids(build().postprocess_nodes(nodes, query_str=QUESTION)) == _ids(
            build().postprocess_nodes(plain, query_str=QUESTION)
        )


def test_infinite_node_scores_are_numbers() -> None:
    nodes = make_nodes([-math.inf, 0.5, math.inf, None])
    assert _ids(EdgeReorder(mode="haystack").postprocess_nodes(nodes))[0] == "node-2"
    llama = EdgeReorder(mode="llamaindex", metadata_key=None).postprocess_nodes(nodes)
    expected = LongContextReorder().postprocess_nodes(list(nodes))
    assert [id(x) for x in llama] == [id(x) for x in expected]
    with_none = ProfileReorder(profile=[0.2, 0.1, 0.3, 0.4]).postprocess_nodes(nodes)
    assert {o.node.metadata[METADATA_KEY]["relevance"] for o in with_none} == {"order"}
    ranked = ProfileReorder(profile=[0.2, 0.1, 0.3, 0.4]).postprocess_nodes(nodes[:3])
    assert ranked[-1].node.node_id == "node-2"  # the best read position: the +inf node


# ---------------------------------------------------------------------------- LlamaIndex alone
def test_replace_score_is_opt_in() -> None:
    nodes = make_nodes()
    texts = _texts(nodes)
    out = ConvexScoreReorder(
        scorer=GoldAtEdgesScorer(texts, texts[2]), replace_score=True
    ).postprocess_nodes(nodes, query_str=QUESTION)
    for x in out:
        assert x.score == x.node.metadata[METADATA_KEY]["score"]
    bare = ConvexScoreReorder(
        scorer=GoldAtEdgesScorer(texts, texts[2]), replace_score=True, metadata_key=None
    ).postprocess_nodes(nodes, query_str=QUESTION)
    originals = {n.node.node_id: n for n in nodes}
    for x in bare:  # new wrappers, the caller's nodes inside, the caller's wrappers untouched
        assert x.node is originals[x.node.node_id].node
        assert x is not originals[x.node.node_id]
    assert [n.score for n in nodes] == [0.9 - 0.1 * i for i in range(4)]


def test_a_scoring_postprocessor_needs_the_query() -> None:
    nodes = make_nodes()
    texts = _texts(nodes)
    reorder = ConvexScoreReorder(scorer=GoldAtEdgesScorer(texts, texts[0]))
    with pytest.raises(ValueError, match="needs the query"):
        reorder.postprocess_nodes(nodes)
    with pytest.raises(ValueError, match="needs the query"):
        reorder.postprocess_nodes(nodes, query_bundle=QueryBundle("   "))
    profile = ProfileReorder(
        profile=[0.1, 0.2, 0.3, 0.9], scorer=GoldAtEdgesScorer(texts, texts[2])
    )
    with pytest.raises(ValueError, match="query"):
        profile.postprocess_nodes(nodes)


def test_node_without_a_title_and_non_text_metadata() -> None:
    node = NodeWithScore(node=TextNode(text="Just text.", metadata={"page": 3}), score=None)
    other = NodeWithScore(node=TextNode(text="More text.", metadata={"title": 7}), score=0.2)
    assert node_passage(node, "title").title == ""
    assert node_passage(other, "title").title == ""  # a non-string title is not used
    assert node_passage(other, None).text == "More text."
    out = EdgeReorder(mode="haystack").postprocess_nodes([node, other])
    assert [x.node.get_content(MetadataMode.NONE) for x in out] == ["More text.", "Just text."]


def test_serialisation_keeps_spec_strings() -> None:
    data = ConvexScoreReorder(scorer="embedded", scorer_kwargs={"dtype": "float32"}).to_dict()
    assert data["scorer"] == "embedded" and data["class_name"] == "RagPositionConvexScoreReorder"
    assert ProfileReorder(profile=[0.1, 0.2]).to_dict()["profile"] == [0.1, 0.2]
    texts = _texts(make_nodes())
    assert LikelihoodReorder(scorer=GoldFirstScorer(texts, texts[0])).to_dict()["scorer"] == (
        "<GoldFirstScorer>"
    )
    for relevance in ("passage_likelihood", "convex_score"):
        profile = ProfileReorder(profile=[0.1, 0.9], scorer="embedded", relevance=relevance)
        assert profile.to_dict()["relevance"] == relevance
