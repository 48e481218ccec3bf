"""What LangChain alone has of the ordering components (the compressors' behaviour is
tested for both frameworks in ``tests/test_components_orderings.py``):
``EdgeReorderTransformer`` and its parity with ``LongContextReorder``, ``ProfileReorder``
in the given order, and ``PositionAwareRetriever`` with named and given strategies and
``k``."""

from __future__ import annotations

import asyncio
import copy

import pytest
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_rag_position import (
    METADATA_KEY,
    EdgeReorder,
    EdgeReorderTransformer,
    PositionAwareRetriever,
    ProfileReorder,
)
from lc_testkit import FACTS, QUESTION, GoldScorer, make_docs

from rag_position._integration import RECORD_KEYS

GOLD = FACTS[1][1]  # Paris


def litm_reordering(documents: list[Document]) -> list[Document]:
    """LongContextReorder's documented rule (langchain-community ``_litm_reordering``)."""
    documents = list(documents)
    documents.reverse()
    reordered: list[Document] = []
    for i, value in enumerate(documents):
        if i % 2 == 1:
            reordered.append(value)
        else:
            reordered.insert(0, value)
    return reordered


def test_profile_reorder_without_scores_keeps_to_the_given_order() -> None:
    docs = make_docs(3)
    out = ProfileReorder(profile=[0.17, 0.12, 0.40]).compress_documents(docs, QUESTION)
    # ranking of positions: 2, 0, 1 -> most relevant (doc 0) last, doc 1 first, doc 2 middle
    assert [d.id for d in out] == ["id-1", "id-2", "id-0"]
    assert [d.metadata[METADATA_KEY]["relevance"] for d in out] == ["order"] * 3
    assert all(d.metadata[METADATA_KEY]["score"] is None for d in out)


# ---------------------------------------------------------------------- the transformer
@pytest.mark.parametrize("n", range(0, 10))
def test_edge_transformer_equals_long_context_reorder(n: int) -> None:
    docs = make_docs(n)
    plain = EdgeReorderTransformer(metadata_key=None).transform_documents(docs)
    expected = litm_reordering(docs)
    assert [id(d) for d in plain] == [id(d) for d in expected]  # the same objects, same order
    annotated = EdgeReorderTransformer().transform_documents(docs)
    assert [d.id for d in annotated] == [d.id for d in expected]
    by_id = {d.id: d for d in docs}
    for rank, d in enumerate(annotated):  # shallow copies, a new metadata dict
        src = by_id[d.id]
        assert d is not src and d.metadata is not src.metadata
        assert d.page_content == src.page_content
        assert d.metadata["tags"] is src.metadata["tags"]
        assert {k: v for k, v in d.metadata.items() if k != METADATA_KEY} == src.metadata
        record = d.metadata[METADATA_KEY]
        assert set(record) == set(RECORD_KEYS) and record["strategy"] == "edge"
        assert record["rank"] == rank and docs[record["original_rank"]] is src


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 7, 10, 13])
def test_edge_transformer_equals_the_installed_long_context_reorder(n: int) -> None:
    """Parity with the class users replace (langchain-community, in the [test] extra)."""
    from langchain_community.document_transformers import LongContextReorder

    docs = make_docs(n)
    expected = LongContextReorder().transform_documents(list(docs))
    plain = EdgeReorderTransformer(metadata_key=None).transform_documents(docs)
    assert [id(d) for d in plain] == [id(d) for d in expected]
    by_compressor = EdgeReorder(mode="langchain").compress_documents(docs, "q")
    assert [d.id for d in by_compressor] == [d.id for d in expected]


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
class ListRetriever(BaseRetriever):
    """Returns its documents, in order (a stand-in for a vector store)."""

    docs: list[Document]

    def _get_relevant_documents(self, query: str, *, run_manager: object) -> list[Document]:
        return list(self.docs)


def test_position_aware_retriever_named_and_given_strategies() -> None:
    docs = make_docs(5)
    base = ListRetriever(docs=docs)
    edge = PositionAwareRetriever(retriever=base)
    assert [d.id for d in edge.invoke("q")] == [d.id for d in litm_reordering(docs)]
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


def test_position_aware_retriever_errors() -> None:
    base = ListRetriever(docs=make_docs(2))
    with pytest.raises(ValueError, match="unknown strategy 'convex'"):
        PositionAwareRetriever(retriever=base, strategy="convex")
    with pytest.raises(ValueError, match="uses no model"):
        PositionAwareRetriever(retriever=base, strategy="edge", scorer=GoldScorer(GOLD))
    with pytest.raises(ValueError, match="configure"):
        PositionAwareRetriever(retriever=base, strategy=EdgeReorder(), scorer=GoldScorer(GOLD))
    with pytest.raises(TypeError, match="strategy"):
        PositionAwareRetriever(retriever=base, strategy=42)
    with pytest.raises(ValueError, match="scorer"):
        PositionAwareRetriever(retriever=base, strategy="convex_score")
    with pytest.raises(ValueError, match="k"):
        PositionAwareRetriever(retriever=base).invoke("q", k=0)
