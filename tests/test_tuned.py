"""Tuned files (rag_position.tuned): the format, its checks, and load_tuned: a tuned
reorderer is its strategy row called with the file's options (scripted scorers; one slow
test on the embedded model)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

import rag_position
import rag_position._tuned_run as tuned_module
from rag_position import (
    STRATEGIES,
    DataFormatError,
    OrderingResult,
    PositionProfile,
    TunedChoice,
    load_tuned,
    read_tuned,
)
from rag_position.testing.scripted import HashScorer
from rag_position.testing.tuned import example_choice
from rag_position.tuned import FORMAT, VERSION

QUESTION = "What is the capital of France?"
PASSAGES = [
    "Berlin is the capital of Germany.",
    "Paris is the capital of France.",
    "The Nile is a river in Africa.",
    "Mount Everest is the highest mountain.",
    "Madrid is the capital of Spain.",
]
PROFILE = PositionProfile((0.3, 0.1, 0.2, 0.6), model_name="named-model", source="eval")
EVIDENCE = (
    {"strategy": "retriever", "n": 60, "accuracy": 20.0, "low": 11.8, "high": 31.8,
     "wins": None, "losses": None, "p_value": None, "tokens_per_question": 1043.5,
     "eligible": True},
    {"strategy": "passage_likelihood", "n": 60, "accuracy": 35.0, "low": 24.2,
     "high": 47.6, "wins": 12, "losses": 3, "p_value": 0.035,
     "tokens_per_question": 2101.0},
)  # fmt: skip


class NamedScorer(HashScorer):
    def __init__(self, name: str = "named-model") -> None:
        super().__init__()
        self.name = name


def choice(strategy: str = "passage_likelihood", **changes: Any) -> TunedChoice:
    return example_choice(strategy, **{"evidence": EVIDENCE, **changes})


def record(**changes: Any) -> dict[str, Any]:
    return {**choice().to_dict(), **changes}


# ---------------------------------------------------------------------- the format
def test_round_trip(tmp_path: Path) -> None:
    questions = {"data": "multidoc.jsonl.gz", "first": 100, "n": 60, "first_id": "q1"}
    made = choice(
        "passage_likelihood_profile", options={"rest": "keep"}, profile=PROFILE, questions=questions
    )
    (tmp_path / "tuned.json").write_text("old", encoding="utf-8")  # replaced
    path = made.write(tmp_path / "tuned.json")
    assert path == tmp_path / "tuned.json"
    assert [p.name for p in tmp_path.iterdir()] == ["tuned.json"]  # no temporary file left
    stored = json.loads(path.read_text(encoding="utf-8"))
    assert stored == made.to_dict() and list(stored) == [
        "format", "version", "model", "spec", "dtype", "strategy", "options", "profile",
        "evidence", "questions", "command", "created", "rag_position",
    ]  # fmt: skip
    assert stored["format"] == FORMAT == "rag-position/tuned" and stored["version"] == VERSION
    assert stored["profile"] == PROFILE.to_dict() and stored["questions"] == questions
    assert stored["rag_position"] == rag_position.__version__
    assert stored["evidence"][0]["eligible"] is True  # extra keys are kept
    back = read_tuned(path)
    assert back == made and back.profile == PROFILE and back.options == {"rest": "keep"}
    assert back.row is STRATEGIES["passage_likelihood_profile"]
    assert read_tuned(str(path)).to_dict() == stored


def test_the_constructor_reads_options_as_the_row_reads_them_and_checks_them() -> None:
    made = choice("medoid", options={"absence_phrases": ["unknown"], "n_orders": 2})
    assert made.options == {"absence_phrases": ["unknown"], "n_orders": 2}
    assert type(made.options["n_orders"]) is int
    assert made.to_dict()["options"] == {"absence_phrases": ["unknown"], "n_orders": 2}
    assert choice("select_and_place", options={"mass": 1}).options == {"mass": 1}  # an int
    with pytest.raises(ValueError, match=r"unknown strategy 'nope'; accepted: .*edge"):
        choice("nope")
    with pytest.raises(ValueError, match="takes no option 'n_orders'"):
        choice("edge", options={"n_orders": 3})


NO_FILE, FOLDER = "<no file>", "<a folder>"
DAMAGED: list[tuple[str, Any, str]] = [
    ("no file", NO_FILE, r"tuned\.json' does not exist; write one with "),
    ("a folder", FOLDER, "is a folder"),
    ("not UTF-8", b"\xff\xfe{", "not UTF-8"),
    ("not JSON", "{", "is not JSON"),
    ("a list", [1, 2], "holds a JSON object, got a list"),
    ("another format", record(format="rag-position/profile"), "not a rag-position tuned file"),
    ("no format", {"version": 1}, "not a rag-position tuned file"),
    ("version 2", record(version=2), r"version 2: this rag-position \(.*\) reads version 1"),
    ("version as text", record(version="1"), "reads version 1"),
    ("a missing key", {k: v for k, v in record().items() if k != "evidence"}, "missing keys: "
     "evidence"),
    ("an unknown key", record(note="x"), "unknown keys: note"),
    ("an unknown strategy", record(strategy="best"), "unknown strategy 'best'; accepted: "
     "convex_score, .*passage_likelihood, .*select_and_place_profile"),
    ("an unknown option", record(options={"n_orders": 3}), "strategy 'passage_likelihood' "
     "takes no option 'n_orders'; its options: placement, rest, template"),
    ("a fixed option", record(strategy="passage_likelihood_profile", profile=PROFILE.to_dict(),
     options={"placement": "last"}), "sets placement='profile' itself"),
    ("profile among the options", record(options={"profile": [1, 2]}), "its own key"),
    ("a refused value", record(options={"placement": "middle"}), "refuses its options: option "
     "`placement`: .*'middle'.*; its options: placement, rest, template"),
    ("a refused number", record(strategy="select_and_place", options={"top_n": 0}),
     "option `top_n`: Input should be greater than or equal to 1"),
    ("options not an object", record(options=[]), "`options` must be an object"),
    ("a bad profile", record(strategy="passage_likelihood_profile",
     profile={"model": "m", "n_positions": 3, "values": [1, 2], "source": "eval"}),
     "bad `profile`: `values` must be a list of n_positions=3"),
    ("a profile missing keys", record(profile={"values": [1.0]}), "bad `profile`: .*keys"),
    ("a profile not an object", record(profile=[0.1, 0.9]), "`profile` must be a PositionProfile"),
    ("no profile for a profile row", record(strategy="select_and_place_profile"),
     "places by a position profile, and `profile` is null"),
    ("no profile for placement=profile", record(options={"placement": "profile"}),
     "places by a position profile"),
    ("a bad dtype", record(dtype="int8"),
     "`dtype`: Input should be 'bfloat16', 'float16' or 'float32' \\(got 'int8'\\)"),
    ("an empty spec", record(spec=""), "`spec` must be a non-empty string"),
    ("evidence not a list", record(evidence={}), "`evidence` must be a list"),
    ("evidence missing a key", record(evidence=[{"strategy": "edge"}]), r"`evidence\[0\]` "
     "lacks n, accuracy"),
    ("evidence of the wrong type", record(evidence=[{**EVIDENCE[1], "n": "60"}]),
     r"`evidence\[0\].n`: Input should be a valid integer \(got '60'\)"),
    ("questions missing a key", record(questions={"data": "x", "n": 3}), "`questions` lacks first"),
    ("a negative question count", record(questions={"data": "x", "first": 0, "n": -1}),
     "`questions.n`: Input should be greater than or equal to 0"),
    ("a bad time", record(created="yesterday"), "`created` must be an ISO 8601 time"),
    # numbers are numbers (issue 42): no text, no bool, no float for an integer
    ("a number as text", record(strategy="select_and_place", options={"mass": "0.5"}),
     "option `mass`: Input should be a valid number"),
    ("a bool for a number", record(strategy="select_and_place", options={"mass": True}),
     "option `mass`: Input should be a valid number"),
    ("a bool for an integer", record(strategy="select_and_place", options={"top_n": True}),
     "option `top_n`: Input should be a valid integer"),
    ("a float for an integer", record(strategy="select_and_place", options={"top_n": 2.0}),
     "option `top_n`: Input should be a valid integer"),
    ("an integer as text", record(strategy="select_and_place", options={"top_n": "2"}),
     "option `top_n`: Input should be a valid integer"),
    ("a profile value as text", record(strategy="passage_likelihood_profile",
     profile={**PROFILE.to_dict(), "values": ["0.3", 0.1, 0.2, 0.6]}),
     "bad `profile`: `values` must be a list of n_positions=4 numbers"),
    ("a profile value as a bool", record(strategy="passage_likelihood_profile",
     profile={**PROFILE.to_dict(), "values": [True, 0.1, 0.2, 0.6]}),
     "bad `profile`: `values` must be a list of n_positions=4 numbers"),
    ("n_positions as a float", record(strategy="passage_likelihood_profile",
     profile={**PROFILE.to_dict(), "n_positions": 4.0}),
     "bad `profile`: `n_positions` must be an integer"),
    ("a profile with an unknown key", record(strategy="passage_likelihood_profile",
     profile={**PROFILE.to_dict(), "format": 999}), "bad `profile`: unknown key"),
    # refused when read, not when first used (issue 42)
    ("an unknown model spec", record(spec="gpt-4o"), "unknown model spec 'gpt-4o'"),
    ("a template without the question", record(options={"template": "{search_results}"}),
     "option `template`: .*question"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "content", "message"), DAMAGED, ids=[d[0] for d in DAMAGED])
def test_a_damaged_file_says_what_is_wrong(
    tmp_path: Path, case: str, content: Any, message: str
) -> None:
    path = tmp_path / "tuned.json"
    if content == FOLDER:
        path.mkdir()
    elif content != NO_FILE:
        text = content if isinstance(content, (str, bytes)) else json.dumps(content)
        path.write_bytes(text.encode() if isinstance(text, str) else text)
    with pytest.raises(DataFormatError, match=message) as caught:
        read_tuned(path)
    assert str(path) in str(caught.value)
    with pytest.raises(ValueError, match=message):  # the same from load_tuned
        load_tuned(path)


def test_a_profile_for_a_row_without_profile_placement_is_kept_not_used(tmp_path: Path) -> None:
    made = choice("edge", profile=PROFILE)
    assert read_tuned(made.write(tmp_path / "t.json")).profile == PROFILE
    assert "profile" not in load_tuned(made).options()
    placed = choice("passage_likelihood", options={"placement": "last"}, profile=PROFILE)
    assert "profile" not in load_tuned(placed, HashScorer()).options()


# ---------------------------------------------------------------------- load_tuned
CASES: list[tuple[str, dict[str, Any], PositionProfile | None]] = [
    ("passage_likelihood", {"placement": "last"}, None),
    ("passage_likelihood", {"placement": "profile", "rest": "keep"}, PROFILE),
    ("passage_likelihood_profile", {}, PROFILE),
    ("select_and_place", {"top_n": 3}, None),
    ("select_and_place_profile", {"mass": 0.8}, PROFILE),
    ("likelihood_selection", {"n_orders": 3, "seed": 7}, None),
    ("convex_score", {"n_base_orders": 1, "seed": 2}, None),
    ("convex_score_profile", {"n_base_orders": 1}, PROFILE),
    ("profile", {"relevance": "passage_likelihood"}, PROFILE),
    ("edge", {"mode": "haystack", "top_k": 3}, None),
    ("sandwich", {"chat": True}, None),
]


@pytest.mark.parametrize(("strategy", "options", "profile"), CASES, ids=[c[0] for c in CASES])
def test_the_reorderer_is_its_row_with_the_files_options(
    tmp_path: Path, strategy: str, options: dict[str, Any], profile: PositionProfile | None
) -> None:
    path = choice(strategy, options=options, profile=profile).write(tmp_path / "tuned.json")
    reorder = load_tuned(path, HashScorer())
    got = reorder(QUESTION, PASSAGES)
    direct = dict(options)
    seed = direct.pop("seed", 0)
    if profile is not None:
        direct["profile"] = profile
    want = STRATEGIES[strategy](QUESTION, PASSAGES, scorer=HashScorer(), seed=seed, **direct)
    assert isinstance(got, OrderingResult) and isinstance(want, OrderingResult)
    assert got.order == want.order and got.passages == want.passages
    assert list(got.scores) == list(want.scores) and got.prompt == want.prompt
    assert reorder.choice == read_tuned(path) and reorder.strategy == strategy


def test_retriever_is_the_identity_and_loads_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tuned_module, "_load", _no_load)
    path = choice("retriever", profile=PROFILE).write(tmp_path / "tuned.json")
    reorder = load_tuned(path)
    result = reorder(QUESTION, PASSAGES)
    assert isinstance(result, OrderingResult) and result.order == list(range(len(PASSAGES)))
    assert all(a is b for a, b in zip(result.passages, PASSAGES, strict=True))
    assert result.cost.lm_calls == 0 and result.cost.prompt_tokens == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a scorer the row does not use is not compared
        assert load_tuned(path, NamedScorer("other"))(QUESTION, PASSAGES[:2]).order == [0, 1]


def _no_load(spec: str, kwargs: Any) -> Any:
    raise AssertionError(f"loaded {spec!r}")


def test_no_scorer_loads_the_files_spec_once_on_first_use(monkeypatch: pytest.MonkeyPatch) -> None:
    loads: list[tuple[str, dict[str, Any]]] = []

    def load(spec: str, kwargs: Any) -> NamedScorer:
        loads.append((spec, dict(kwargs)))
        return NamedScorer()

    monkeypatch.setattr(tuned_module, "_load", load)
    reorder = load_tuned(choice(options={"placement": "last"}))
    assert loads == []  # nothing loaded yet
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same model name: no warning
        first = reorder(QUESTION, PASSAGES)
        reorder(QUESTION, PASSAGES)
    assert loads == [("embedded", {"dtype": "float32"})]
    want = STRATEGIES["passage_likelihood"](QUESTION, PASSAGES, scorer=HashScorer(),
                                            placement="last")  # fmt: skip
    assert isinstance(first, OrderingResult) and first.order == want.order
    # a server spec takes no dtype (and loads only when trusted); a file
    # without one loads the backend's default
    loads.clear()
    served = choice(spec="openai:http://127.0.0.1:8000/v1/m")
    load_tuned(served, trust_spec=True)(QUESTION, PASSAGES)
    load_tuned(choice(dtype=None))(QUESTION, PASSAGES)
    load_tuned(served, "openai:http://127.0.0.1:8000/v1/m")(QUESTION, PASSAGES)  # a spec given
    load_tuned(choice(spec="embedded:gemma3-270m"), "embedded")(QUESTION, PASSAGES)  # not its
    load_tuned(choice(), "embedded")(QUESTION, PASSAGES)  # the file's spec: with its dtype
    served_load = ("openai:http://127.0.0.1:8000/v1/m", {})
    assert loads == [served_load, ("embedded", {})] * 2 + [("embedded", {"dtype": "float32"})]
    with pytest.raises(TypeError, match=r"not a model: pass rag_position.load_model\('embedded'\)"):
        STRATEGIES["passage_likelihood"](QUESTION, PASSAGES, scorer="embedded")


def test_a_model_of_another_name_warns_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loaded from the file's spec, or given (naming both, pointing at the caller); model=
    and scorer= are exclusive."""
    monkeypatch.setattr(tuned_module, "_load", lambda spec, kwargs: NamedScorer("hf:other"))
    reorder = load_tuned(choice())
    with pytest.warns(UserWarning, match="measured on model 'named-model'.*now runs on model "
                      "'hf:other'"):  # fmt: skip
        reorder(QUESTION, PASSAGES)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reorder(QUESTION, PASSAGES)
    scorer = NamedScorer("embedded:gemma3-270m")
    with pytest.warns(UserWarning) as caught:
        reorder = load_tuned(choice(), scorer)
    assert len(caught) == 1 and caught[0].filename == __file__  # points at the caller
    message = str(caught[0].message)
    assert "'named-model'" in message and "'embedded:gemma3-270m'" in message
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reorder(QUESTION, PASSAGES)
        load_tuned(choice(), NamedScorer())  # the same name
        load_tuned(choice(), HashScorer())  # no name: nothing to compare
    with pytest.warns(UserWarning, match="gemma3"):  # model= plays every role, compared once
        load_tuned(choice(), model=scorer)
    with pytest.raises(ValueError, match="not both"):
        load_tuned(choice(), HashScorer(), model=HashScorer())
    with pytest.raises(TypeError, match="path of a tuned file or a TunedChoice"):
        load_tuned(42)  # type: ignore[arg-type]


# ---------------------------------------------------------------------- the embedded model
@pytest.mark.slow
def test_a_tuned_file_on_the_embedded_model(tmp_path: Path, embedded_fp32: Any) -> None:
    docs = PASSAGES[:3]
    made = choice("passage_likelihood", model=embedded_fp32.name, options={"placement": "last"})
    path = made.write(tmp_path / "tuned.json")
    want = STRATEGIES["passage_likelihood"](QUESTION, docs, scorer=embedded_fp32, placement="last")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # the file's model: no warning
        given = load_tuned(path, embedded_fp32)(QUESTION, docs)
        loaded = load_tuned(path)  # loads "embedded" in float32, as the file says
        got = loaded(QUESTION, docs)
    assert isinstance(want, OrderingResult) and isinstance(got, OrderingResult)
    assert isinstance(given, OrderingResult) and given.order == want.order == got.order
    assert want.passages[-1] == "Paris is the capital of France."
    assert got.scores == pytest.approx(want.scores, abs=1e-4) and got.cost.lm_calls > 0


# ---------------------------------------------------------------------- the file's model spec
UNTRUSTED = ["openai:http://127.0.0.1:9/v1/m", "hf:someone/their-model", "hf:/models/theirs"]


@pytest.mark.parametrize("spec", UNTRUSTED)
def test_a_files_server_or_hub_spec_is_not_loaded_without_consent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec: str
) -> None:
    """A file's ``openai:`` spec received the questions, passages and OPENAI_API_KEY; an
    ``hf:`` hub name made transformers download from the hub."""
    monkeypatch.setattr(tuned_module, "_load", _no_load)
    path = choice(spec=spec).write(tmp_path / "tuned.json")
    with pytest.raises(ValueError, match=r"trust_spec=True") as caught:
        load_tuned(path)  # refused now, before any call
    assert repr(spec) in str(caught.value) and "scorer=" in str(caught.value)
    # a model given, or a row that uses none: the spec is not used, nothing to refuse
    assert load_tuned(path, HashScorer())(QUESTION, PASSAGES[:2]).order
    assert load_tuned(choice("edge", spec=spec))(QUESTION, PASSAGES).order == [0, 2, 4, 3, 1]


def test_a_trusted_hub_name_loads_from_the_cache_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import huggingface_hub.constants
    from pytest_socket import disable_socket, enable_socket

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    loads: list[str] = []
    monkeypatch.setattr(tuned_module, "_load", lambda spec, kwargs: loads.append(spec) or
                        NamedScorer("from-the-folder"))  # fmt: skip
    disable_socket()  # the hub is never asked
    try:
        with pytest.raises(rag_position.ModelSpecError, match=r"not in the local Hugging Face "
                           "cache") as caught:  # fmt: skip
            load_tuned(choice(spec="hf:someone/their-model"), trust_spec=True)
        assert "'hf:someone/their-model'" in str(caught.value)
        repo = tmp_path / "hub" / "models--someone--their-model"  # the hub cache's layout
        folder = repo / "snapshots" / ("0" * 40)
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text("0" * 40)
        reorder = load_tuned(choice(spec="hf:someone/their-model", model="someone/their-model"),
                             trust_spec=True)  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # named as the file says: no warning
            reorder(QUESTION, PASSAGES)
    finally:
        enable_socket()
    assert loads == [f"hf:{folder}"]
