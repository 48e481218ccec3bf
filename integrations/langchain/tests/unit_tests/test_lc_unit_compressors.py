"""What LangChain alone has of the ordering components (the shared behaviour:
``tests/test_components_*.py``): EdgeReorderTransformer, PositionAwareRetriever and more."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import pytest
from langchain_classic.retrievers import ContextualCompressionRetriever
from langchain_community.document_transformers import LongContextReorder
from langchain_rag_position import (
    METADATA_KEY,
    EdgeReorder,
    EdgeReorderTransformer,
    PassageLikelihoodReorder,
    PositionAwareRetriever,
    PositionProfile,
    ProfileReorder,
    SelectAndPlace,
)
from lc_testkit import FACTS, QUESTION, GoldScorer, ListRetriever, make_docs

from rag_position.testing.scripted import OnePassageScorer
from rag_position.testing.tuned import example_file

GOLD = FACTS[1][1]  # Paris
# The question's likelihood after each document alone: Paris best, Madrid next.
VALUES = {text: v for (_, text), v in zip(FACTS, [-2.0, -0.5, -3.0, -1.0, -2.5], strict=True)}


def scorer() -> OnePassageScorer:
    return OnePassageScorer(QUESTION, VALUES)


def test_profile_reorder_without_scores_keeps_to_the_given_order() -> None:
    docs = make_docs(3)
    out = ProfileReorder(profile=[0.17, 0.12, 0.40]).compress_documents(docs, QUESTION)
    # ranking of positions: 2, 0, 1 -> most relevant (doc 0) last, doc 1 first, doc 2 middle
    assert [d.id for d in out] == ["id-1", "id-2", "id-0"]
    assert [d.metadata[METADATA_KEY]["relevance"] for d in out] == ["order"] * 3
    assert all(d.metadata[METADATA_KEY]["score"] is None for d in out)


def test_a_profile_file_becomes_the_profile_field(tmp_path: Path) -> None:
    path = tmp_path / "profile.json"
    PositionProfile((0.1, 0.9, 0.2)).save(path)
    reorder = PassageLikelihoodReorder(scorer=scorer(), placement="profile", profile=path)
    assert isinstance(reorder.profile, PositionProfile)
    assert reorder.profile.values == (0.1, 0.9, 0.2)


def test_select_and_place_is_the_base_compressor_of_a_contextual_compression_retriever() -> None:
    docs = make_docs(5)
    before = copy.deepcopy(docs)
    compressor = SelectAndPlace(scorer=scorer())
    retriever = ContextualCompressionRetriever(
        base_compressor=compressor, base_retriever=ListRetriever(docs=docs)
    )
    out = retriever.invoke(QUESTION)
    direct = compressor.compress_documents(docs, QUESTION)
    assert [(d.id, d.page_content, d.metadata) for d in out] == [
        (d.id, d.page_content, d.metadata) for d in direct
    ]
    # posteriors .49 .30 .11 .07 .04: mass 0.9 keeps four, the likeliest last
    assert [d.id for d in out] == ["id-4", "id-0", "id-3", "id-1"] and out[-1].page_content == GOLD
    asyn = asyncio.run(retriever.ainvoke(QUESTION))
    assert [(d.id, d.metadata) for d in asyn] == [(d.id, d.metadata) for d in out]
    one = ContextualCompressionRetriever(
        base_compressor=SelectAndPlace(scorer=scorer(), top_n=1),
        base_retriever=ListRetriever(docs=docs),
    ).invoke(QUESTION)
    assert [d.page_content for d in one] == [GOLD]
    assert docs == before


# ---------------------------------------------------------------------- the transformer
@pytest.mark.parametrize("n", [*range(11), 13])
def test_edge_transformer_equals_the_installed_long_context_reorder(n: int) -> None:
    """Parity with the class users replace (langchain-community, in the [test] extra)."""
    docs = make_docs(n)
    expected = LongContextReorder().transform_documents(list(docs))
    plain = EdgeReorderTransformer(metadata_key=None).transform_documents(docs)
    assert [id(d) for d in plain] == [id(d) for d in expected]  # the same objects, same order
    by_compressor = EdgeReorder(mode="langchain").compress_documents(docs, "q")
    assert [d.id for d in by_compressor] == [d.id for d in expected]
    # the copies and their records: test_lc_reorder_properties.py (EdgeReorderTransformer)
    annotated = EdgeReorderTransformer().transform_documents(docs)
    assert [d.id for d in annotated] == [d.id for d in expected]


def test_edge_transformer_async_input_and_scores() -> None:
    docs = make_docs(6)
    ids, kept = [id(d) for d in docs], copy.deepcopy(docs)
    transformer = EdgeReorderTransformer()
    sync = transformer.transform_documents(docs)
    asyn = asyncio.run(transformer.atransform_documents(docs))
    assert [(d.page_content, d.id, d.metadata) for d in sync] == [
        (d.page_content, d.id, d.metadata) for d in asyn
    ]
    assert [id(d) for d in docs] == ids and docs == kept  # the input list not mutated
    bad = [d.model_copy(update={"metadata": {"relevance_score": "high"}}) for d in docs]
    with pytest.raises(ValueError, match="must be a number"):
        EdgeReorderTransformer(score_key="relevance_score").transform_documents(bad)


# ---------------------------------------------------------------------- retriever
def test_position_aware_retriever_named_given_and_tuned_strategies(tmp_path: Path) -> None:
    docs = make_docs(5)
    base = ListRetriever(docs=docs)
    edge = PositionAwareRetriever(retriever=base)
    expected = LongContextReorder().transform_documents(list(docs))
    assert [d.id for d in edge.invoke("q")] == [d.id for d in expected]
    convex = PositionAwareRetriever(
        retriever=base, strategy="convex_score", scorer=GoldScorer(GOLD), k=4
    )
    out = convex.invoke(QUESTION)
    assert len(out) == 4 and out[0].page_content == GOLD
    assert [d.id for d in convex.invoke(QUESTION, k=2)] == ["id-0", "id-1"]  # 2: a tie, kept
    assert [d.id for d in asyncio.run(convex.ainvoke(QUESTION))] == [d.id for d in out]
    given = PositionAwareRetriever(retriever=base, strategy=EdgeReorderTransformer(), k=3)
    assert [d.id for d in given.invoke("q")] == ["id-0", "id-2", "id-1"]
    assert base.docs == docs  # untouched
    tuned = example_file(tmp_path, "retriever")  # the given order, then the first k
    aware = PositionAwareRetriever(retriever=ListRetriever(docs=docs[:4]), tuned=tuned, k=3)
    out = aware.invoke(QUESTION)
    assert [d.metadata[METADATA_KEY] for d in out] == [
        {"strategy": "retriever", "score": None, "rank": i, "original_rank": i} for i in range(3)
    ]
    assert [d.id for d in out] == ["id-0", "id-1", "id-2"]


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"strategy": "convex"}, ValueError, "unknown strategy 'convex'"),
        ({"strategy": "edge", "scorer": GoldScorer(GOLD)}, ValueError, "uses no model"),
        ({"strategy": EdgeReorder(), "scorer": GoldScorer(GOLD)}, ValueError, "configure"),
        ({"strategy": 42}, TypeError, "strategy"),
        ({"strategy": "convex_score"}, ValueError, "scorer"),
    ],
)
def test_position_aware_retriever_errors(options: dict[str, Any], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        PositionAwareRetriever(retriever=ListRetriever(docs=make_docs(2)), **options)


@pytest.mark.parametrize("strategy", ["edge", "profile"])
@pytest.mark.parametrize("query", [None, 42])
def test_retriever_refuses_a_bad_query_or_k(strategy: str, query: Any) -> None:
    """A query that is not a string is a TypeError naming the retriever, whatever the
    strategy (the compressors' refusal: ``tests/test_components_bad_input.py``)."""
    options = {"profile": [0.1, 0.2, 0.3]} if strategy == "profile" else {}
    retriever = PositionAwareRetriever(
        retriever=ListRetriever(docs=make_docs(3)), strategy=strategy, strategy_options=options
    )
    with pytest.raises(TypeError, match="PositionAwareRetriever: the query must be a str"):
        retriever.invoke(query)
    with pytest.raises(TypeError, match="PositionAwareRetriever: the query must be a str"):
        asyncio.run(retriever.ainvoke(query))
    with pytest.raises(ValueError, match="k"):
        retriever.invoke("q", k=0)
