"""The open-domain corpus embedding cache: owner-only, atomic, checked on load: a file not
exactly as written is ignored with a warning (never used, never a raw numpy error)."""

from __future__ import annotations

import hashlib
import json
import logging
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from rag_position.eval.tasks.retrieval import DenseRetriever
from rag_position.passages import Passage

pytestmark = pytest.mark.slow  # loads the embedded embedder (once per session)

CORPUS = [
    Passage("Paris is the capital of France.", title="Paris"),
    Passage("Berlin is the capital of Germany.", title="Berlin"),
    Passage("The Nile is a river in Africa.", title="Nile"),
    Passage("Mount Everest is the highest mountain on Earth.", title="Everest"),
    Passage("Hamlet is a tragedy written by William Shakespeare.", title="Hamlet"),
    Passage("Photosynthesis turns light into chemical energy.", title=""),
]
QUESTIONS = ["What is the capital of Germany?", "Who wrote Hamlet?"]
LOGGER = "rag_position.eval.tasks.retrieval"


class Counting:
    """The wrapped embedder, counting the texts of each call; same ``name`` (the cache key)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name = inner, str(inner.name)
        self.calls: list[int] = []

    def embed(self, texts: Sequence[str]) -> Any:
        self.calls.append(len(texts))
        return self.inner.embed(texts)


class Fixed:
    """Gives ``vectors`` for the corpus under ``name``: writes the real embedder's file."""

    def __init__(self, name: str, vectors: npt.NDArray[np.float32]) -> None:
        self.name, self.vectors = name, vectors

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        assert len(texts) == len(self.vectors)
        return self.vectors.copy()


@pytest.fixture(scope="module")
def fresh(embedder: Any, tmp_path_factory: pytest.TempPathFactory) -> npt.NDArray[np.float32]:
    """The corpus vectors computed with no cache file around."""
    retriever = DenseRetriever(CORPUS, embedder, cache_dir=tmp_path_factory.mktemp("fresh"))
    return retriever._corpus_vectors()


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_written_owner_only_then_reused(
    embedder: Any, fresh: npt.NDArray[np.float32], tmp_path: Path
) -> None:
    first = Counting(embedder)
    retriever = DenseRetriever(CORPUS, first, cache_dir=tmp_path)
    ranked = retriever.top(QUESTIONS, 2)
    assert ranked[0][0] == 1 and ranked[1][0] == 4
    assert retriever.cache_path.parent == tmp_path and retriever.cache_path.suffix == ".npz"
    assert _mode(retriever.cache_path) == 0o600
    assert _leftovers(tmp_path) == []
    assert first.calls == [len(CORPUS), len(QUESTIONS)]

    again = Counting(embedder)
    reused = DenseRetriever(CORPUS, again, cache_dir=tmp_path)
    assert reused.top(QUESTIONS, 2) == ranked
    assert again.calls == [len(QUESTIONS)]  # the corpus came from the cache
    np.testing.assert_array_equal(reused._corpus_vectors(), fresh)

    with np.load(retriever.cache_path, allow_pickle=False) as archive:
        header = json.loads(str(archive["header"][()]))
    assert header["shape"] == [len(CORPUS), fresh.shape[1]] and header["dtype"] == "<f4"
    assert header["embedder"] == embedder.name and len(header["sha256"]) == 64


def test_the_file_is_keyed_by_the_corpus_and_the_embedder(tmp_path: Path) -> None:
    vectors = np.eye(len(CORPUS), dtype=np.float32)
    paths = {
        DenseRetriever(corpus, Fixed(name, vectors), cache_dir=tmp_path).cache_path
        for corpus in (CORPUS, CORPUS[::-1], [*CORPUS[:-1], Passage("Other.", title="")])
        for name in ("one", "two")
    }
    assert len(paths) == 6


# --- damaged files: each ignored with a warning, the corpus embedded again -----------------
def _savez(path: Path, **arrays: Any) -> None:
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def _rewrite(path: Path, vectors: npt.NDArray[Any], **changes: Any) -> None:
    """The file rewritten with ``vectors``, its header's ``changes`` applied."""
    with np.load(path, allow_pickle=False) as archive:
        header = {**json.loads(str(archive["header"][()])), **changes}
    _savez(path, header=np.array(json.dumps(header)), vectors=vectors)


def _flipped(path: Path, after: bytes, at: int, bit: int) -> None:
    data = bytearray(path.read_bytes())
    data[bytes(data).index(after) + at] ^= bit
    path.write_bytes(bytes(data))


def _old_npy(path: Path, v: npt.NDArray[np.float32]) -> None:
    """The previous layout: a bare .npy of the right shape, nothing to check it by."""
    with open(path, "wb") as f:
        np.save(f, v, allow_pickle=False)


def _wrong_shape(path: Path, v: npt.NDArray[np.float32]) -> None:
    """A row too few, in a file that agrees with itself (header, digest)."""
    short = np.ascontiguousarray(v[:-1])
    _rewrite(path, short, shape=list(short.shape), sha256=hashlib.sha256(short).hexdigest())


DIGEST = '"corpus_sha256": "'.encode("utf-32-le")  # a str array: UTF-32
DAMAGE: dict[str, Callable[[Path, npt.NDArray[np.float32]], None]] = {
    "truncated": lambda path, v: path.write_bytes(path.read_bytes()[: path.stat().st_size // 2]),
    "truncated-by-one-byte": lambda path, v: path.write_bytes(path.read_bytes()[:-1]),
    # one byte in the middle of the vectors (the zip CRC no longer holds)
    "flipped-vector-byte": lambda path, v: _flipped(path, v.tobytes()[:64], v.nbytes // 2, 0x10),
    "flipped-header-byte": lambda path, v: _flipped(path, DIGEST, len(DIGEST), 0x01),
    "garbage": lambda path, v: path.write_bytes(np.random.default_rng(0).bytes(5000)),
    "zip-garbage": lambda path, v: path.write_bytes(b"PK\x03\x04" + b"\x00" * 100),
    "empty": lambda path, v: path.write_bytes(b""),
    "wrong-shape": _wrong_shape,
    # other vectors of the right shape under the old header: only the SHA-256 tells
    "stale-digest": lambda path, v: _rewrite(path, v[::-1].copy()),
    "other-corpus": lambda path, v: _rewrite(path, v, corpus_sha256="0" * 64),
    "other-embedder": lambda path, v: _rewrite(path, v, embedder="another model"),
    "float64": lambda path, v: _rewrite(path, v.astype(np.float64)),
    "no-header": lambda path, v: _savez(path, vectors=v),
    # nested 100,000 deep: refused by the bounded parser, no RecursionError
    "header-nested": lambda path, v: _savez(
        path, header=np.array("[" * 100_000 + "]" * 100_000), vectors=v
    ),
    "header-not-json": lambda path, v: _savez(path, header=np.array("{not json"), vectors=v),
    "old-npy-layout": _old_npy,
    "pickled": lambda path, v: _savez(
        path, header=np.array([{"x": 1}], dtype=object), vectors=np.array([None])
    ),
}


@pytest.mark.parametrize("damage", DAMAGE.values(), ids=DAMAGE.keys())
def test_a_damaged_file_is_ignored_and_rewritten(
    damage: Callable[..., None],
    embedder: Any,
    fresh: npt.NDArray[np.float32],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    written = DenseRetriever(CORPUS, Fixed(embedder.name, fresh), cache_dir=tmp_path)
    written._corpus_vectors()  # a good file of the real vectors, without embedding again
    path = written.cache_path
    assert path == DenseRetriever(CORPUS, embedder, cache_dir=tmp_path).cache_path
    damage(path, fresh)
    path.chmod(0o644)  # as a file of the old code, or one copied in, would be

    counting = Counting(embedder)
    retriever = DenseRetriever(CORPUS, counting, cache_dir=tmp_path)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        vectors = retriever._corpus_vectors()
    np.testing.assert_array_equal(vectors, fresh)
    assert counting.calls == [len(CORPUS)]  # embedded again, not read from the file
    warnings = [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]
    assert len(warnings) == 1 and str(path) in warnings[0].getMessage()
    assert "embedding the corpus again" in warnings[0].getMessage()

    # the file was replaced by a good one: owner-only, used by the next retriever
    assert _mode(path) == 0o600 and _leftovers(tmp_path) == []
    caplog.clear()
    later = Counting(embedder)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        np.testing.assert_array_equal(
            DenseRetriever(CORPUS, later, cache_dir=tmp_path)._corpus_vectors(), fresh
        )
    assert later.calls == [] and not caplog.records


def test_a_cache_that_cannot_be_written_is_a_warning(
    embedder: Any,
    fresh: npt.NDArray[np.float32],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    retriever = DenseRetriever(CORPUS, embedder, cache_dir=tmp_path)
    retriever.cache_path.mkdir()  # a folder where the file goes: unreadable, unwritable
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        np.testing.assert_array_equal(retriever._corpus_vectors(), fresh)
    assert any("could not write" in r.getMessage() for r in caplog.records)
    assert retriever.cache_path.is_dir() and _leftovers(tmp_path) == []


def test_an_embedder_returning_the_wrong_rows_is_an_error(tmp_path: Path) -> None:
    class Short:
        name = "short"

        def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
            return np.ones((len(texts) - 1, 3), dtype=np.float32)

    retriever = DenseRetriever(CORPUS, Short(), cache_dir=tmp_path)
    with pytest.raises(ValueError, match=r"shape \(5, 3\) for 6 corpus passages"):
        retriever.top(QUESTIONS, 2)
    assert not retriever.cache_path.exists() and _leftovers(tmp_path) == []
