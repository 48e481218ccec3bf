"""PassageLikelihoodReorder: each document scored alone, the likeliest placed, as the core does.

Scripted scorers pin the order, the record and the options; one test runs the embedded
model (marked ``slow``) and checks the compressor equals the core function on it.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_rag_position import (
    METADATA_KEY,
    PassageLikelihoodReorder,
    PositionAwareRetriever,
    PositionProfile,
)
from langchain_rag_position._adapters import to_passage
from lc_testkit import FACTS, QUESTION, make_docs
from pydantic import ValidationError

from rag_position._integration import RECORD_KEYS, component_of, record_keys
from rag_position.strategies import STRATEGIES, passage_likelihood
from rag_position.testing.scripted import OnePassageScorer

GOLD = "Paris is the capital of France."
# The question's likelihood after each document alone (by its text): Paris best, Madrid next.
LIKELIHOODS = [-2.0, -0.5, -3.0, -1.0, -2.5]
VALUES = {text: value for (_, text), value in zip(FACTS, LIKELIHOODS, strict=True)}


class AloneScorer(OnePassageScorer):
    """Each prompt holds ONE document; its value is ``VALUES[text]`` (or ``values``)."""

    def __init__(self, values: dict[str, float] | None = None) -> None:
        super().__init__(QUESTION, VALUES if values is None else values)


def records(out: Sequence[Document]) -> list[dict[str, Any]]:
    return [d.metadata[METADATA_KEY] for d in out]


def check_record(out: Sequence[Document], docs: list[Document]) -> list[int]:
    """The one schema, every input once, shallow copies; returns the order."""
    order = [r["original_rank"] for r in records(out)]
    assert sorted(order) == list(range(len(docs)))
    for rank, (d, i) in enumerate(zip(out, order, strict=True)):
        record = d.metadata[METADATA_KEY]
        assert (
            set(record)
            == {*RECORD_KEYS, *record_keys("passage_likelihood")}
            == {
                *RECORD_KEYS,
                "gold",
            }
        )
        assert record["strategy"] == "passage_likelihood" and record["rank"] == rank
        assert d is not docs[i] and d.metadata is not docs[i].metadata
        assert d.page_content == docs[i].page_content and d.id == docs[i].id
    return order


# ---------------------------------------------------------------------- order and record
def test_the_likeliest_document_alone_goes_first_and_the_rest_keep_their_order() -> None:
    docs = make_docs(4)
    before = copy.deepcopy(docs)
    scorer = AloneScorer()
    out = PassageLikelihoodReorder(scorer=scorer).compress_documents(docs, QUESTION)
    order = check_record(out, docs)
    assert out[0].page_content == GOLD and order == [1, 0, 2, 3]
    assert [r["gold"] for r in records(out)] == [True, False, False, False]
    assert [r["score"] for r in records(out)] == [VALUES[docs[i].page_content] for i in order]
    assert len(scorer.calls) == 1 and len(scorer.calls[0]) == 4  # N one-document prompts, batched
    assert all(p.count("Document [") == 1 for p in scorer.calls[0])
    assert docs == before  # inputs untouched


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"rest": "scores"},
        {"placement": "last"},
        {"placement": "last", "rest": "scores"},
        {"placement": "profile", "profile": [0.1, 0.4, 0.2, 0.3, 0.5]},
        {"placement": "profile", "profile": [0.1, 0.4, 0.2, 0.3, 0.5], "rest": "keep"},
        {"template": "{search_results}\nQ: {question}\nA:"},
    ],
)
def test_the_order_and_scores_are_the_core_functions(options: dict[str, Any]) -> None:
    docs = make_docs(5)
    out = PassageLikelihoodReorder(scorer=AloneScorer(), **options).compress_documents(
        docs, QUESTION
    )
    core = passage_likelihood(QUESTION, [to_passage(d) for d in docs], AloneScorer(), **options)
    assert check_record(out, docs) == core.order
    assert [r["score"] for r in records(out)] == [core.scores[i] for i in core.order]
    assert [r["original_rank"] for r in records(out) if r["gold"]] == [core.details["gold"]]


def test_placement_last_and_profile() -> None:
    docs = make_docs(4)
    last = PassageLikelihoodReorder(scorer=AloneScorer(), placement="last")
    assert last.compress_documents(docs, QUESTION)[-1].page_content == GOLD
    profile = PositionProfile([0.1, 0.2, 0.9, 0.3])  # position 2 reads best
    placed = PassageLikelihoodReorder(scorer=AloneScorer(), placement="profile", profile=profile)
    out = placed.compress_documents(docs, QUESTION)
    assert out[2].page_content == GOLD and out[2].metadata[METADATA_KEY]["gold"] is True


def test_title_key_and_metadata_key() -> None:
    docs = make_docs(3)
    scorer = AloneScorer()
    PassageLikelihoodReorder(scorer=scorer).compress_documents(docs, QUESTION)
    assert "(Title: Paris)" in scorer.calls[0][1]
    scorer = AloneScorer()
    PassageLikelihoodReorder(scorer=scorer, title_key=None).compress_documents(docs, QUESTION)
    assert "Title: Paris" not in scorer.calls[0][1]
    out = PassageLikelihoodReorder(scorer=AloneScorer(), metadata_key=None).compress_documents(
        docs, QUESTION
    )
    assert out[0] is docs[1] and sorted(map(id, out)) == sorted(map(id, docs))
    out = PassageLikelihoodReorder(scorer=AloneScorer(), metadata_key="pos").compress_documents(
        docs, QUESTION
    )
    assert all("pos" in d.metadata and METADATA_KEY not in d.metadata for d in out)


def test_fewer_than_two_documents_are_not_scored() -> None:
    scorer = AloneScorer()
    reorder = PassageLikelihoodReorder(scorer=scorer)
    assert reorder.compress_documents([], QUESTION) == []
    one = reorder.compress_documents(make_docs(1), QUESTION)
    assert records(one) == [
        {"strategy": "passage_likelihood", "score": None, "rank": 0, "original_rank": 0,
         "gold": False}
    ]  # fmt: skip
    assert scorer.calls == []


def test_async_equals_sync() -> None:
    docs = make_docs(5)
    reorder = PassageLikelihoodReorder(scorer=AloneScorer(), rest="scores")
    sync = reorder.compress_documents(docs, QUESTION)
    asyn = asyncio.run(reorder.acompress_documents(docs, QUESTION))
    assert [(d.id, d.metadata) for d in sync] == [(d.id, d.metadata) for d in asyn]


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
    for name in ("scorer", "scorer_kwargs", "metadata_key", "title_key"):
        assert name in fields


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
    with pytest.raises(ValidationError, match="extra"):
        PassageLikelihoodReorder(scorer=scorer, n_rotations=3)  # ConvexScore's, not ours
    with pytest.raises(ValueError, match="scorer"):
        PassageLikelihoodReorder()
    with pytest.raises(TypeError, match="score"):
        PassageLikelihoodReorder(scorer=object())


def test_a_spec_string_loads_on_first_use() -> None:
    reorder = PassageLikelihoodReorder(scorer="embedded", scorer_kwargs={"dtype": "float32"})
    assert reorder._scorer is not None and not reorder._scorer.loaded


def test_a_profile_file_is_read_at_construction(tmp_path: Any) -> None:
    path = tmp_path / "profile.json"
    PositionProfile((0.1, 0.9, 0.2)).save(path)
    reorder = PassageLikelihoodReorder(scorer=AloneScorer(), placement="profile", profile=path)
    assert isinstance(reorder.profile, PositionProfile)
    out = reorder.compress_documents(make_docs(3), QUESTION)
    assert out[1].page_content == GOLD  # the middle position reads best here


# ---------------------------------------------------------------------- the retriever
class ListRetriever(BaseRetriever):
    docs: Any

    def _get_relevant_documents(self, query: str, *, run_manager: object) -> list[Document]:
        return list(self.docs)


def test_the_retriever_knows_both_names() -> None:
    docs = make_docs(4)
    aware = PositionAwareRetriever(
        retriever=ListRetriever(docs=docs), strategy="passage_likelihood", scorer=AloneScorer()
    )
    assert isinstance(aware.reorderer, PassageLikelihoodReorder)
    out = aware.invoke(QUESTION)
    assert out[0].page_content == GOLD and records(out)[0]["strategy"] == "passage_likelihood"
    aware = PositionAwareRetriever(
        retriever=ListRetriever(docs=docs),
        strategy="passage_likelihood_profile",
        scorer=AloneScorer(),
        strategy_options={"profile": [0.1, 0.2, 0.3, 0.9]},  # the last position reads best
        k=4,
    )
    reorderer = aware.reorderer
    assert isinstance(reorderer, PassageLikelihoodReorder) and reorderer.placement == "profile"
    out = asyncio.run(aware.ainvoke(QUESTION))
    assert out[-1].page_content == GOLD and records(out)[-1]["gold"] is True


PROFILE_ROWS = [n for n, row in STRATEGIES.items() if row.fixed.get("placement") == "profile"]
RETRIEVABLE_PROFILE_ROWS = [n for n in PROFILE_ROWS if component_of(n) is not None]


@pytest.mark.parametrize("strategy", RETRIEVABLE_PROFILE_ROWS)
def test_a_profile_name_needs_a_profile_and_fixes_the_placement(strategy: str) -> None:
    """Every row placed by the profile that the retriever takes (from the table)."""
    base = ListRetriever(docs=make_docs(3))
    with pytest.raises(ValueError, match="profile="):
        PositionAwareRetriever(retriever=base, strategy=strategy, scorer=AloneScorer())
    with pytest.raises(TypeError, match="sets placement itself"):
        PositionAwareRetriever(
            retriever=base,
            strategy=strategy,
            scorer=AloneScorer(),
            strategy_options={"profile": [0.1, 0.2], "placement": "first"},
        )


# ---------------------------------------------------------------------- the embedded model
@pytest.mark.slow
def test_on_the_embedded_model_it_equals_the_core_and_finds_the_gold(lc_model: Any) -> None:
    docs = make_docs(4)  # Lyon, Paris, Berlin, Madrid
    out = PassageLikelihoodReorder(scorer=lc_model).compress_documents(docs, QUESTION)
    core = passage_likelihood(QUESTION, [to_passage(d) for d in docs], lc_model)
    assert check_record(out, docs) == core.order
    assert [r["score"] for r in records(out)] == pytest.approx([core.scores[i] for i in core.order])
    assert core.cost.lm_calls == 4
    assert out[0].page_content == GOLD and records(out)[0]["gold"] is True
