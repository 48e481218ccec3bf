"""SelectAndPlace: each document scored alone, the likeliest kept (mass, top_n), then placed.

Scripted scorers pin what is kept and dropped, the order, the record and the options
(the posterior is chosen so every expected value is computable by hand); one test runs
the embedded model (marked ``slow``) and checks the compressor equals the core function
on it.
"""

from __future__ import annotations

import asyncio
import copy
import math
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_classic.retrievers import ContextualCompressionRetriever
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_rag_position import (
    METADATA_KEY,
    PositionAwareRetriever,
    PositionProfile,
    SelectAndPlace,
)
from langchain_rag_position._adapters import to_passage
from langchain_rag_position.retrievers import COMPONENTS
from lc_testkit import FACTS, QUESTION, make_docs
from pydantic import ValidationError

from rag_position._integration import RECORD_KEYS, record_keys
from rag_position.strategies import STRATEGIES, select_and_place
from rag_position.testing.scripted import OnePassageScorer

GOLD = "Paris is the capital of France."
N_TOKENS = 4
# The posterior of each document (Lyon, Paris, Berlin, Madrid, Rome): a SpanScore.sum of
# ln(weight) makes the softmax of the sums exactly these weights (they sum to 1).
WEIGHTS = [0.10, 0.60, 0.01, 0.25, 0.04]
SUMS = {text: math.log(w) for (_, text), w in zip(FACTS, WEIGHTS, strict=True)}
MEANS = [math.log(w) / N_TOKENS for w in WEIGHTS]  # the record's score: the mean
RANKED = [1, 3, 0, 4, 2]  # Paris, Madrid, Lyon, Rome, Berlin (most likely first)
# mass=0.9: 0.60 + 0.25 = 0.85 < 0.9 <= 0.95 = 0.60 + 0.25 + 0.10, so three are kept.
KEPT = [1, 3, 0]
DROPPED = [4, 2]
LAST = [0, 3, 1]  # the most likely last, the others before it by falling score
EXPECTED_RECORD_KEYS = {*RECORD_KEYS, "likelihood_rank", "posterior", "dropped"}


class AloneScorer(OnePassageScorer):
    """Each prompt holds ONE passage; its total is ``SUMS[text]`` over ``N_TOKENS`` tokens."""

    def __init__(self) -> None:
        super().__init__(QUESTION, SUMS, N_TOKENS)


def records(out: Sequence[Document]) -> list[dict[str, Any]]:
    return [d.metadata[METADATA_KEY] for d in out]


def check_record(out: Sequence[Document], docs: list[Document]) -> list[int]:
    """The one schema, each kept input once, shallow copies; returns the order kept."""
    order = [r["original_rank"] for r in records(out)]
    assert len(set(order)) == len(order) and all(0 <= i < len(docs) for i in order)
    assert set(record_keys("select_and_place")) == {
        "likelihood_rank",
        "posterior",
        "dropped",
    }
    dropped = sorted(set(range(len(docs))) - set(order))
    for rank, (d, i) in enumerate(zip(out, order, strict=True)):
        record = d.metadata[METADATA_KEY]
        assert set(record) == EXPECTED_RECORD_KEYS
        assert record["strategy"] == "select_and_place" and record["rank"] == rank
        assert sorted(record["dropped"]) == dropped
        assert d is not docs[i] and d.metadata is not docs[i].metadata
        assert d.page_content == docs[i].page_content and d.id == docs[i].id
        assert {k: v for k, v in d.metadata.items() if k != METADATA_KEY} == docs[i].metadata
    return order


def compress(docs: list[Document], **options: Any) -> list[Document]:
    return list(SelectAndPlace(scorer=AloneScorer(), **options).compress_documents(docs, QUESTION))


def core_result(docs: list[Document], scorer: Any = None, **options: Any) -> Any:
    passages = [to_passage(d) for d in docs]
    return select_and_place(QUESTION, passages, scorer or AloneScorer(), **options)


# ---------------------------------------------------------------------- what is kept
def test_the_default_mass_keeps_three_and_places_the_likeliest_last() -> None:
    docs = make_docs(5)
    before = copy.deepcopy(docs)
    scorer = AloneScorer()
    out = list(SelectAndPlace(scorer=scorer).compress_documents(docs, QUESTION))
    assert check_record(out, docs) == LAST
    assert out[-1].page_content == GOLD
    assert [r["dropped"] for r in records(out)] == [DROPPED] * 3
    assert len(scorer.calls) == 1 and len(scorer.calls[0]) == 5  # N one-document prompts
    assert all(p.count("Document [") == 1 for p in scorer.calls[0])
    assert docs == before  # inputs untouched


def test_the_record_of_each_kept_document() -> None:
    docs = make_docs(5)
    out = compress(docs)
    core = core_result(docs)
    for r in records(out):
        i = r["original_rank"]
        assert r["score"] == pytest.approx(MEANS[i]) == core.scores[i]  # the MEAN, not the sum
        assert r["score"] != pytest.approx(math.log(WEIGHTS[i]))
        assert r["likelihood_rank"] == RANKED.index(i)
        assert (
            r["posterior"] == pytest.approx(WEIGHTS[i])
            and r["posterior"] == (core.details["posterior"][i])
        )
        assert r["dropped"] == DROPPED == core.details["dropped"]
    assert [r["likelihood_rank"] for r in records(out)] == [2, 1, 0]
    kept_mass = sum(r["posterior"] for r in records(out))
    assert kept_mass == pytest.approx(0.95) and kept_mass <= 1.0


@pytest.mark.parametrize(
    ("options", "order", "dropped"),
    [
        ({}, LAST, DROPPED),
        ({"top_n": 1}, [1], [3, 0, 4, 2]),
        ({"top_n": 2}, [3, 1], [0, 4, 2]),  # the smaller of mass's 3 and top_n
        ({"mass": 0.5}, [1], [3, 0, 4, 2]),  # 0.60 alone holds it
        ({"mass": 0.85}, [3, 1], [0, 4, 2]),  # exactly the top two's share
        ({"mass": None}, [2, 4, 0, 3, 1], []),  # all, by score, the best last
        ({"mass": 1.0}, [2, 4, 0, 3, 1], []),
        ({"mass": None, "top_n": 4}, [4, 0, 3, 1], [2]),
        ({"placement": "first"}, KEPT, DROPPED),  # the best first, then by falling score
        ({"mass": None, "placement": "first"}, RANKED, []),
        # three kept; this profile reads the middle best, then the end, then the start
        ({"placement": "profile", "profile": [0.2, 0.9, 0.5]}, [0, 1, 3], DROPPED),
    ],
)
def test_what_is_kept_dropped_and_where(
    options: dict[str, Any], order: list[int], dropped: list[int]
) -> None:
    docs = make_docs(5)
    out = compress(docs, **options)
    assert check_record(out, docs) == order
    assert all(r["dropped"] == dropped for r in records(out))
    assert [d.page_content for d in out] == [docs[i].page_content for i in order]


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
        {"placement": "profile", "profile": [0.1, 0.4, 0.2, 0.3, 0.5], "mass": None},
        {"template": "{search_results}\nQ: {question}\nA:"},
    ],
)
def test_the_result_is_the_core_functions(options: dict[str, Any]) -> None:
    docs = make_docs(5)
    out = compress(docs, **options)
    core = core_result(docs, **options)
    assert check_record(out, docs) == core.order
    assert [d.page_content for d in out] == [p.text for p in core.passages]
    assert [r["score"] for r in records(out)] == [core.scores[i] for i in core.order]
    assert [r["posterior"] for r in records(out)] == [
        core.details["posterior"][i] for i in core.order
    ]
    assert [r["likelihood_rank"] for r in records(out)] == [
        core.details["ranked"].index(i) for i in core.order
    ]
    assert all(r["dropped"] == core.details["dropped"] for r in records(out))
    assert sum(r["posterior"] for r in records(out)) <= 1.0 + 1e-12


def test_the_profile_component_places_down_the_profile() -> None:
    docs = make_docs(5)
    profile = PositionProfile([0.1, 0.9, 0.2])  # three kept: the middle reads best
    out = compress(docs, placement="profile", profile=profile)
    assert out[1].page_content == GOLD and records(out)[1]["likelihood_rank"] == 0


def test_metadata_key_none_returns_the_callers_documents() -> None:
    docs = make_docs(5)
    out = compress(docs, metadata_key=None)
    assert [id(d) for d in out] == [id(docs[i]) for i in LAST]
    assert all(METADATA_KEY not in d.metadata for d in out)


def test_fewer_than_two_documents_are_not_scored() -> None:
    scorer = AloneScorer()
    reorder = SelectAndPlace(scorer=scorer)
    assert reorder.compress_documents([], QUESTION) == []
    one = list(reorder.compress_documents(make_docs(1), QUESTION))
    assert records(one) == [
        {"strategy": "select_and_place", "score": None, "rank": 0, "original_rank": 0,
         "likelihood_rank": 0, "posterior": 1.0, "dropped": []}
    ]  # fmt: skip
    assert scorer.calls == []


def test_async_equals_sync() -> None:
    docs = make_docs(5)
    for options in ({}, {"top_n": 1}, {"mass": None, "placement": "first"}):
        reorder = SelectAndPlace(scorer=AloneScorer(), **options)
        sync = reorder.compress_documents(docs, QUESTION)
        asyn = asyncio.run(reorder.acompress_documents(docs, QUESTION))
        assert [(d.id, d.page_content, d.metadata) for d in sync] == [
            (d.id, d.page_content, d.metadata) for d in asyn
        ]


# ---------------------------------------------------------------------- options
def test_the_defaults_are_the_core_functions() -> None:
    fields = SelectAndPlace.model_fields
    assert fields["mass"].default == 0.9 and fields["top_n"].default is None
    assert fields["placement"].default == "last" and fields["profile"].default is None
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
        {"rest": "scores"},  # passage_likelihood's, not ours
    ],
)
def test_bad_options_are_refused_at_construction(options: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        SelectAndPlace(scorer=AloneScorer(), **options)


def test_bad_placement_and_model_are_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="profile"):
        SelectAndPlace(scorer=AloneScorer(), placement="profile")
    with pytest.raises(ValueError, match="profile"):
        SelectAndPlace(scorer=AloneScorer(), profile=[0.1, 0.2])  # placement="last"
    with pytest.raises(ValueError, match="scorer"):
        SelectAndPlace()
    with pytest.raises(TypeError, match="score"):
        SelectAndPlace(scorer=object())


# ---------------------------------------------------------------------- retrievers
class ListRetriever(BaseRetriever):
    docs: Any

    def _get_relevant_documents(self, query: str, *, run_manager: object) -> list[Document]:
        return list(self.docs)


def test_it_is_the_base_compressor_of_a_contextual_compression_retriever() -> None:
    docs = make_docs(5)
    before = copy.deepcopy(docs)
    retriever = ContextualCompressionRetriever(
        base_compressor=SelectAndPlace(scorer=AloneScorer()),
        base_retriever=ListRetriever(docs=docs),
    )
    out = retriever.invoke(QUESTION)
    assert check_record(out, docs) == LAST and out[-1].page_content == GOLD
    asyn = asyncio.run(retriever.ainvoke(QUESTION))
    assert [(d.id, d.metadata) for d in asyn] == [(d.id, d.metadata) for d in out]
    one = ContextualCompressionRetriever(
        base_compressor=SelectAndPlace(scorer=AloneScorer(), top_n=1),
        base_retriever=ListRetriever(docs=docs),
    ).invoke(QUESTION)
    assert [d.page_content for d in one] == [GOLD]
    assert docs == before


def test_the_position_aware_retriever_keeps_the_subset() -> None:
    assert COMPONENTS["select_and_place"] is SelectAndPlace
    assert COMPONENTS["select_and_place_profile"] is SelectAndPlace
    docs = make_docs(5)
    aware = PositionAwareRetriever(
        retriever=ListRetriever(docs=docs), strategy="select_and_place", scorer=AloneScorer()
    )
    assert isinstance(aware.reorderer, SelectAndPlace)
    out = aware.invoke(QUESTION)
    assert check_record(out, docs) == LAST
    aware = PositionAwareRetriever(
        retriever=ListRetriever(docs=docs),
        strategy="select_and_place",
        scorer=AloneScorer(),
        strategy_options={"top_n": 2},
    )
    out = asyncio.run(aware.ainvoke(QUESTION))
    assert check_record(out, docs) == [3, 1] and records(out)[0]["dropped"] == [0, 4, 2]
    aware = PositionAwareRetriever(
        retriever=ListRetriever(docs=docs),
        strategy="select_and_place_profile",
        scorer=AloneScorer(),
        strategy_options={"profile": [0.2, 0.9, 0.5]},
    )
    reorderer = aware.reorderer
    assert isinstance(reorderer, SelectAndPlace) and reorderer.placement == "profile"
    out = aware.invoke(QUESTION)
    assert check_record(out, docs) == [0, 1, 3] and out[1].page_content == GOLD


# ---------------------------------------------------------------------- the embedded model
@pytest.mark.slow
def test_on_the_embedded_model_it_equals_the_core_and_keeps_the_gold_last(lc_model: Any) -> None:
    docs = make_docs(4)  # Lyon, Paris, Berlin, Madrid
    out = list(SelectAndPlace(scorer=lc_model).compress_documents(docs, QUESTION))
    core = core_result(docs, lc_model)
    assert check_record(out, docs) == core.order
    assert [r["score"] for r in records(out)] == pytest.approx([core.scores[i] for i in core.order])
    assert [r["posterior"] for r in records(out)] == pytest.approx(
        [core.details["posterior"][i] for i in core.order]
    )
    assert records(out)[0]["dropped"] == core.details["dropped"]
    assert core.cost.lm_calls == 4
    assert out[-1].page_content == GOLD and records(out)[-1]["likelihood_rank"] == 0
    assert 1 <= len(out) < len(docs)  # a sure ranking: something is dropped
    assert sum(r["posterior"] for r in records(out)) <= 1 + 1e-9


# ---------------------------------------------------------------------- no shared lists
def test_a_single_documents_record_does_not_alias_the_registry_default() -> None:
    default = record_keys("select_and_place")["dropped"]
    out = SelectAndPlace(scorer=AloneScorer()).compress_documents(make_docs(1), QUESTION)
    assert out[0].metadata[METADATA_KEY]["dropped"] is not default


def test_each_kept_documents_dropped_list_is_its_own() -> None:
    out = SelectAndPlace(scorer=AloneScorer()).compress_documents(make_docs(5), QUESTION)
    lists = [d.metadata[METADATA_KEY]["dropped"] for d in out]
    assert len(lists) > 1 and len({id(x) for x in lists}) == len(lists)
