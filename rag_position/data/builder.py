"""Build k-passage multi-document QA instances from the oracle file ("Lost in the Middle").

For each question the distractors are the passages most similar to it by dense
retrieval among the other questions' gold passages, keeping only those that hold
none of its answers (the accuracy metric's normalised substring match), in
decreasing similarity; the gold passage is then inserted at the requested position.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, Protocol, overload

import numpy as np
import numpy.typing as npt

from rag_position._jsonfile import read_json
from rag_position.data.loaders import KVInstance, PathLike, QAInstance, load_qa
from rag_position.data.metrics import normalize_answer
from rag_position.passages import EMBEDDING_TEXT, Passage, embedding_text

logger = logging.getLogger(__name__)

CACHE_ENV = "RAG_POSITION_CACHE"
_CACHE_FORMAT = 1


SEED_DEPTH = 29
"""Distractors per question in the packaged rankings (``--docs`` up to 30)."""
SEED_FILE = "nq-open-oracle-dev.distractors-k30.json.gz"
"""The packaged rankings of the packaged oracle file with the embedded embedder
(``scripts/make_distractor_seed.py``)."""

Ranking = list[tuple[int, float]]
"""Per question: (pool index, cosine similarity) of its distractors, most similar first."""


class Embedder(Protocol):
    """What the builder needs of :class:`rag_position.models.protocols.Embedder`.

    Declared here so the data layer does not import the model backends.
    """

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...


def build_instances(
    path: PathLike,
    k: int,
    gold_index: int,
    embedder: Embedder,
    *,
    n_questions: int | None = None,
    cache_dir: PathLike | None = None,
) -> list[QAInstance]:
    """Read the oracle file at ``path`` and build k-passage instances, gold at ``gold_index``.

    Example::

        instances = build_instances(default_data_dir() / ORACLE_FILE, k=10, gold_index=4,
                                    embedder=load_embedder("embedded"), n_questions=20)
        first = instances[0]
        first.k, first.gold_index, first.gold.title   # 10, 4, the gold passage
        [p.score for p in first.passages]             # a distractor's: its similarity
    """
    builder = InstanceBuilder(path, embedder, cache_dir=cache_dir)
    return builder.build(k, gold_index, n_questions=n_questions)


class InstanceBuilder:
    """Builds multi-document instances from oracle instances (one gold passage each).

    The distractor pool is every distinct gold passage of ``oracle`` (identical
    ``(title, text)`` pairs merged); a question never gets its own gold passage back.
    The expensive parts are cached in ``cache_dir`` (default ``$RAG_POSITION_CACHE``,
    else ``~/.cache/rag-position``): the pool embeddings as ``.npy`` and the ranked
    distractors per ``k`` as JSON, both keyed by a hash of the data, the embedder's
    name and :data:`EMBEDDING_TEXT`. A build that finds them calls no embedder.
    ``packaged=True``: questions of the packaged oracle file ranked with the embedded
    embedder come from the rankings shipped with the package (:data:`SEED_FILE`, made
    by ``scripts/make_distractor_seed.py`` the same way), so a fresh machine embeds
    nothing either; ``False`` computes them.

    Example:
        >>> builder = InstanceBuilder(default_data_dir() / ORACLE_FILE, load_embedder())
        >>> instances = builder.build(k=20, gold_index=9, n_questions=100)
    """

    def __init__(
        self,
        oracle: Sequence[QAInstance] | PathLike,
        embedder: Embedder,
        *,
        cache_dir: PathLike | None = None,
        embedder_name: str | None = None,
        packaged: bool = True,
    ) -> None:
        self.oracle = oracle
        self.packaged = packaged
        self.embedder = embedder
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.embedder_name = embedder_name or str(
            getattr(embedder, "name", None) or type(embedder).__qualname__
        )
        self._prepared = False

    def build(self, k: int, gold_index: int, *, n_questions: int | None = None) -> list[QAInstance]:
        """One instance per question (the first ``n_questions``), gold at ``gold_index``.

        The distractor pool is always the whole oracle set, whatever ``n_questions``.
        """
        _check_position(gold_index, k)
        rankings = self.rankings(k, n_questions=n_questions)
        built = []
        for instance, ranking in zip(self._instances[: len(rankings)], rankings, strict=True):
            passages = [self._distractor(j, score) for j, score in ranking]
            gold = instance.gold
            assert gold is not None  # checked in _prepare
            passages.insert(gold_index, gold)
            built.append(
                QAInstance(
                    question=instance.question,
                    answers=instance.answers,
                    passages=tuple(passages),
                    gold_index=gold_index,
                    id=instance.id,
                    source=instance.source,
                    line=instance.line,
                    metadata=instance.metadata,
                )
            )
        return built

    def rankings(self, k: int, *, n_questions: int | None = None) -> list[Ranking]:
        """The k-1 distractors of each of the first ``n_questions`` questions (cached)."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"`k` must be a positive number of passages, got {k!r}")
        self._prepare()
        n = _check_n_questions(n_questions, len(self._instances))
        cache_path = self.ranking_cache_path(k)
        cached = self._load_rankings(cache_path, k)
        missing = [i for i in range(n) if i not in cached]
        if missing:
            seeded = self._seeded(k, missing)
            if seeded:
                cached.update(seeded)
                missing = [i for i in missing if i not in seeded]
                self._save_rankings(cache_path, k, cached)
        if missing:
            cached.update(self.rank(missing, k))
            self._save_rankings(cache_path, k, cached)
        return [cached[i] for i in range(n)]

    @property
    def pool(self) -> list[Passage]:
        """The distinct gold passages distractors are drawn from, in first-seen order."""
        self._prepare()
        return list(self._pool)

    @property
    def pool_cache_path(self) -> Path:
        """Where the pool embeddings are cached (``.npy``)."""
        self._prepare()
        return self.cache_dir / f"pool-{self._cache_key()}.npy"

    def ranking_cache_path(self, k: int) -> Path:
        """Where the ranked distractors for ``k`` passages are cached (JSON)."""
        self._prepare()
        return self.cache_dir / f"distractors-{self._cache_key()}-k{k}.json"

    # --- internals ---------------------------------------------------------------------

    def _prepare(self) -> None:
        if self._prepared:
            return
        oracle = self.oracle
        instances = load_qa(oracle) if isinstance(oracle, (str, os.PathLike)) else list(oracle)
        if not instances:
            raise ValueError("`oracle` holds no instances")
        pool: list[Passage] = []
        owners: list[set[int]] = []
        index_of: dict[tuple[str, str], int] = {}
        for i, instance in enumerate(instances):
            gold = instance.gold
            if gold is None:
                raise ValueError(
                    f"instance {instance.id or i} has no gold passage (no ctx with isgold true); "
                    "the builder needs the oracle file"
                )
            key = (gold.title.strip(), gold.text.strip())
            if key not in index_of:
                index_of[key] = len(pool)
                pool.append(gold)
                owners.append(set())
            owners[index_of[key]].add(i)
        self._instances = instances
        self._pool = pool
        self._owners = [frozenset(o) for o in owners]
        self._pool_normalized = [normalize_answer(f"{p.title} {p.text}") for p in pool]
        digest = hashlib.sha256()
        for instance in instances:
            gold = instance.gold
            assert gold is not None
            row = [instance.question, list(instance.answers), gold.title, gold.text]
            digest.update(json.dumps(row, ensure_ascii=False).encode("utf-8") + b"\n")
        self.data_hash = digest.hexdigest()
        self._prepared = True

    def _cache_key(self) -> str:
        material = json.dumps(
            [_CACHE_FORMAT, self.data_hash, self.embedder_name, EMBEDDING_TEXT],
            ensure_ascii=False,
        )
        return hashlib.sha256(material.encode("utf-8")).hexdigest()[:20]

    def _distractor(self, j: int, score: float) -> Passage:
        source = self._pool[j]
        return Passage(
            text=source.text,
            title=source.title,
            id=source.id,
            score=score,
            metadata={"hasanswer": False, "isgold": False, "pool_index": j},
        )

    def rank(self, questions: list[int], k: int) -> dict[int, Ranking]:
        """The ``k - 1`` nearest pool passages of each question in ``questions`` (by index), by
        embedding similarity, less those holding an answer: ``{question: [(pool index,
        similarity), ...]}`` (a ``ValueError`` where fewer are left)."""
        pool_vectors = self._pool_embeddings()
        texts = [self._instances[i].question for i in questions]
        logger.info("embedding %d questions with %s", len(texts), self.embedder_name)
        query_vectors = _as_matrix(self.embedder.embed(texts), len(texts), "questions")
        similarities = query_vectors @ pool_vectors.T
        rankings: dict[int, Ranking] = {}
        for row, i in enumerate(questions):
            answers = [a for a in map(normalize_answer, self._instances[i].answers) if a]
            ranking: Ranking = []
            for j in np.argsort(-similarities[row], kind="stable").tolist():
                if len(ranking) == k - 1:
                    break
                if i in self._owners[j] or any(a in self._pool_normalized[j] for a in answers):
                    continue
                ranking.append((j, float(similarities[row, j])))
            if len(ranking) < k - 1:
                raise ValueError(
                    f"question {self._instances[i].id} has only {len(ranking)} passages without "
                    f"its answers in the pool, fewer than the k-1 = {k - 1} distractors asked for"
                )
            rankings[i] = ranking
        return rankings

    def _pool_embeddings(self) -> npt.NDArray[np.float32]:
        path = self.pool_cache_path
        if path.is_file():
            try:
                # mapped, not read: a header claiming more than the file holds is refused
                # (ValueError) before any memory is taken, and the shape is checked first
                vectors = np.load(path, mmap_mode="r", allow_pickle=False)
                if vectors.ndim == 2 and vectors.shape[0] == len(self._pool):
                    return np.array(vectors, dtype=np.float32)
                logger.warning("ignoring %s: shape %s does not fit the pool", path, vectors.shape)
            except (OSError, ValueError, MemoryError) as exc:
                logger.warning("ignoring unreadable cache file %s: %s", path, exc)
        texts = [embedding_text(p) for p in self._pool]
        logger.info("embedding %d pool passages with %s", len(texts), self.embedder_name)
        vectors = _as_matrix(self.embedder.embed(texts), len(texts), "pool passages")
        _atomic_write(path, lambda f: np.save(f, vectors, allow_pickle=False))
        return vectors

    def _load_rankings(self, path: Path, k: int) -> dict[int, Ranking]:
        if not path.is_file():
            return {}
        try:
            payload = read_json(path, what="rankings cache")
            header = (payload["format"], payload["data_sha256"], payload["embedder"], payload["k"])
            if header != (_CACHE_FORMAT, self.data_hash, self.embedder_name, k):
                logger.warning("ignoring %s: written for other data, embedder or k", path)
                return {}
            rankings: dict[int, Ranking] = {}
            for i, ranking in payload["ranked"].items():
                entries = [(int(j), float(s)) for j, s in ranking]
                if len(entries) != k - 1 or not all(0 <= j < len(self._pool) for j, _ in entries):
                    raise ValueError(f"bad entry for question {i}")
                rankings[int(i)] = entries
            return rankings
        except (OSError, ValueError, KeyError, TypeError) as exc:
            logger.warning("ignoring unreadable cache file %s: %s", path, exc)
            return {}

    def _seeded(self, k: int, wanted: list[int]) -> dict[int, Ranking]:
        """The packaged rankings of ``wanted`` (their first k-1), where they fit this build:
        the same data, embedder name and embedding text, and k-1 within their depth."""
        path = seed_path()
        if not self.packaged or k - 1 > SEED_DEPTH or not path.is_file():
            return {}
        try:
            payload = read_json(path, what="packaged distractor rankings")
            header = (
                payload["format"],
                payload["data_sha256"],
                payload["embedder"],
                payload["embedding_text"],
            )
            if header != (_CACHE_FORMAT, self.data_hash, self.embedder_name, EMBEDDING_TEXT):
                return {}
            ranked = payload["ranked"]
            found: dict[int, Ranking] = {}
            for i in wanted:
                entries = ranked.get(str(i))
                if entries is None:
                    continue
                prefix = [(int(j), float(s)) for j, s in entries[: k - 1]]
                if len(prefix) != k - 1 or not all(0 <= j < len(self._pool) for j, _ in prefix):
                    raise ValueError(f"bad entry for question {i}")
                found[i] = prefix
            return found
        except (OSError, ValueError, KeyError, TypeError) as exc:
            logger.warning("ignoring the packaged rankings %s: %s", path, exc)
            return {}

    def _save_rankings(self, path: Path, k: int, rankings: dict[int, Ranking]) -> None:
        payload: dict[str, Any] = {
            "format": _CACHE_FORMAT,
            "data_sha256": self.data_hash,
            "embedder": self.embedder_name,
            "embedding_text": EMBEDDING_TEXT,
            "k": k,
            "ranked": {str(i): [[j, s] for j, s in rankings[i]] for i in sorted(rankings)},
        }
        text = json.dumps(payload, ensure_ascii=False)
        _atomic_write(path, lambda f: f.write(text.encode("utf-8")))


@overload
def place_gold(instance: QAInstance, position: int) -> QAInstance: ...
@overload
def place_gold(instance: KVInstance, position: int) -> KVInstance: ...
def place_gold(instance: QAInstance | KVInstance, position: int) -> QAInstance | KVInstance:
    """Move the gold passage (or queried key-value pair) to ``position``, others in order.

    As the release does: remove it, then insert it at ``position`` (0-based).

    Example:
        >>> docs = tuple(Passage(t, title=t) for t in ("Rome", "Paris", "Oslo"))
        >>> inst = QAInstance("Where is Paris?", ("France",), docs, gold_index=1)
        >>> moved = place_gold(inst, 2)
        >>> [p.title for p in moved.passages], moved.gold_index
        (['Rome', 'Oslo', 'Paris'], 2)
    """
    if isinstance(instance, KVInstance):
        records = list(instance.records)
        _check_position(position, len(records))
        records.insert(position, records.pop(instance.gold_index))
        return KVInstance(
            records=tuple(records),
            key=instance.key,
            value=instance.value,
            gold_index=position,
            id=instance.id,
            source=instance.source,
            line=instance.line,
        )
    if instance.gold_index is None:
        raise ValueError(f"instance {instance.id} has no gold passage to move")
    passages = list(instance.passages)
    _check_position(position, len(passages))
    passages.insert(position, passages.pop(instance.gold_index))
    return _with_passages(instance, passages, position)


def random_distractor_order(instance: QAInstance, seed: int) -> QAInstance:
    """The ``qa_ordered_randomly`` setting: shuffle the distractors, gold stays put.

    Reproducible by ``seed``. (The release shuffles with one global generator seeded
    0 across the whole file, so its exact orders are not reproduced here.)

    Example:
        >>> docs = tuple(Passage(t, title=t) for t in ("Rome", "Paris", "Oslo"))
        >>> inst = QAInstance("Where is Paris?", ("France",), docs, gold_index=1)
        >>> shuffled = random_distractor_order(inst, seed=1)
        >>> [p.title for p in shuffled.passages], shuffled.gold_index
        (['Oslo', 'Paris', 'Rome'], 1)
    """
    if instance.gold_index is None:
        raise ValueError(f"instance {instance.id} has no gold passage to keep in place")
    gold = instance.passages[instance.gold_index]
    distractors = [p for i, p in enumerate(instance.passages) if i != instance.gold_index]
    random.Random(seed).shuffle(distractors)
    distractors.insert(instance.gold_index, gold)
    return _with_passages(instance, distractors, instance.gold_index)


def seed_path() -> Path:
    """The packaged distractor rankings (:data:`SEED_FILE`) in the package's data folder."""
    return Path(__file__).parent / "files" / SEED_FILE


def default_cache_dir() -> Path:
    """``$RAG_POSITION_CACHE`` if set, else ``~/.cache/rag-position``.

    Example::

        default_cache_dir()  # e.g. /home/me/.cache/rag-position
        sorted(p.name for p in default_cache_dir().glob("distractors-*.json"))
    """
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "rag-position"


def _with_passages(instance: QAInstance, passages: list[Passage], gold_index: int) -> QAInstance:
    return QAInstance(
        question=instance.question,
        answers=instance.answers,
        passages=tuple(passages),
        gold_index=gold_index,
        id=instance.id,
        source=instance.source,
        line=instance.line,
        metadata=instance.metadata,
    )


def _check_position(position: int, k: int) -> None:
    if isinstance(position, bool) or not isinstance(position, int) or not 0 <= position < k:
        raise ValueError(
            f"gold position {position!r} is out of range for k={k} passages (use 0..{k - 1})"
        )


def _check_n_questions(n_questions: int | None, available: int) -> int:
    if n_questions is None:
        return available
    if not 1 <= n_questions <= available:
        raise ValueError(
            f"`n_questions` must be between 1 and the {available} questions of the data, "
            f"got {n_questions}"
        )
    return n_questions


def _as_matrix(vectors: Any, rows: int, what: str) -> npt.NDArray[np.float32]:
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape[0] != rows:
        raise ValueError(
            f"the embedder returned shape {matrix.shape} for {rows} {what}; expected ({rows}, dim)"
        )
    return matrix


def _atomic_write(path: Path, write: Callable[[IO[bytes]], object]) -> None:
    """Write via a temporary file and rename, so readers never see half a file."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                write(f)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        logger.warning("could not write the cache file %s (%s); continuing without it", path, exc)
