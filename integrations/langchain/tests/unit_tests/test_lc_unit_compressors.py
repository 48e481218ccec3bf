"""Compressors, transformer and retriever on scripted scorers: order, metadata, identity, errors."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_rag_position import (
    METADATA_KEY,
    ConvexScoreReorder,
    EdgeReorder,
    EdgeReorderTransformer,
    LikelihoodReorder,
    PositionAwareRetriever,
    PositionProfile,
    ProfileReorder,
)
from langchain_rag_position._adapters import to_passage
from lc_testkit import QUESTION, FirstScorer, GoldScorer, make_docs

from rag_position._integration import RECORD_KEYS, record_keys
from rag_position.strategies import convex_score, likelihood_selection

GOLD = "Paris is the capital of France."


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


def snapshot(docs: list[Document]) -> list[tuple[str, str | None, str]]:
    return [(d.page_content, d.id, json.dumps(d.metadata, sort_keys=True)) for d in docs]


def check_annotated(out: list[Document], docs: list[Document], strategy: str) -> list[int]:
    """Every input document once, shallow copies with new metadata; returns the order."""
    order = [d.metadata[METADATA_KEY]["original_rank"] for d in out]
    assert sorted(order) == list(range(len(docs)))
    for rank, (d, i) in enumerate(zip(out, order, strict=True)):
        src = docs[i]
        assert d is not src and d.metadata is not src.metadata
        assert d.page_content == src.page_content and d.id == src.id
        assert {k: v for k, v in d.metadata.items() if k != METADATA_KEY} == src.metadata
        assert d.metadata["tags"] is src.metadata["tags"]  # shallow: values shared
        record = d.metadata[METADATA_KEY]
        assert record["strategy"] == strategy and record["rank"] == rank
        # the one record schema of both integrations (rag_position._integration.reorder_record)
        assert set(record) == {*RECORD_KEYS, *record_keys(strategy)}
    return order


# ---------------------------------------------------------------------- likelihood selection
def test_likelihood_reorder_picks_the_most_likely_order() -> None:
    docs = make_docs(3)  # 3! = 6 orders: all of them are candidates
    before = snapshot(docs)
    scorer = FirstScorer(GOLD)
    out = LikelihoodReorder(scorer=scorer, n_orders=6).compress_documents(docs, QUESTION)
    order = check_annotated(list(out), docs, "likelihood_selection")
    assert out[0].page_content == GOLD  # the query is likeliest with the gold first
    assert len(scorer.prompts) == 6
    assert all(d.metadata[METADATA_KEY]["score"] == 0.0 for d in out)  # the best order's score
    core = likelihood_selection(QUESTION, [to_passage(d) for d in docs], FirstScorer(GOLD),
                                n_orders=6)  # fmt: skip
    assert order == core.order
    assert snapshot(docs) == before  # inputs untouched


def test_likelihood_reorder_keeps_the_given_order_on_ties() -> None:
    docs = make_docs(4)
    docs[0], docs[1] = docs[1], docs[0]  # gold already first
    out = LikelihoodReorder(scorer=FirstScorer(GOLD), n_orders=5).compress_documents(docs, "q?")
    assert [d.id for d in out] == [d.id for d in docs]


# ---------------------------------------------------------------------- ConvexScore
@pytest.mark.parametrize("n", [3, 5])
def test_convex_score_reorder_moves_the_gold_first(n: int) -> None:
    docs = make_docs(n)
    before = snapshot(docs)
    scorer = GoldScorer(GOLD)
    out = list(ConvexScoreReorder(scorer=scorer).compress_documents(docs, QUESTION))
    order = check_annotated(out, docs, "convex_score")
    assert out[0].page_content == GOLD
    assert order == [1, *(i for i in range(n) if i != 1)]  # the others keep their order
    assert len(scorer.prompts) == n  # N rotations
    core = convex_score(QUESTION, [to_passage(d) for d in docs], GoldScorer(GOLD))
    assert order == core.order
    assert [d.metadata[METADATA_KEY]["score"] for d in out] == [core.scores[i] for i in order]
    assert snapshot(docs) == before


def test_convex_score_reorder_placement_last_and_options() -> None:
    docs = make_docs(4)
    out = ConvexScoreReorder(scorer=GoldScorer(GOLD), placement="last", rest="scores")
    result = out.compress_documents(docs, QUESTION)
    assert result[-1].page_content == GOLD
    with pytest.raises(ValueError, match="profile"):
        ConvexScoreReorder(scorer=GoldScorer(GOLD), placement="profile")
    with pytest.raises(ValueError):
        ConvexScoreReorder(scorer=GoldScorer(GOLD), n_rotations=0)
    with pytest.raises(ValueError, match="extra"):
        ConvexScoreReorder(scorer=GoldScorer(GOLD), n_order=3)  # a typo is refused


def test_metadata_key_none_returns_the_callers_objects() -> None:
    docs = make_docs(4)
    before = snapshot(docs)
    out = ConvexScoreReorder(scorer=GoldScorer(GOLD), metadata_key=None).compress_documents(
        docs, QUESTION
    )
    assert out[0] is docs[1]
    assert sorted(map(id, out)) == sorted(map(id, docs))
    assert snapshot(docs) == before


def test_custom_metadata_key() -> None:
    docs = make_docs(3)
    out = EdgeReorder(metadata_key="pos").compress_documents(docs, QUESTION)
    assert all("pos" in d.metadata and METADATA_KEY not in d.metadata for d in out)


def test_async_twins_equal_sync() -> None:
    docs = make_docs(5)
    for comp in (
        ConvexScoreReorder(scorer=GoldScorer(GOLD)),
        LikelihoodReorder(scorer=FirstScorer(GOLD), n_orders=4),
        EdgeReorder(score_key="relevance_score"),
        ProfileReorder(profile=PositionProfile([0.1, 0.2, 0.9])),
    ):
        sync = comp.compress_documents(docs, QUESTION)
        asyn = asyncio.run(comp.acompress_documents(docs, QUESTION))
        assert snapshot(list(sync)) == snapshot(list(asyn)), type(comp).__name__
    transformer = EdgeReorderTransformer()
    assert snapshot(transformer.transform_documents(docs)) == snapshot(
        asyncio.run(transformer.atransform_documents(docs))
    )


def test_empty_and_bad_documents() -> None:
    comp = ConvexScoreReorder(scorer=GoldScorer(GOLD))
    assert list(comp.compress_documents([], QUESTION)) == []
    with pytest.raises(TypeError, match=r"documents\[1\] is a str"):
        comp.compress_documents([make_docs(1)[0], "text"], QUESTION)  # type: ignore[list-item]
    with pytest.raises(TypeError, match="single Document"):
        comp.compress_documents(make_docs(1)[0], QUESTION)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="question"):
        comp.compress_documents(make_docs(3), "  ")


# ---------------------------------------------------------------------- profile placement
def test_profile_reorder_by_given_order_scores_and_scorer(tmp_path: Path) -> None:
    docs = make_docs(3)
    profile = PositionProfile([0.17, 0.12, 0.40], model_name="embedded", source="eval")
    out = ProfileReorder(profile=profile).compress_documents(docs, QUESTION)
    # ranking of positions: 2, 0, 1 -> most relevant (doc 0) last, doc 1 first, doc 2 middle
    assert check_annotated(list(out), docs, "profile") == [1, 2, 0]
    assert all(d.metadata[METADATA_KEY]["score"] is None for d in out)
    path = tmp_path / "profile.json"
    profile.save(path)
    reversed_scores = [d.model_copy(update={"metadata": {**d.metadata, "s": i}})
                       for i, d in enumerate(docs)]  # fmt: skip
    out = ProfileReorder(profile=str(path), score_key="s").compress_documents(reversed_scores, "q")
    assert [d.metadata[METADATA_KEY]["original_rank"] for d in out] == [1, 0, 2]
    assert [d.metadata[METADATA_KEY]["score"] for d in out] == [1.0, 0.0, 2.0]
    scorer = GoldScorer(GOLD)
    scored = ProfileReorder(profile=profile, scorer=scorer).compress_documents(docs, "q")
    assert scored[2].page_content == GOLD  # the likeliest document alone to the best position
    assert {d.metadata[METADATA_KEY]["relevance"] for d in scored} == {"passage_likelihood"}
    assert len(scorer.prompts) == 3  # one prompt per document, each alone
    assert all(p.count("Document [") == 1 for p in scorer.prompts)
    convex = ProfileReorder(profile=profile, scorer=GoldScorer(GOLD), relevance="convex_score")
    by_convex = convex.compress_documents(docs, "q")
    assert by_convex[2].page_content == GOLD  # ConvexScore's gold to the best-read position
    assert {d.metadata[METADATA_KEY]["relevance"] for d in by_convex} == {"convex_score"}


@pytest.mark.parametrize("relevance", ["passage_likelihood", "convex_score"])
def test_profile_reorder_relevance_reaches_the_core(
    relevance: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rag_position._integration.reorder as adapters

    seen: list[dict[str, object]] = []
    real = adapters.profile_reorder

    def spy(*args: object, **kwargs: object) -> object:
        seen.append(dict(kwargs))
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(adapters, "profile_reorder", spy)
    options = {"convex_options": {"seed": 4}} if relevance == "convex_score" else {}
    reorder = ProfileReorder(
        profile=[0.1, 0.2, 0.9], scorer=GoldScorer(GOLD), relevance=relevance, **options
    )
    assert reorder.relevance == relevance
    out = reorder.compress_documents(make_docs(3), QUESTION)
    assert len(seen) == 1 and seen[0]["relevance"] == relevance
    assert seen[0].get("seed") == options.get("convex_options", {}).get("seed")
    assert {d.metadata[METADATA_KEY]["relevance"] for d in out} == {relevance}
    assert out[2].page_content == GOLD


def test_profile_reorder_errors(tmp_path: Path) -> None:
    profile = PositionProfile([0.1, 0.5])
    with pytest.raises(ValueError, match="not both"):
        ProfileReorder(profile=profile, score_key="s", scorer=GoldScorer(GOLD))
    with pytest.raises(ValueError, match="convex_score"):
        ProfileReorder(profile=profile, convex_options={"n_rotations": 2})
    with pytest.raises(ValueError, match=r"relevance='convex_score' \(got relevance='passage_"):
        ProfileReorder(profile=profile, scorer=GoldScorer(GOLD), convex_options={"n_rotations": 2})
    with pytest.raises(ValueError, match="relevance"):
        ProfileReorder(profile=profile, scorer=GoldScorer(GOLD), relevance="order")
    with pytest.raises(FileNotFoundError):
        ProfileReorder(profile=str(tmp_path / "missing.json"))
    docs = make_docs(3)
    partial = [docs[0], Document(page_content="x"), docs[2]]
    with pytest.raises(ValueError, match=r"documents \[1\] have no 'relevance_score'"):
        ProfileReorder(profile=profile, score_key="relevance_score").compress_documents(
            partial, "q"
        )


# ---------------------------------------------------------------------- edge placement
@pytest.mark.parametrize("n", range(0, 10))
def test_edge_transformer_equals_long_context_reorder(n: int) -> None:
    docs = make_docs(n)
    plain = EdgeReorderTransformer(metadata_key=None).transform_documents(docs)
    expected = litm_reordering(docs)
    assert [id(d) for d in plain] == [id(d) for d in expected]  # the same objects, same order
    annotated = EdgeReorderTransformer().transform_documents(docs)
    assert [d.id for d in annotated] == [d.id for d in expected]
    if n:
        check_annotated(annotated, docs, "edge")


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


def test_edge_reorder_with_scores_and_modes() -> None:
    docs = make_docs(5)
    shuffled = [docs[i] for i in (3, 0, 4, 1, 2)]  # relevance_score: 0.7 1.0 0.6 0.9 0.8
    by_score = EdgeReorder(score_key="relevance_score").compress_documents(shuffled, "q")
    by_order = EdgeReorder().compress_documents(docs, "q")
    assert [d.id for d in by_score] == [d.id for d in by_order]  # sorted by score first
    assert by_score[0].metadata[METADATA_KEY]["score"] == pytest.approx(1.0)
    llama = EdgeReorder(mode="llamaindex", score_key="relevance_score")
    out = llama.compress_documents(docs, "q")
    assert out[0].id == "id-0"  # odd count: the most relevant first
    haystack = EdgeReorder(mode="haystack", top_k=3).compress_documents(docs, "q")
    assert [d.id for d in haystack] == ["id-0", "id-2", "id-1"]  # the only way to drop
    with pytest.raises(ValueError, match="Haystack"):
        EdgeReorder(top_k=3)
    with pytest.raises(ValueError, match="no document has the score key 'score'"):
        EdgeReorder(score_key="score").compress_documents(docs, "q")
    bad = [d.model_copy(update={"metadata": {"relevance_score": "high"}}) for d in docs]
    with pytest.raises(ValueError, match="must be a number"):
        EdgeReorderTransformer(score_key="relevance_score").transform_documents(bad)


def test_input_list_not_mutated() -> None:
    docs = make_docs(6)
    ids = [id(d) for d in docs]
    kept = copy.deepcopy(docs)
    for comp in (EdgeReorder(), ConvexScoreReorder(scorer=GoldScorer(GOLD))):
        comp.compress_documents(docs, QUESTION)
    EdgeReorderTransformer().transform_documents(docs)
    assert [id(d) for d in docs] == ids
    assert docs == kept


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
