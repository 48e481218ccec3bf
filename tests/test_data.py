"""The data layer: passages, loaders and the accuracy metric (the instance builder:
test_data_builder.py)."""

from __future__ import annotations

import copy
import gzip
import json
import pickle
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import rag_position.data
from rag_position.data import (
    KV_75_FILE,
    KV_140_FILE,
    ORACLE_FILE,
    KVInstance,
    best_subspan_em,
    contains_answer,
    default_data_dir,
    load_kv,
    load_qa,
    normalize_answer,
    packaged_data_dir,
    place_gold,
)
from rag_position.data.builder import random_distractor_order
from rag_position.data.loaders import read_jsonl
from rag_position.errors import DataFormatError
from rag_position.passages import Passage, as_passage, as_passages


def _write_jsonl(path: Path, rows: Sequence[Any]) -> Path:
    lines = "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)
    if path.suffix == ".gz":
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(lines)
    else:
        path.write_text(lines, encoding="utf-8")
    return path


def _ctx(title: str, text: str, *, gold: bool = False, **extra: Any) -> dict[str, Any]:
    return {"title": title, "text": text, "hasanswer": gold, "isgold": gold, **extra}


GOLD_AT_1 = {
    "question": "who sang it",
    "answers": ["Alice Smith"],
    "ctxs": [
        _ctx("D0", "first distractor", id="11", score="1.5", original_retrieval_index=0),
        _ctx("Song", "It was sung by Alice Smith.", gold=True),
        _ctx("D2", "second distractor", id="12", score=1.25, original_retrieval_index=3),
        _ctx("D3", "third distractor", id="13", score=1.0, original_retrieval_index=4),
    ],
}


# --- passages
def test_as_passage_copies_a_ctx_dict_into_a_frozen_hashable_passage_or_refuses_it() -> None:
    record = {"id": "9459602", "title": "Science", "text": "some text", "score": "0.97236913",
              "hasanswer": True, "original_retrieval_index": 65}  # fmt: skip
    before = json.dumps(record, sort_keys=True)
    passage = as_passage(record)
    assert json.dumps(record, sort_keys=True) == before  # not mutated
    assert (passage.id, passage.title, passage.text) == ("9459602", "Science", "some text")
    assert passage.score == pytest.approx(0.97236913)
    assert dict(passage.metadata) == {"hasanswer": True, "original_retrieval_index": 65}
    record["hasanswer"] = False
    assert passage.metadata["hasanswer"] is True
    for clone in (passage, pickle.loads(pickle.dumps(passage)), copy.deepcopy(passage)):
        assert clone == passage and clone.metadata["hasanswer"] is True
        with pytest.raises(TypeError):
            clone.metadata["hasanswer"] = False  # type: ignore[index]
    assert as_passage("some text") == Passage(text="some text")
    assert as_passage("some text").title == ""
    passage = as_passage({"title": "T", "text": "x", "isgold": True, "id": 3, "score": 1})
    assert len({passage, as_passage(passage.to_dict())}) == 1
    assert as_passage(passage.to_dict()) == passage
    assert as_passage(passage) is passage
    assert as_passages(["a", {"text": "b"}]) == [Passage("a"), Passage("b")]
    with pytest.raises(ValueError, match="'text'"):
        as_passage({"title": "no text"})
    with pytest.raises(TypeError):
        as_passage(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="score"):
        as_passage({"text": "x", "score": "high"})
    with pytest.raises(TypeError):
        as_passages("a string")


# --- metric
@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("The  Quick, brown FOX!", "quick brown fox"),
        ("an apple a day", "apple day"),
        ("U.S. Open", "us open"),
        ("theatre", "theatre"),
        ("May 18, 2018", "may 18 2018"),
    ],
)
def test_normalize_answer(raw: str, normalized: str) -> None:
    assert normalize_answer(raw) == normalized


@pytest.mark.parametrize(
    ("prediction", "answers", "em", "contains"),
    [
        ("It will be released on May 18, 2018.", ["May 18, 2018"], 1.0, True),
        ("Super Bowl LII, in 2018", ["Super Bowl LII,", "2017"], 1.0, True),
        ("In 2016.", ["2017"], 0.0, False),
        ("An Apple", ["apple"], 1.0, True),
        ("the united states", ["United States of America"], 0.0, False),
        # as the release: an answer normalised to "" matches; contains_answer skips it
        ("Theodore", ["the"], 1.0, False),
        ("", ["x"], 0.0, False),
        ("born in the U.S.", ["US"], 1.0, True),
    ],
)
def test_best_subspan_em_and_contains_answer(
    prediction: str, answers: list[str], em: float, contains: bool
) -> None:
    assert best_subspan_em(prediction, answers) == em
    assert contains_answer(prediction, answers) is contains
    with pytest.raises(TypeError):
        best_subspan_em("x", "x")


# --- loaders on the packaged files
def test_the_packaged_qa_file_with_the_licences() -> None:
    data_dir = packaged_data_dir()
    qa = load_qa(data_dir / ORACLE_FILE)
    assert len(qa) == 2000 and all(q.gold_index == 0 and q.k == 1 for q in qa)
    assert load_qa(data_dir / ORACLE_FILE, limit=2) == qa[:2]
    first = qa[0]
    assert first.question == "when is the next deadpool movie being released"
    assert first.answers == ("May 18, 2018",)
    assert first.gold == first.passages[0]
    assert first.passages[0].title == "Deadpool 2"
    assert first.passages[0].text.startswith("Deadpool 2 is scheduled to be released")
    assert dict(first.passages[0].metadata) == {"hasanswer": True, "isgold": True}
    assert first.metadata["nq_annotated_gold"]["title"] == "Deadpool 2"
    assert first.line == 1 and first.source is not None and first.source.endswith(ORACLE_FILE)
    assert qa[1].answers == ("Super Bowl LII,", "2017") and qa[1].line == 2
    readme = (data_dir / "README.md").read_text(encoding="utf-8")
    for name in (ORACLE_FILE, KV_75_FILE, KV_140_FILE, "CC BY-SA", "MIT"):
        assert name in readme
    licence = (data_dir / "LICENSE-lost-in-the-middle").read_text()
    assert "Copyright (c) 2023 Nelson Liu" in licence


@pytest.mark.parametrize(("name", "pairs"), [(KV_75_FILE, 75), (KV_140_FILE, 140)])
def test_the_packaged_kv_files(data_dir: Path, name: str, pairs: int) -> None:
    instances = load_kv(data_dir / name)
    assert len(instances) == 500 and load_kv(data_dir / name, limit=3) == instances[:3]
    for inst in instances:
        assert len(inst.records) == pairs
        assert inst.records[inst.gold_index] == (inst.key, inst.value)
    moved = place_gold(instances[0], pairs - 1)
    assert moved.records[pairs - 1] == (instances[0].key, instances[0].value)
    assert len(moved.records) == pairs and set(moved.records) == set(instances[0].records)
    rows = read_jsonl(data_dir / name)
    assert len(rows) == 500 and set(rows[0]) == {"ordered_kv_records", "key", "value"}
    with pytest.raises(DataFormatError, match="load_kv"):
        load_qa(data_dir / name)
    with pytest.raises(DataFormatError, match="load_qa"):
        load_kv(data_dir / ORACLE_FILE)


# --- loaders on small files
@pytest.mark.parametrize("name", ["nq-open-4_total_documents_gold_at_1.jsonl", "x.jsonl.gz"])
def test_load_qa_gold_at_i_format(tmp_path: Path, name: str) -> None:
    path = _write_jsonl(tmp_path / name, [GOLD_AT_1, "", GOLD_AT_1])
    instances = load_qa(path)
    assert len(instances) == 2 and instances[1].line == 3
    inst = instances[0]
    assert inst.gold_index == 1 and inst.k == 4
    assert inst.gold == Passage(
        "It was sung by Alice Smith.", title="Song", metadata={"hasanswer": True, "isgold": True}
    )
    assert inst.passages[0].id == "11" and inst.passages[0].score == 1.5
    assert inst.passages[2].metadata["original_retrieval_index"] == 3
    moved = place_gold(inst, 3)
    assert moved.gold_index == 3 and moved.gold == inst.gold
    assert [p.title for p in moved.passages] == ["D0", "D2", "D3", "Song"]
    assert place_gold(moved, 1) == inst
    for position in (4, -1):
        with pytest.raises(ValueError, match=rf"position {position} .*k=4"):
            place_gold(inst, position)


def test_random_distractor_order(tmp_path: Path) -> None:
    record = dict(GOLD_AT_1)
    record["ctxs"] = [_ctx(f"D{i}", f"distractor {i}") for i in range(9)]
    record["ctxs"].insert(4, _ctx("Song", "gold", gold=True))
    inst = load_qa(_write_jsonl(tmp_path / "a.jsonl", [record]))[0]
    shuffled = random_distractor_order(inst, seed=1)
    assert shuffled.gold_index == 4 and shuffled.passages[4] == inst.passages[4]
    assert sorted(p.title for p in shuffled.passages) == sorted(p.title for p in inst.passages)
    assert shuffled == random_distractor_order(inst, seed=1)
    orders = {random_distractor_order(inst, seed=s).passages for s in range(5)}
    assert len(orders) > 1


def _changed(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    """GOLD_AT_1 with the field at ``path`` set to ``value`` (deleted for ``...``)."""
    record = copy.deepcopy(GOLD_AT_1)
    *parents, last = path
    field = record
    for key in parents:
        field = field[key]
    if value is ...:
        del field[last]
    else:
        field[last] = value
    return record


BAD_RECORDS = [
    ("bad-json", '{"question": "x", ', "line 2"),
    ("no-answers", {k: v for k, v in GOLD_AT_1.items() if k != "answers"}, "'answers'"),
    ("no-title", _changed(("ctxs", 2, "title"), ...), "'ctxs[2].title'"),
    ("wrong-type", dict(GOLD_AT_1, answers="Alice Smith"), "'answers'"),
    ("two-gold", _changed(("ctxs", 0, "isgold"), True), "isgold"),
    ("list", "[1, 2]", "JSON object"),
    # an empty gold passage passed without a word: every question on it was unanswerable
    ("empty-gold", _changed(("ctxs", 1, "text"), "  \n"), "'ctxs[1].text' is empty, and it is "
     "the gold passage"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "record", "says"), BAD_RECORDS, ids=[b[0] for b in BAD_RECORDS])
def test_a_bad_record_names_file_line_and_field(
    tmp_path: Path, case: str, record: Any, says: str
) -> None:
    path = _write_jsonl(tmp_path / "bad.jsonl", [GOLD_AT_1, record])
    with pytest.raises(DataFormatError) as info:
        load_qa(path)
    message = str(info.value)
    assert path.name in message and "line 2" in message and says in message


def test_empty_and_unknown_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(DataFormatError, match="no records"):
        load_qa(empty)
    unknown = _write_jsonl(tmp_path / "unknown.jsonl", [{"foo": 1}])
    with pytest.raises(DataFormatError, match="not a multi-document QA file"):
        load_qa(unknown)
    with pytest.raises(DataFormatError, match="not a key-value retrieval file"):
        load_kv(unknown)
    with pytest.raises(FileNotFoundError):
        load_qa(tmp_path / "absent.jsonl")
    # an empty distractor is accepted (an empty gold is not: above)
    assert load_qa(_write_jsonl(tmp_path / "h.jsonl", [_changed(("ctxs", 0, "text"), "")]))


def test_kv_pair_not_in_records(tmp_path: Path) -> None:
    record = {"ordered_kv_records": [["a", "1"], ["b", "2"]], "key": "a", "value": "2"}
    path = _write_jsonl(tmp_path / "kv.jsonl", [record])
    with pytest.raises(DataFormatError, match=r"kv.jsonl: line 1: field 'key'/'value'"):
        load_kv(path)
    good = load_kv(_write_jsonl(tmp_path / "kv2.jsonl", [dict(record, value="1")]))[0]
    source = str(tmp_path / "kv2.jsonl")
    records = (("a", "1"), ("b", "2"))
    want = KVInstance(records, "a", "1", gold_index=0, id="kv2.jsonl:1", source=source, line=1)
    assert good == want


def test_default_data_dir_env_then_packaged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_POSITION_DATA", str(tmp_path))
    assert default_data_dir() == tmp_path
    monkeypatch.setenv("RAG_POSITION_DATA", str(tmp_path / "absent"))
    with pytest.raises(FileNotFoundError, match="RAG_POSITION_DATA"):
        default_data_dir()
    monkeypatch.delenv("RAG_POSITION_DATA")
    # a "shared" folder holding "data" above the working directory is not looked for
    tmp_path.joinpath("shared", "data").mkdir(parents=True)
    (tmp_path / "main" / "sub").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "main" / "sub")
    assert default_data_dir() == packaged_data_dir()
    assert packaged_data_dir().parent == Path(rag_position.data.__file__).resolve().parent
