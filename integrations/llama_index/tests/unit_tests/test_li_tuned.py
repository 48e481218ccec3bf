"""Tuned files in LlamaIndex: ``PositionAwareRetriever(tuned=...)`` and ``from_tuned``.

A tuned file builds the same postprocessor, with the same options, as configuring its
strategy by hand: the same nodes, order and records (scripted scorers). Damaged files
give ``read_tuned``'s own error; a scorer of another model gives a warning.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
from li_testkit import DOCS, GoldAtEdgesScorer, make_nodes
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.postprocessor.rag_position import (
    METADATA_KEY,
    EdgeReorder,
    PassageLikelihoodReorder,
    PositionAwareRetriever,
    SelectAndPlace,
    from_tuned,
)
from llama_index.postprocessor.rag_position.base import GivenOrder

import rag_position
import rag_position.models
from rag_position import DataFormatError, PositionProfile
from rag_position.testing.tuned import example_file

QUESTION = "Who wrote Hamlet?"
TEXTS = [f"{text} ({i})" for i, (_, text) in enumerate(DOCS)]
PROFILE = PositionProfile((0.3, 0.1, 0.2, 0.6), model_name="named-model", source="eval")


class NamedScorer(GoldAtEdgesScorer):
    def __init__(self, name: str = "named-model") -> None:
        super().__init__(TEXTS, TEXTS[1])
        self.name = name


class ListRetriever(BaseRetriever):
    def __init__(self, nodes: list[NodeWithScore]) -> None:
        self.nodes = nodes
        super().__init__()

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return list(self.nodes)


tuned = example_file  # (folder, strategy, options, **field changes) -> the file


def records(nodes: list[NodeWithScore]) -> list[dict[str, Any]]:
    return [n.node.metadata[METADATA_KEY] for n in nodes]


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
    ("profile", {"relevance": "passage_likelihood"}, PROFILE, "profile",
     {"profile": PROFILE, "relevance": "passage_likelihood"}),
    ("edge", {"mode": "llamaindex"}, PROFILE, "edge", {"mode": "llamaindex"}),
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
    nodes = make_nodes()
    scorer = NamedScorer()
    aware = PositionAwareRetriever(ListRetriever(nodes), tuned=path, scorer=scorer)
    if by_hand != "edge":
        hand_options = {**hand_options, "scorer": scorer}
    hand = PositionAwareRetriever(ListRetriever(nodes), by_hand, **hand_options)
    assert type(aware.postprocessor) is type(hand.postprocessor)
    got, want = aware.retrieve(QUESTION), hand.retrieve(QUESTION)
    assert [n.node.node_id for n in got] == [n.node.node_id for n in want]
    assert records(got) == records(want)
    assert aware.tuned is not None and aware.tuned.strategy == strategy
    postprocessor = from_tuned(path, scorer)  # the same postprocessor without the retriever
    assert records(postprocessor.postprocess_nodes(make_nodes(), query_str=QUESTION)) == (
        records(want)
    )


def test_retriever_keeps_the_given_order(tmp_path: Path) -> None:
    nodes = make_nodes()
    aware = PositionAwareRetriever(ListRetriever(nodes), tuned=tuned(tmp_path, "retriever"))
    assert isinstance(aware.postprocessor, GivenOrder)
    out = aware.retrieve(QUESTION)
    assert [n.node.node_id for n in out] == [f"node-{i}" for i in range(4)]
    assert records(out) == [
        {"strategy": "retriever", "score": None, "rank": i, "original_rank": i} for i in range(4)
    ]
    assert [n.score for n in out] == [n.score for n in nodes]


def test_a_conflicting_strategy_is_an_error(tmp_path: Path) -> None:
    path = tuned(tmp_path, "select_and_place", {"top_n": 2})
    base = ListRetriever(make_nodes())
    with pytest.raises(ValueError, match=r"`tuned` sets the strategy.*'select_and_place'.*'edge'"):
        PositionAwareRetriever(base, "edge", tuned=path)
    with pytest.raises(ValueError, match="a EdgeReorder"):
        PositionAwareRetriever(base, EdgeReorder(), tuned=path)
    same = PositionAwareRetriever(base, "select_and_place", tuned=path, scorer=NamedScorer())
    assert isinstance(same.postprocessor, SelectAndPlace)
    assert len(same.retrieve(QUESTION)) == 2
    with pytest.raises(ValueError, match=r"sets top_n=2 \(given 3\)"):
        PositionAwareRetriever(base, tuned=path, scorer=NamedScorer(), top_n=3)
    framework = PositionAwareRetriever(
        base, tuned=path, scorer=NamedScorer(), metadata_key="pos", replace_score=True
    )
    out = framework.retrieve(QUESTION)
    assert "pos" in out[0].node.metadata and out[0].score == out[0].node.metadata["pos"]["score"]


def test_a_damaged_or_missing_file_gives_read_tuneds_error(tmp_path: Path) -> None:
    base = ListRetriever(make_nodes())
    missing = tmp_path / "nope.json"
    with pytest.raises(DataFormatError, match=r"nope\.json' does not exist"):
        PositionAwareRetriever(base, tuned=missing)
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "rag-position/tuned", "version": 1, "strategy": "x"}', "utf-8")
    with pytest.raises(DataFormatError, match=r"bad\.json.*missing keys"):
        from_tuned(bad)
    sandwich = tuned(tmp_path, "sandwich")
    with pytest.raises(ValueError, match="'sandwich' rewrites the prompt"):
        PositionAwareRetriever(base, tuned=sandwich)


def test_another_model_warns_naming_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tuned(tmp_path, "passage_likelihood")
    with pytest.warns(UserWarning, match=r"'named-model'.*'embedded:gemma3-270m'"):
        from_tuned(path, NamedScorer("embedded:gemma3-270m"))
    loads: list[tuple[str, dict[str, Any]]] = []

    def load_model(spec: str, **kwargs: Any) -> NamedScorer:
        loads.append((spec, kwargs))
        return NamedScorer("hf:/models/other" if spec.startswith("hf:") else "named-model")

    monkeypatch.setattr(rag_position.models, "load_model", load_model)
    base = ListRetriever(make_nodes())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        own = PositionAwareRetriever(base, tuned=path)  # the file's spec, on first use
        assert loads == []
        own.retrieve(QUESTION)
        PositionAwareRetriever(base, tuned=path, scorer="embedded").retrieve(QUESTION)
        assert loads == [("embedded", {"dtype": "float32"}), ("embedded", {})]
        other = PositionAwareRetriever(base, tuned=path, scorer="hf:/models/other")
    with pytest.warns(UserWarning, match=r"'named-model'.*'hf:/models/other'"):
        other.retrieve(QUESTION)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        other.retrieve(QUESTION)  # once
    assert isinstance(own.postprocessor, PassageLikelihoodReorder)


@pytest.mark.slow
def test_tuned_on_the_embedded_model(tmp_path: Path, li_model: Any) -> None:
    path = tuned(tmp_path, "passage_likelihood", {"placement": "last"}, model=li_model.name)
    nodes = make_nodes(n=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # the file's model: no warning
        aware = PositionAwareRetriever(ListRetriever(nodes), tuned=path, scorer=li_model)
        got = aware.retrieve(QUESTION)
    want = PassageLikelihoodReorder(scorer=li_model, placement="last").postprocess_nodes(
        make_nodes(n=3), query_str=QUESTION
    )
    assert records(got) == records(want)
    assert got[-1].node.node_id == "node-1"  # Hamlet's, the likeliest, last


# ---------------------------------------------------------------------- the file's model spec
SERVER = "openai:http://127.0.0.1:9/v1/m"


def test_a_files_server_spec_needs_consent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tuned file's openai: spec received the questions, passages and API key."""
    loads: list[str] = []
    monkeypatch.setattr(rag_position.models, "load_model",
                        lambda spec, **kwargs: loads.append(spec) or NamedScorer())  # fmt: skip
    path = tuned(tmp_path, "passage_likelihood", spec=SERVER)
    base = ListRetriever(make_nodes())
    with pytest.raises(rag_position.ModelSpecError, match="trust_spec=True"):
        from_tuned(path)
    with pytest.raises(rag_position.ModelSpecError, match="trust_spec=True"):
        PositionAwareRetriever(base, tuned=path)
    assert loads == []
    from_tuned(path, trust_spec=True).postprocess_nodes(make_nodes(), query_str=QUESTION)
    PositionAwareRetriever(base, tuned=path, trust_spec=True).retrieve(QUESTION)
    PositionAwareRetriever(base, tuned=path, scorer=SERVER).retrieve(QUESTION)  # named
    assert loads == [SERVER, SERVER, SERVER]
