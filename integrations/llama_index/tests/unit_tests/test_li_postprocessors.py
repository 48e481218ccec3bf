"""The node postprocessors with scripted scorers: order, metadata convention, no mutation."""

from __future__ import annotations

import asyncio
import copy
import itertools
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

from rag_position.errors import ModelSpecError
from rag_position.strategies import PositionProfile, convex_score, likelihood_selection

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


def _all_reorderers(nodes: list[NodeWithScore]) -> list[Any]:
    texts = _texts(nodes)
    return [
        LikelihoodReorder(scorer=GoldFirstScorer(texts, texts[2]), n_orders=6),
        ConvexScoreReorder(scorer=GoldAtEdgesScorer(texts, texts[2])),
        ConvexScoreReorder(scorer=GoldAtEdgesScorer(texts, texts[2]), placement="last"),
        ProfileReorder(profile=[0.2, 0.1, 0.3, 0.4]),
        ProfileReorder(profile=[0.2, 0.1, 0.3, 0.4], scorer=GoldAtEdgesScorer(texts, texts[2])),
        EdgeReorder(),
        EdgeReorder(mode="llamaindex"),
        EdgeReorder(mode="langchain"),
    ]


# ---------------------------------------------------------------------------- the strategies
def test_likelihood_reorder_keeps_the_most_likely_order() -> None:
    nodes = make_nodes()
    texts = _texts(nodes)
    scorer = GoldFirstScorer(texts, texts[2])
    out = LikelihoodReorder(scorer=scorer, n_orders=24).postprocess_nodes(nodes, query_str=QUESTION)
    assert _texts(out)[0] == texts[2]  # all 24 orders scored; the best puts the gold first
    assert scorer.calls == 24
    core = likelihood_selection(
        QUESTION, [node_passage(n, "title") for n in nodes], scorer, n_orders=24
    )
    assert [o.node.metadata[METADATA_KEY]["original_rank"] for o in out] == core.order
    entry = out[0].node.metadata[METADATA_KEY]
    assert entry["strategy"] == "likelihood_selection"
    assert entry["score"] == entry["question_loglik"]  # the winning order's, on every node
    assert entry["question_loglik"] == 0.0  # the scripted likelihood with the gold first


def test_convex_score_reorder_puts_the_gold_candidate_first_or_last() -> None:
    nodes = make_nodes()
    texts = _texts(nodes)
    scorer = GoldAtEdgesScorer(texts, texts[2])
    first = ConvexScoreReorder(scorer=scorer).postprocess_nodes(nodes, query_str=QUESTION)
    assert _texts(first)[0] == texts[2]
    assert _texts(first)[1:] == [texts[0], texts[1], texts[3]]  # rest="keep"
    assert scorer.calls == 4  # N rotations for N nodes
    last = ConvexScoreReorder(scorer=scorer, placement="last").postprocess_nodes(
        nodes, query_str=QUESTION
    )
    assert _texts(last)[-1] == texts[2]
    entries = {o.node.node_id: o.node.metadata[METADATA_KEY] for o in first}
    assert entries["node-2"]["gold"] is True
    assert sum(e["gold"] for e in entries.values()) == 1
    core = convex_score(QUESTION, [node_passage(n, "title") for n in nodes], scorer)
    for i, node in enumerate(nodes):
        assert entries[node.node.node_id]["score"] == pytest.approx(core.scores[i])
        assert entries[node.node.node_id]["original_rank"] == i


def test_convex_score_reorder_with_a_profile() -> None:
    nodes = make_nodes()
    texts = _texts(nodes)
    reorder = ConvexScoreReorder(
        scorer=GoldAtEdgesScorer(texts, texts[2]), placement="profile", profile=[0, 0, 1, 0]
    )
    out = reorder.postprocess_nodes(nodes, query_str=QUESTION)
    assert _texts(out)[2] == texts[2]  # the profile's best slot is position 2
    with pytest.raises(ValueError, match="profile"):
        ConvexScoreReorder(scorer=GoldAtEdgesScorer(texts, texts[2]), placement="profile")
    with pytest.raises(ValueError, match="profile"):
        ConvexScoreReorder(scorer=GoldAtEdgesScorer(texts, texts[2]), profile=[1.0, 0.0])


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


def test_profile_reorder_with_a_scorer_ranks_by_passage_likelihood(tmp_path: Any) -> None:
    nodes = make_nodes([0.9, 0.8, 0.1, 0.5])
    texts = _texts(nodes)
    path = tmp_path / "profile.json"
    PositionProfile((0.1, 0.2, 0.3, 0.9), model_name="x", source="eval").save(path)
    scorer = GoldAtEdgesScorer(texts, texts[2])
    out = ProfileReorder(profile=str(path), scorer=scorer).postprocess_nodes(
        nodes, query_str=QUESTION
    )
    assert _texts(out)[-1] == texts[2]  # the likeliest node alone at the best (last) position
    assert {o.node.metadata[METADATA_KEY]["relevance"] for o in out} == {"passage_likelihood"}
    assert scorer.calls == 4 and all(p.count("Document [") == 1 for p in scorer.prompts)
    convex = ProfileReorder(
        profile=str(path), scorer=GoldAtEdgesScorer(texts, texts[2]), relevance="convex_score"
    ).postprocess_nodes(nodes, query_str=QUESTION)
    assert _texts(convex)[-1] == texts[2]  # the gold candidate at the best (last) position
    assert convex[-1].node.metadata[METADATA_KEY]["relevance"] == "convex_score"
    with pytest.raises(ValueError, match="query"):
        ProfileReorder(
            profile=str(path), scorer=GoldAtEdgesScorer(texts, texts[2])
        ).postprocess_nodes(nodes)


@pytest.mark.parametrize("relevance", ["passage_likelihood", "convex_score"])
def test_profile_reorder_relevance_reaches_the_core(
    relevance: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rag_position._integration.reorder as adapters

    seen: list[dict[str, Any]] = []
    real = adapters.profile_reorder

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(dict(kwargs))
        return real(*args, **kwargs)

    monkeypatch.setattr(adapters, "profile_reorder", spy)
    nodes = make_nodes([0.9, 0.8, 0.1, 0.5])
    texts = _texts(nodes)
    options = {"convex_options": {"seed": 4}} if relevance == "convex_score" else {}
    reorder = ProfileReorder(
        profile=[0.1, 0.2, 0.3, 0.9],
        scorer=GoldAtEdgesScorer(texts, texts[2]),
        relevance=relevance,
        **options,
    )
    assert reorder.relevance == relevance and reorder.to_dict()["relevance"] == relevance
    out = reorder.postprocess_nodes(nodes, query_str=QUESTION)
    assert len(seen) == 1 and seen[0]["relevance"] == relevance
    assert seen[0].get("seed") == options.get("convex_options", {}).get("seed")
    assert {o.node.metadata[METADATA_KEY]["relevance"] for o in out} == {relevance}
    assert _texts(out)[-1] == texts[2]


def test_profile_reorder_convex_options_need_convex_relevance() -> None:
    texts = _texts(make_nodes())
    with pytest.raises(ValueError, match=r"relevance='convex_score' \(got relevance='passage_"):
        ProfileReorder(
            profile=[0.1, 0.9],
            scorer=GoldAtEdgesScorer(texts, texts[2]),
            convex_options={"n_rotations": 2},
        )
    with pytest.raises(ValueError, match="relevance"):
        ProfileReorder(profile=[0.1, 0.9], relevance="order")


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


# ---------------------------------------------------------------------------- metadata convention
def test_metadata_key_on_copies_and_nothing_mutated() -> None:
    nodes = make_nodes()
    given = list(nodes)
    before = _snapshot(nodes)
    for reorder in _all_reorderers(nodes):
        out = reorder.postprocess_nodes(nodes, query_str=QUESTION)
        assert nodes == given and _snapshot(nodes) == before, type(reorder).__name__
        assert sorted(_ids(out)) == sorted(_ids(nodes))  # nothing lost or duplicated
        for rank, item in enumerate(out):
            original = nodes[item.node.metadata[METADATA_KEY]["original_rank"]]
            assert item is not original and item.node is not original.node
            assert item.node.node_id == original.node.node_id
            assert item.node.get_content(MetadataMode.NONE) == original.node.get_content(
                MetadataMode.NONE
            )
            assert item.score == original.score  # the retriever's score, untouched
            entry = item.node.metadata[METADATA_KEY]
            assert entry["rank"] == rank
            assert entry["strategy"] == reorder.strategy_name
            assert entry["score"] is None or isinstance(entry["score"], float)
            assert {k: v for k, v in item.node.metadata.items() if k != METADATA_KEY} == (
                original.node.metadata
            )
            assert METADATA_KEY in item.node.excluded_llm_metadata_keys
            assert METADATA_KEY in item.node.excluded_embed_metadata_keys
            assert "source" in item.node.excluded_llm_metadata_keys  # the node's own kept
            assert METADATA_KEY not in item.node.get_content(MetadataMode.LLM)
            assert METADATA_KEY not in item.node.get_content(MetadataMode.EMBED)
            assert item.node.metadata is not original.node.metadata


def test_metadata_key_none_returns_the_callers_objects() -> None:
    nodes = make_nodes()
    before = _snapshot(nodes)
    for reorder in _all_reorderers(nodes):
        reorder.metadata_key = None
        out = reorder.postprocess_nodes(nodes, query_str=QUESTION)
        assert {id(x) for x in out} == {id(x) for x in nodes}
        assert len(out) == len(nodes)
        assert _snapshot(nodes) == before
        assert all(METADATA_KEY not in x.node.metadata for x in out)


def test_custom_metadata_key_and_chaining() -> None:
    nodes = make_nodes()
    out = EdgeReorder(metadata_key="edges").postprocess_nodes(nodes)
    assert all("edges" in x.node.metadata and METADATA_KEY not in x.node.metadata for x in out)
    twice = EdgeReorder(mode="langchain").postprocess_nodes(EdgeReorder().postprocess_nodes(nodes))
    for x in twice:  # the second reorderer overwrites the key on its own copy
        assert x.node.metadata[METADATA_KEY]["rank"] == twice.index(x)
        assert x.node.excluded_llm_metadata_keys.count(METADATA_KEY) == 1


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


# ---------------------------------------------------------------------------- errors and edges
def test_bad_input_is_refused_clearly() -> None:
    nodes = make_nodes()
    texts = _texts(nodes)
    reorder = ConvexScoreReorder(scorer=GoldAtEdgesScorer(texts, texts[0]))
    with pytest.raises(ValueError, match="needs the query"):
        reorder.postprocess_nodes(nodes)
    with pytest.raises(ValueError, match="needs the query"):
        reorder.postprocess_nodes(nodes, query_bundle=QueryBundle("   "))
    with pytest.raises(TypeError, match="item 1 is a TextNode"):
        EdgeReorder().postprocess_nodes([nodes[0], nodes[1].node])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="list of NodeWithScore"):
        EdgeReorder().postprocess_nodes(nodes[0])  # type: ignore[arg-type]
    with pytest.raises(ModelSpecError, match="unknown model spec"):
        LikelihoodReorder(scorer="gpt-4")
    with pytest.raises(ValueError):
        EdgeReorder(mode="middle")
    with pytest.raises(ValueError):
        LikelihoodReorder(scorer=GoldFirstScorer(texts, texts[0]), n_orders=0)
    with pytest.raises(TypeError, match="profile"):
        ProfileReorder(profile={"values": [1]})
    with pytest.raises(TypeError, match="numbers"):
        ProfileReorder(profile=["a", "b"])


def test_zero_and_one_node() -> None:
    node = make_nodes([0.5])
    texts = _texts(node)
    for reorder in (
        LikelihoodReorder(scorer=GoldFirstScorer(texts, texts[0])),
        ConvexScoreReorder(scorer=GoldAtEdgesScorer(texts, texts[0])),
        ProfileReorder(profile=[1.0, 0.0]),
        EdgeReorder(),
    ):
        assert reorder.postprocess_nodes([], query_str=QUESTION) == []
        out = reorder.postprocess_nodes(node, query_str=QUESTION)
        assert _ids(out) == ["node-0"]
        assert out[0].node.metadata[METADATA_KEY]["rank"] == 0


def test_node_without_a_title_and_non_text_metadata() -> None:
    node = NodeWithScore(node=TextNode(text="Just text.", metadata={"page": 3}), score=None)
    other = NodeWithScore(node=TextNode(text="More text.", metadata={"title": 7}), score=0.2)
    assert node_passage(node, "title").title == ""
    assert node_passage(other, "title").title == ""  # a non-string title is not used
    assert node_passage(other, None).text == "More text."
    out = EdgeReorder(mode="haystack").postprocess_nodes([node, other])
    assert [x.node.get_content(MetadataMode.NONE) for x in out] == ["More text.", "Just text."]


def test_async_gives_the_same_result_as_sync() -> None:
    nodes = make_nodes()
    for reorder in _all_reorderers(nodes):
        sync = reorder.postprocess_nodes(nodes, query_str=QUESTION)
        result = asyncio.run(reorder.apostprocess_nodes(nodes, query_str=QUESTION))
        assert _ids(result) == _ids(sync)
        assert [x.node.metadata for x in result] == [x.node.metadata for x in sync]
        assert [x.score for x in result] == [x.score for x in sync]


def test_every_permutation_of_input_maps_back() -> None:
    base = make_nodes([0.4, 0.3, 0.2, 0.1])
    texts = _texts(base)
    for perm in itertools.permutations(range(4)):
        nodes = [base[i] for i in perm]
        out = ConvexScoreReorder(scorer=GoldAtEdgesScorer(texts, texts[1])).postprocess_nodes(
            nodes, query_str=QUESTION
        )
        assert out[0].node.node_id == "node-1"
        for item in out:
            entry = item.node.metadata[METADATA_KEY]
            assert nodes[entry["original_rank"]].node.node_id == item.node.node_id


def test_serialisation_keeps_spec_strings() -> None:
    data = ConvexScoreReorder(scorer="embedded", scorer_kwargs={"dtype": "float32"}).to_dict()
    assert data["scorer"] == "embedded" and data["class_name"] == "RagPositionConvexScoreReorder"
    assert ProfileReorder(profile=[0.1, 0.2]).to_dict()["profile"] == [0.1, 0.2]
    texts = _texts(make_nodes())
    assert LikelihoodReorder(scorer=GoldFirstScorer(texts, texts[0])).to_dict()["scorer"] == (
        "<GoldFirstScorer>"
    )
