"""Tuned files in LangChain: ``PositionAwareRetriever(tuned=...)`` and ``from_tuned``.

A tuned file builds the same compressor, with the same options, as configuring its
strategy by hand: the same documents, order and records (scripted scorers). Damaged
files give ``read_tuned``'s own error; a scorer of another model gives a warning.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_rag_position import (
    METADATA_KEY,
    EdgeReorder,
    PassageLikelihoodReorder,
    PositionAwareRetriever,
    from_tuned,
)
from langchain_rag_position.compressors import GivenOrder
from lc_testkit import QUESTION, GoldScorer, make_docs
from pydantic import ValidationError

import rag_position
import rag_position.models
from rag_position import DataFormatError, PositionProfile, TunedChoice
from rag_position.testing.tuned import example_file

GOLD = "Paris is the capital of France."
PROFILE = PositionProfile((0.3, 0.1, 0.2, 0.6), model_name="named-model", source="eval")


class NamedScorer(GoldScorer):
    def __init__(self, name: str = "named-model") -> None:
        super().__init__(GOLD)
        self.name = name


class ListRetriever(BaseRetriever):
    docs: Any

    def _get_relevant_documents(self, query: str, *, run_manager: object) -> list[Document]:
        return list(self.docs)


tuned = example_file  # (folder, strategy, options, **field changes) -> the file


def records(docs: list[Document]) -> list[dict[str, Any]]:
    return [d.metadata[METADATA_KEY] for d in docs]


# strategy in the file, its options and profile; the same configured by hand
CASES: list[tuple[str, dict[str, Any], PositionProfile | None, str, dict[str, Any]]] = [
    ("passage_likelihood", {"placement": "last"}, None, "passage_likelihood",
     {"placement": "last"}),
    ("passage_likelihood_profile", {"rest": "keep"}, PROFILE, "passage_likelihood_profile",
     {"rest": "keep", "profile": PROFILE}),
    ("select_and_place_profile", {"top_n": 3}, PROFILE, "select_and_place",
     {"top_n": 3, "placement": "profile", "profile": PROFILE}),
    ("likelihood_selection", {"n_orders": 3, "seed": 5}, None, "likelihood_selection",
     {"n_orders": 3, "seed": 5}),
    ("convex_score_profile", {"n_base_orders": 1}, PROFILE, "convex_score",
     {"n_base_orders": 1, "placement": "profile", "profile": PROFILE}),
    ("profile", {"relevance": "convex_score", "n_base_orders": 1, "seed": 3}, PROFILE,
     "profile", {"profile": PROFILE, "relevance": "convex_score",
                 "convex_options": {"n_base_orders": 1, "seed": 3}}),
    ("edge", {"mode": "haystack", "top_k": 4}, PROFILE, "edge",
     {"mode": "haystack", "top_k": 4}),
]  # fmt: skip


@pytest.mark.parametrize(("strategy", "options", "profile", "by_hand", "hand_options"), CASES,
                         ids=[c[0] for c in CASES])  # fmt: skip
def test_tuned_equals_the_strategy_configured_by_hand(
    tmp_path: Path,
    strategy: str,
    options: dict[str, Any],
    profile: PositionProfile | None,
    by_hand: str,
    hand_options: dict[str, Any],
) -> None:
    path = tuned(tmp_path, strategy, options, profile=profile)
    docs = make_docs(5)
    scorer = NamedScorer()
    aware = PositionAwareRetriever(retriever=ListRetriever(docs=docs), tuned=path, scorer=scorer)
    scores = by_hand not in ("edge",)
    hand = PositionAwareRetriever(
        retriever=ListRetriever(docs=docs),
        strategy=by_hand,
        scorer=scorer if scores else None,
        strategy_options=hand_options,
    )
    assert type(aware.reorderer) is type(hand.reorderer)
    got, want = aware.invoke(QUESTION), hand.invoke(QUESTION)
    assert [d.page_content for d in got] == [d.page_content for d in want]
    assert records(got) == records(want)
    assert isinstance(aware.tuned, TunedChoice) and aware.tuned.strategy == strategy
    compressor = from_tuned(path, scorer)  # the same compressor without the retriever
    assert records(list(compressor.compress_documents(docs, QUESTION))) == records(want)


def test_retriever_keeps_the_given_order(tmp_path: Path) -> None:
    docs = make_docs(4)
    aware = PositionAwareRetriever(
        retriever=ListRetriever(docs=docs), tuned=tuned(tmp_path, "retriever"), k=3
    )
    assert isinstance(aware.reorderer, GivenOrder)
    out = aware.invoke(QUESTION)
    assert [d.id for d in out] == ["id-0", "id-1", "id-2"]
    assert records(out) == [
        {"strategy": "retriever", "score": None, "rank": i, "original_rank": i} for i in range(3)
    ]
    assert docs[0].metadata.get(METADATA_KEY) is None  # inputs untouched


def test_a_conflicting_strategy_is_an_error(tmp_path: Path) -> None:
    path = tuned(tmp_path, "passage_likelihood", {"placement": "last"})
    base = ListRetriever(docs=make_docs(3))
    with pytest.raises(
        ValueError, match=r"`tuned` sets the strategy.*'passage_likelihood'.*'edge'"
    ):
        PositionAwareRetriever(retriever=base, tuned=path, strategy="edge")
    with pytest.raises(ValueError, match="a EdgeReorder"):
        PositionAwareRetriever(retriever=base, tuned=path, strategy=EdgeReorder())
    same = PositionAwareRetriever(
        retriever=base, tuned=path, strategy="passage_likelihood", scorer=NamedScorer()
    )
    assert isinstance(same.reorderer, PassageLikelihoodReorder)
    with pytest.raises(ValueError, match=r"sets placement='last' \(given 'first'\)"):
        PositionAwareRetriever(
            retriever=base, tuned=path, scorer=NamedScorer(),
            strategy_options={"placement": "first"},
        )  # fmt: skip
    framework = PositionAwareRetriever(
        retriever=base, tuned=path, scorer=NamedScorer(),
        strategy_options={"metadata_key": "pos", "placement": "last"},
    )  # fmt: skip
    assert "pos" in framework.invoke(QUESTION)[0].metadata


def test_a_damaged_or_missing_file_gives_read_tuneds_error(tmp_path: Path) -> None:
    base = ListRetriever(docs=make_docs(3))
    missing = tmp_path / "nope.json"
    with pytest.raises(DataFormatError, match=r"nope\.json' does not exist"):
        PositionAwareRetriever(retriever=base, tuned=missing)
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "rag-position/tuned", "version": 9}', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"bad\.json.*reads version 1"):
        PositionAwareRetriever(retriever=base, tuned=bad)
    with pytest.raises(DataFormatError, match="does not exist"):
        from_tuned(missing)
    answers = tuned(tmp_path, "recite")
    with pytest.raises(ValueError, match="'recite' answers the question"):
        from_tuned(answers)


def test_another_model_warns_naming_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tuned(tmp_path, "passage_likelihood")
    base = ListRetriever(docs=make_docs(3))
    with pytest.warns(UserWarning, match=r"'named-model'.*'embedded:gemma3-270m'"):
        PositionAwareRetriever(
            retriever=base, tuned=path, scorer=NamedScorer("embedded:gemma3-270m")
        )
    loads: list[tuple[str, dict[str, Any]]] = []

    def load_model(spec: str, **kwargs: Any) -> NamedScorer:
        loads.append((spec, kwargs))
        return NamedScorer("hf:/models/other" if spec.startswith("hf:") else "named-model")

    monkeypatch.setattr(rag_position.models, "load_model", load_model)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # no scorer: the file's spec, loaded on first use with the file's dtype
        own = PositionAwareRetriever(retriever=base, tuned=path)
        assert loads == []
        own.invoke(QUESTION)
        # the file's own spec string: not compared
        PositionAwareRetriever(retriever=base, tuned=path, scorer="embedded").invoke(QUESTION)
        assert loads == [("embedded", {"dtype": "float32"}), ("embedded", {})]
        # another spec string: compared once loaded
        other = PositionAwareRetriever(retriever=base, tuned=path, scorer="hf:/models/other")
    with pytest.warns(UserWarning, match=r"'named-model'.*'hf:/models/other'"):
        other.invoke(QUESTION)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        other.invoke(QUESTION)  # once


def test_a_scorer_is_ignored_by_a_strategy_without_a_model(tmp_path: Path) -> None:
    base = ListRetriever(docs=make_docs(3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        aware = PositionAwareRetriever(
            retriever=base, tuned=tuned(tmp_path, "edge"), scorer=NamedScorer("other")
        )
    assert isinstance(aware.reorderer, EdgeReorder)


@pytest.mark.slow
def test_tuned_on_the_embedded_model(tmp_path: Path, lc_model: Any) -> None:
    path = tuned(tmp_path, "passage_likelihood", {"placement": "last"}, model=lc_model.name)
    docs = make_docs(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # the file's model: no warning
        aware = PositionAwareRetriever(
            retriever=ListRetriever(docs=docs), tuned=path, scorer=lc_model
        )
        got = aware.invoke(QUESTION)
    want = PassageLikelihoodReorder(scorer=lc_model, placement="last").compress_documents(
        docs, QUESTION
    )
    assert records(got) == records(list(want))
    assert got[-1].page_content == GOLD


# ---------------------------------------------------------------------- the file's model spec
SERVER = "openai:http://127.0.0.1:9/v1/m"


def test_a_files_server_spec_needs_consent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tuned file's openai: spec received the questions, passages and API key."""
    loads: list[str] = []
    monkeypatch.setattr(rag_position.models, "load_model",
                        lambda spec, **kwargs: loads.append(spec) or NamedScorer())  # fmt: skip
    path = tuned(tmp_path, "passage_likelihood", spec=SERVER)
    base = ListRetriever(docs=make_docs(3))
    with pytest.raises(rag_position.ModelSpecError, match="trust_spec=True"):
        from_tuned(path)
    with pytest.raises(rag_position.ModelSpecError, match="trust_spec=True") as caught:
        PositionAwareRetriever(retriever=base, tuned=path)
    assert not isinstance(caught.value, ValidationError)  # the file's own message, unwrapped
    assert loads == []
    from_tuned(path, trust_spec=True).compress_documents(make_docs(3), QUESTION)
    PositionAwareRetriever(retriever=base, tuned=path, trust_spec=True).invoke(QUESTION)
    PositionAwareRetriever(retriever=base, tuned=path, scorer=SERVER).invoke(QUESTION)  # named
    assert loads == [SERVER, SERVER, SERVER]
