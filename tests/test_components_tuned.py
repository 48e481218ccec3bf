"""Tuned files in both frameworks: ``PositionAwareRetriever(tuned=...)`` and ``from_tuned``
build the strategy as configured by hand; damaged files and other models are reported."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
from framework_adapters import FRAMEWORKS, GOLD, Framework
from pydantic import ValidationError

import rag_position
import rag_position.models
from rag_position import DataFormatError, PositionProfile, TunedChoice
from rag_position.testing.scripted import ClosenessEmbedder, HashScorer
from rag_position.testing.tuned import example_file

pytestmark = pytest.mark.parametrize("fw", FRAMEWORKS)

PROFILE = PositionProfile((0.3, 0.1, 0.2, 0.6), model_name="named-model", source="eval")
tuned = example_file  # (folder, strategy, options, **field changes) -> the file


class NamedScorer(HashScorer):
    """A scripted scorer of a named model (a tuned file names the model it was made on)."""

    def __init__(self, name: str = "named-model") -> None:
        super().__init__()
        self.name = name


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
    ("profile", {"relevance": "passage_likelihood"}, PROFILE, "profile",
     {"profile": PROFILE, "relevance": "passage_likelihood"}),
    ("edge", {"mode": "haystack", "top_k": 4}, PROFILE, "edge",
     {"mode": "haystack", "top_k": 4}),
    ("edge", {"mode": "llamaindex"}, PROFILE, "edge", {"mode": "llamaindex"}),
]  # fmt: skip
IDS = [f"{c[0]}-{next(iter(c[1].values()))}" for c in CASES]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_tuned_equals_the_strategy_configured_by_hand(
    fw: Framework, tmp_path: Path, case: tuple[Any, ...]
) -> None:
    strategy, options, profile, by_hand, hand_options = case
    path = tuned(tmp_path, strategy, options, profile=profile)
    items = fw.items(5)
    scorer = NamedScorer()
    aware = fw.retriever(items, tuned=path, scorer=scorer)
    if by_hand != "edge":
        hand_options = {**hand_options, "scorer": scorer}
    hand = fw.retriever(items, by_hand, **hand_options)
    assert type(fw.reorderer(aware)) is type(fw.reorderer(hand))
    want = fw.outcome(fw.retrieve(hand))
    assert fw.outcome(fw.retrieve(aware)) == want
    assert isinstance(aware.tuned, TunedChoice) and aware.tuned.strategy == strategy
    component = fw.from_tuned(path, scorer)  # the same component without the retriever
    assert fw.outcome(fw.compress(component, fw.items(5))) == want


def test_a_file_keeping_similar_passages_embeds_as_tune_did(fw: Framework, tmp_path: Path) -> None:
    """``similar`` needs an embedder: the caller's, else the packaged one tune measured with."""
    path = tuned(tmp_path, "select_and_place", {"similar": 1})
    component = fw.components["select_and_place"]
    field = "embeddings" if "embeddings" in component.model_fields else "embed_model"
    assert getattr(fw.from_tuned(path, NamedScorer()), field) == "embedded"  # loaded on first use
    given = {field: ClosenessEmbedder([0.1, 0.2, 0.9, 0.3, 0.4])}
    want = fw.outcome(fw.compress(component(scorer=NamedScorer(), similar=1, **given), fw.items(5)))
    assert fw.outcome(fw.compress(fw.from_tuned(path, NamedScorer(), **given), fw.items(5))) == want
    aware = fw.retriever(fw.items(5), tuned=path, scorer=NamedScorer(), **given)
    assert fw.outcome(fw.retrieve(aware)) == want
    with pytest.raises((ValueError, TypeError), match=f"`similar` needs `{field}`"):  # as by hand
        fw.from_tuned(tuned(tmp_path, "select_and_place"), NamedScorer(), similar=1)


def test_retriever_keeps_the_given_order(fw: Framework, tmp_path: Path) -> None:
    items = fw.items(4)
    before = fw.snapshot(items)
    aware = fw.retriever(items, tuned=tuned(tmp_path, "retriever"))
    assert isinstance(fw.reorderer(aware), fw.given_order)
    out = fw.retrieve(aware)
    assert [fw.ident(x) for x in out] == [f"id-{i}" for i in range(4)]
    assert fw.records(out) == [
        {"strategy": "retriever", "score": None, "rank": i, "original_rank": i} for i in range(4)
    ]
    assert [fw.score(x) for x in out] == [fw.score(x) for x in items]
    before.check()  # inputs untouched


@pytest.mark.parametrize(
    "case",
    [
        ("passage_likelihood", {"placement": "last"}, {"placement": "first"},
         r"sets placement='last' \(given 'first'\)", 5),
        ("select_and_place", {"top_n": 2}, {"top_n": 3}, r"sets top_n=2 \(given 3\)", 2),
    ],
    ids=["placement", "top_n"],
)  # fmt: skip
def test_a_conflicting_strategy_is_an_error(
    fw: Framework, tmp_path: Path, case: tuple[Any, ...]
) -> None:
    strategy, options, other, conflict, n = case
    path = tuned(tmp_path, strategy, options)
    items = fw.items(5)
    with pytest.raises(ValueError, match=rf"`tuned` sets the strategy.*'{strategy}'.*'edge'"):
        fw.retriever(items, "edge", tuned=path)
    with pytest.raises(ValueError, match="a EdgeReorder"):
        fw.retriever(items, fw.component("EdgeReorder"), tuned=path)
    same = fw.retriever(items, strategy, tuned=path, scorer=NamedScorer())
    by_hand = fw.component(fw.components[strategy].__name__, scorer=NamedScorer(), **options)
    assert type(fw.reorderer(same)) is type(by_hand)
    out = fw.retrieve(same)
    assert len(out) == n and fw.outcome(out) == fw.outcome(fw.compress(by_hand, items))
    with pytest.raises(ValueError, match=conflict):
        fw.retriever(items, tuned=path, scorer=NamedScorer(), **other)
    framework = fw.retriever(items, tuned=path, scorer=NamedScorer(), metadata_key="pos",
                             **options)  # fmt: skip
    assert "pos" in fw.metadata(fw.retrieve(framework)[0])


def test_a_damaged_or_missing_file_gives_read_tuneds_error(fw: Framework, tmp_path: Path) -> None:
    items = fw.items(3)
    missing = tmp_path / "nope.json"
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "rag-position/tuned", "version": 9}', encoding="utf-8")
    keys = tmp_path / "keys.json"
    keys.write_text('{"format": "rag-position/tuned", "version": 1, "strategy": "x"}', "utf-8")

    def folder(name: str) -> Path:
        (tmp_path / name).mkdir()
        return tmp_path / name

    for path, error, match in [
        (missing, DataFormatError, r"nope\.json' does not exist"),
        (bad, DataFormatError, r"bad\.json.*reads version 1"),
        (keys, DataFormatError, r"keys\.json.*missing keys"),
        (tuned(folder("recite"), "recite"), ValueError, "'recite' answers the question"),
        (tuned(folder("sandwich"), "sandwich"), ValueError, "'sandwich' rewrites the prompt"),
    ]:
        with pytest.raises(error, match=match):
            fw.retriever(items, tuned=path)
        with pytest.raises(error, match=match):
            fw.from_tuned(path)


def test_another_model_warns_naming_both(
    fw: Framework, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tuned(tmp_path, "passage_likelihood")
    items = fw.items(3)
    with pytest.warns(UserWarning, match=r"'named-model'.*'embedded:gemma3-270m'"):
        fw.retriever(items, tuned=path, scorer=NamedScorer("embedded:gemma3-270m"))
    with pytest.warns(UserWarning, match=r"'named-model'.*'embedded:gemma3-270m'"):
        fw.from_tuned(path, NamedScorer("embedded:gemma3-270m"))
    loads: list[tuple[str, dict[str, Any]]] = []

    def load_model(spec: str, **kwargs: Any) -> NamedScorer:
        loads.append((spec, kwargs))
        return NamedScorer("hf:/models/other" if spec.startswith("hf:") else "named-model")

    monkeypatch.setattr(rag_position.models, "load_model", load_model)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # no scorer: the file's spec, loaded on first use with the file's dtype
        own = fw.retriever(items, tuned=path)
        assert loads == []
        fw.retrieve(own)
        # the file's own spec string: not compared
        fw.retrieve(fw.retriever(items, tuned=path, scorer="embedded"))
        assert loads == [("embedded", {"dtype": "float32"}), ("embedded", {})]
        # another spec string: compared once loaded
        other = fw.retriever(items, tuned=path, scorer="hf:/models/other")
    with pytest.warns(UserWarning, match=r"'named-model'.*'hf:/models/other'"):
        fw.retrieve(other)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fw.retrieve(other)  # once
    assert isinstance(fw.reorderer(own), fw.package.PassageLikelihoodReorder)


@pytest.mark.filterwarnings("error")
def test_a_scorer_is_ignored_by_a_strategy_without_a_model(fw: Framework, tmp_path: Path) -> None:
    aware = fw.retriever(fw.items(3), tuned=tuned(tmp_path, "edge"), scorer=NamedScorer("other"))
    assert isinstance(fw.reorderer(aware), fw.package.EdgeReorder)


@pytest.mark.slow
def test_tuned_on_the_embedded_model(fw: Framework, tmp_path: Path, embedded_fp32: Any) -> None:
    model = embedded_fp32
    path = tuned(tmp_path, "passage_likelihood", {"placement": "last"}, model=model.name)
    items = fw.items(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # the file's model: no warning
        got = fw.retrieve(fw.retriever(items, tuned=path, scorer=model))
    by_hand = fw.component("PassageLikelihoodReorder", scorer=model, placement="last")
    assert fw.outcome(got) == fw.outcome(fw.compress(by_hand, fw.items(3)))
    assert fw.text(got[-1]) == GOLD and fw.ident(got[-1]) == "id-1"  # the likeliest, last


SERVER = "openai:http://127.0.0.1:9/v1/m"


def test_a_files_server_spec_needs_consent(
    fw: Framework, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tuned file's openai: spec received the questions, passages and API key."""
    loads: list[str] = []
    monkeypatch.setattr(rag_position.models, "load_model",
                        lambda spec, **kwargs: loads.append(spec) or NamedScorer())  # fmt: skip
    path = tuned(tmp_path, "passage_likelihood", spec=SERVER)
    items = fw.items(3)
    with pytest.raises(rag_position.ModelSpecError, match="trust_spec=True"):
        fw.from_tuned(path)
    with pytest.raises(rag_position.ModelSpecError, match="trust_spec=True") as caught:
        fw.retriever(items, tuned=path)
    assert not isinstance(caught.value, ValidationError)  # the file's own message, unwrapped
    assert loads == []
    fw.compress(fw.from_tuned(path, trust_spec=True), fw.items(3))
    fw.retrieve(fw.retriever(items, tuned=path, trust_spec=True))
    fw.retrieve(fw.retriever(items, tuned=path, scorer=SERVER))  # named
    assert loads == [SERVER, SERVER, SERVER]
