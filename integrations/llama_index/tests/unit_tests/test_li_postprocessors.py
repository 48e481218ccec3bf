"""What LlamaIndex alone has of the node postprocessors (the shared behaviour: both frameworks
in ``tests/test_components_*.py``): ``NodeWithScore.score``, ``replace_score``, the query."""

from __future__ import annotations

import asyncio
import copy
import math
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from li_testkit import (
    DOCS,
    GoldAtEdgesScorer,
    ListRetriever,
    make_nodes,
    node_ids,
    node_texts,
)
from llama_index.core.postprocessor import LongContextReorder
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode
from llama_index.postprocessor.rag_position import (
    METADATA_KEY,
    ConvexScoreReorder,
    EdgeReorder,
    LikelihoodReorder,
    PassageLikelihoodReorder,
    PositionAwareRetriever,
    ProfileReorder,
    SelectAndPlace,
)
from llama_index.postprocessor.rag_position._nodes import node_passage

from rag_position.strategies import PositionProfile
from rag_position.testing.scripted import OnePassageScorer
from rag_position.testing.tuned import example_file

QUESTION = "Who wrote Hamlet?"
PROFILE = [0.2, 0.1, 0.3, 0.4]
# The question's likelihood after each text alone: Hamlet best, Python next.
LIKELIHOODS = [-2.0, -0.5, -3.0, -1.0]


def scorer() -> OnePassageScorer:
    return OnePassageScorer(QUESTION, {t: v for (_, t), v in zip(DOCS, LIKELIHOODS, strict=True)})


class Untouchable:
    """A scorer that must not be called."""

    def score_spans(self, prompts: Sequence[str], spans: Sequence[Any]) -> list[Any]:
        raise AssertionError("the scorer was called with a malformed query")


def snapshot(nodes: list[NodeWithScore]) -> list[Any]:
    return [
        (id(n), id(n.node), n.score, n.node.model_dump(), copy.deepcopy(n.node.metadata))
        for n in nodes
    ]


# ---------------------------------------------------------------------------- retriever scores
def test_profile_reorder_uses_retriever_scores_then_order() -> None:
    out = ProfileReorder(profile=PROFILE).postprocess_nodes(make_nodes([0.1, 0.9, 0.5, 0.3]))
    # ranking of positions: 3, 2, 0, 1; relevance: node-1, node-2, node-3, node-0
    assert node_ids(out) == ["node-3", "node-0", "node-2", "node-1"]
    assert {o.node.metadata[METADATA_KEY]["relevance"] for o in out} == {"passage_scores"}
    by_order = ProfileReorder(profile=PROFILE).postprocess_nodes(make_nodes([None, 0.9, 0.5, 0.3]))
    assert node_ids(by_order) == ["node-2", "node-3", "node-1", "node-0"]
    assert by_order[0].node.metadata[METADATA_KEY]["score"] is None


def test_edge_reorder_haystack_puts_the_best_first_and_the_second_last() -> None:
    for n in range(2, 8):
        scores = [random.Random(n).random() for _ in range(n)]
        ranked = sorted(range(n), key=lambda i: -scores[i])
        out = EdgeReorder(mode="haystack").postprocess_nodes(make_nodes(scores))
        assert out[0].node.node_id == f"node-{ranked[0]}"
        assert out[-1].node.node_id == f"node-{ranked[1]}"
    # use_scores=False trusts the given order
    nodes = make_nodes([0.1, 0.2, 0.3, 0.4])
    out = EdgeReorder(mode="haystack", use_scores=False).postprocess_nodes(nodes)
    assert out[0].node.node_id == "node-0" and out[-1].node.node_id == "node-1"


EDGE_CASES: list[list[float | None]] = [
    [],
    [0.5],
    [0.1, 0.2],
    [0.3, 0.1, 0.2],
    [0.5, 0.5, 0.5, 0.5],  # ties: LlamaIndex keeps the LATER as more relevant
    [None, 0.2, None, -0.1, 0.4],  # None counts as 0: above negatives, below positives
    [-1.0, None, -2.0, 0.0, 0.0, 1.0],
    [None, None, None],
    [-math.inf, 0.5, math.inf, None],  # infinite scores are numbers
]


def test_edge_reorder_llamaindex_mode_is_long_context_reorder() -> None:
    rng = random.Random(7)
    drawn = [
        [rng.choice([None, round(rng.uniform(-1, 1), 1)]) for _ in range(rng.randrange(0, 10))]
        for _ in range(200)
    ]
    for scores in EDGE_CASES + drawn:
        nodes = make_nodes(scores)
        expected = LongContextReorder().postprocess_nodes(list(nodes))
        same = EdgeReorder(mode="llamaindex", metadata_key=None).postprocess_nodes(nodes)
        assert [id(x) for x in same] == [id(x) for x in expected], scores  # the same objects
        annotated = EdgeReorder(mode="llamaindex").postprocess_nodes(nodes)
        assert node_ids(annotated) == node_ids(expected), scores
        assert [x.score for x in annotated] == [x.score for x in expected], scores


def test_infinite_node_scores_are_numbers() -> None:
    nodes = make_nodes([-math.inf, 0.5, math.inf, None])
    assert node_ids(EdgeReorder(mode="haystack").postprocess_nodes(nodes))[0] == "node-2"
    with_none = ProfileReorder(profile=PROFILE).postprocess_nodes(nodes)
    assert {o.node.metadata[METADATA_KEY]["relevance"] for o in with_none} == {"order"}
    ranked = ProfileReorder(profile=PROFILE).postprocess_nodes(nodes[:3])
    assert ranked[-1].node.node_id == "node-2"  # the best read position: the +inf node


# ---------------------------------------------------------------------------- NaN retriever scores
NAN_READERS: dict[str, Any] = {  # each reads NodeWithScore.score
    "profile": lambda: ProfileReorder(profile=PROFILE),
    "edge": lambda: EdgeReorder(),
    "edge_llamaindex": lambda: EdgeReorder(mode="llamaindex"),
    "edge_haystack": lambda: EdgeReorder(mode="haystack", top_k=2),
    "edge_llamaindex_no_use_scores": lambda: EdgeReorder(mode="llamaindex", use_scores=False),
}


@pytest.mark.parametrize("name", sorted(NAN_READERS))
def test_a_nan_node_score_is_refused_naming_the_node(name: str) -> None:
    """Issue 30: ProfileReorder returned the input order, EdgeReorder sorted on the NaN."""
    nodes = make_nodes([0.9, 0.5, math.nan, None])
    before = snapshot(nodes)
    reorder = NAN_READERS[name]()
    message = r"^nodes\[2\]\.score is NaN: give every node a number; None for a missing score"
    with pytest.raises(ValueError, match=message):
        reorder.postprocess_nodes(nodes, query_str=QUESTION)
    with pytest.raises(ValueError, match=message):
        asyncio.run(reorder.apostprocess_nodes(nodes, query_str=QUESTION))
    aware = PositionAwareRetriever(ListRetriever(nodes), reorder)  # the retriever refuses it too
    with pytest.raises(ValueError, match=message[1:]):
        aware.retrieve(QUESTION)
    with pytest.raises(ValueError, match=message[1:]):
        asyncio.run(aware.aretrieve(QUESTION))
    assert snapshot(nodes) == before
    one = reorder.postprocess_nodes(nodes[2:3])  # a single node: returned, its score unread
    assert node_ids(one) == ["node-2"] and one[0].node.metadata[METADATA_KEY]["score"] is None


def test_a_nan_node_score_that_is_not_read_changes_nothing() -> None:
    nodes = make_nodes([0.9, math.nan, 0.5, 0.1])
    plain = make_nodes([0.9, 0.0, 0.5, 0.1])
    for node, same, value in zip(nodes, plain, [0.2, 0.9, 0.4, 0.3], strict=True):
        node.node.metadata["relevance"] = same.node.metadata["relevance"] = value
    texts = node_texts(nodes)
    for build in (
        lambda: EdgeReorder(use_scores=False),  # the given order
        lambda: EdgeReorder(mode="haystack", score_key="relevance"),
        lambda: ProfileReorder(profile=PROFILE, score_key="relevance"),
        lambda: ProfileReorder(profile=PROFILE, scorer=GoldAtEdgesScorer(texts, texts[2])),
    ):
        assert node_ids(build().postprocess_nodes(nodes, query_str=QUESTION)) == node_ids(
            build().postprocess_nodes(plain, query_str=QUESTION)
        )
    unread = PositionAwareRetriever(ListRetriever(nodes[:3]), "edge", use_scores=False)
    assert node_ids(unread.retrieve(QUESTION)) == ["node-0", "node-2", "node-1"]


# ---------------------------------------------------------------------------- replace_score
@pytest.mark.parametrize(
    ("cls", "order"),
    # passage likelihood: the likeliest first, the rest kept; select-and-place (posteriors
    # .52 .32 .12 .04): mass 0.9 keeps three, the likeliest last
    [(PassageLikelihoodReorder, [1, 0, 2, 3]), (SelectAndPlace, [0, 3, 1])],
)
def test_replace_score_puts_the_likelihood_on_the_node(cls: type, order: list[int]) -> None:
    nodes = make_nodes()
    scores = [n.score for n in nodes]
    out = cls(scorer=scorer(), replace_score=True).postprocess_nodes(nodes, query_str=QUESTION)
    assert node_ids(out) == [f"node-{i}" for i in order]
    assert [n.score for n in out] == [n.node.metadata[METADATA_KEY]["score"] for n in out]
    assert [n.score for n in out] == [LIKELIHOODS[i] for i in order]
    own = cls(scorer=scorer(), replace_score=True, metadata_key=None).postprocess_nodes(
        nodes, query_str=QUESTION
    )
    assert all(n.node is nodes[i].node for n, i in zip(own, order, strict=True))  # the caller's
    assert [n.score for n in own] == [LIKELIHOODS[i] for i in order]  # ... rescored
    assert all(METADATA_KEY not in n.node.metadata for n in own)
    assert [n.score for n in nodes] == scores  # in new wrappers


def test_a_tuned_file_with_replace_score(tmp_path: Path) -> None:
    path = example_file(tmp_path, "select_and_place", {"top_n": 2})
    aware = PositionAwareRetriever(
        ListRetriever(make_nodes()), tuned=path, scorer=scorer(), metadata_key="pos",
        replace_score=True,
    )  # fmt: skip
    out = aware.retrieve(QUESTION)
    assert node_ids(out) == ["node-3", "node-1"]
    assert [n.score for n in out] == [n.node.metadata["pos"]["score"] for n in out]


# ---------------------------------------------------------------------------- the query
POSTPROCESSORS: dict[str, Callable[[], BaseNodePostprocessor]] = {
    "ProfileReorder": lambda: ProfileReorder(profile=PROFILE),
    "ProfileReorder+scorer": lambda: ProfileReorder(profile=PROFILE, scorer=Untouchable()),
    "LikelihoodReorder": lambda: LikelihoodReorder(scorer=Untouchable()),
    "ConvexScoreReorder": lambda: ConvexScoreReorder(scorer=Untouchable()),
    "PassageLikelihoodReorder": lambda: PassageLikelihoodReorder(scorer=Untouchable()),
    "SelectAndPlace": lambda: SelectAndPlace(scorer=Untouchable()),
    "EdgeReorder": lambda: EdgeReorder(),
}
SCORING = [
    "ConvexScoreReorder",
    "PassageLikelihoodReorder",
    "ProfileReorder+scorer",
    "SelectAndPlace",
]


@pytest.mark.parametrize("name", sorted(POSTPROCESSORS))
def test_a_malformed_or_missing_query(name: str) -> None:
    """The query where the bundle goes: the message says to use ``query_str=`` (a query
    that is not a str, in ``QueryBundle.query_str``: ``tests/test_components_bad_input.py``)."""
    postprocessor = POSTPROCESSORS[name]()
    for bundle in ("Who wrote Hamlet?", 42):
        with pytest.raises(TypeError, match=r"query_bundle must be a QueryBundle.*query_str="):
            postprocessor.postprocess_nodes(make_nodes(), bundle)
    who = type(postprocessor).__name__
    with pytest.raises(TypeError, match=rf"{who}: query_bundle\.query_str .* int 7"):
        postprocessor.postprocess_nodes(make_nodes(), query_str=7)  # type: ignore[arg-type]
    if name in SCORING:  # replace_score off by default; no query, no scores
        assert type(postprocessor).model_fields["replace_score"].default is False
        with pytest.raises(ValueError, match="needs the query"):
            postprocessor.postprocess_nodes(make_nodes())


# ---------------------------------------------------------------------------- the rest
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
    texts = node_texts(make_nodes())
    assert LikelihoodReorder(scorer=GoldAtEdgesScorer(texts, texts[0])).to_dict()["scorer"] == (
        "<GoldAtEdgesScorer>"
    )
    for relevance in ("passage_likelihood", "convex_score"):
        profile = ProfileReorder(profile=[0.1, 0.9], scorer="embedded", relevance=relevance)
        assert profile.to_dict()["relevance"] == relevance
    data = PassageLikelihoodReorder(
        scorer="embedded", scorer_kwargs={"dtype": "float32"}, placement="profile",
        profile=PositionProfile((0.1, 0.9, 0.2)),
    ).to_dict()  # fmt: skip
    assert data["class_name"] == "RagPositionPassageLikelihoodReorder"
    assert data["scorer"] == "embedded" and data["placement"] == "profile"
    assert isinstance(data["profile"], dict)  # the profile as JSON data, and read back:
    back = ProfileReorder.from_json(ProfileReorder(profile=PositionProfile((0.1, 0.9))).to_json())
    assert PassageLikelihoodReorder.from_dict(data).to_dict()["profile"] == data["profile"]
    assert back.to_dict()["profile"]["values"] == [0.1, 0.9]
