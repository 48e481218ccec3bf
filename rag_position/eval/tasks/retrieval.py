"""Retrievers for the open-domain task: dense (the embedded embedder) and BM25.

Both rank a corpus of passages for a question. Dense retrieval embeds every passage
once (``{title}\\n{text}``, cached as ``.npz`` under the instance cache folder, keyed
by the corpus and the embedder) and ranks by cosine similarity. BM25 is Okapi BM25
(k1 = 1.5, b = 0.75, idf ``log(1 + (N - n + 0.5) / (n + 0.5))``) over the
metric's normalised words.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from rag_position._jsonfile import parse_json
from rag_position.data import normalize_answer
from rag_position.data.builder import default_cache_dir
from rag_position.passages import EMBEDDING_TEXT, Passage, embedding_text

logger = logging.getLogger(__name__)

_CACHE_FORMAT = 1
"""Layout of the corpus cache file; a file of another layout is embedded again."""


class Retriever(Protocol):
    """Ranks the corpus for each question: top ``k`` passage indices, best first."""

    name: str

    def top(self, questions: Sequence[str], k: int) -> list[list[int]]: ...


class DenseRetriever:
    """Cosine similarity of embeddings (``embedder.embed`` returns unit rows).

    The corpus vectors are cached in ``cache_path`` (``corpus-<key>.npz`` in ``cache_dir``,
    default :func:`~rag_position.data.builder.default_cache_dir`), as the instance cache
    is: written owner-only (``0600``) to a temporary file in the same folder, then
    renamed over the old one, so a reader never sees half a file. Beside the vectors the
    file records the SHA-256 of their bytes, their shape and dtype, the corpus digest
    and the embedder's name; a file that does not match all of them (truncated, corrupt,
    written for another corpus or embedder, unreadable) is ignored with a warning and
    the corpus embedded again. A cache that cannot be written is a warning too.
    """

    name = "dense"

    def __init__(self, corpus: Sequence[Passage], embedder: Any, *, cache_dir: Path | None = None):
        self.corpus = list(corpus)
        self.embedder = embedder
        label = str(getattr(embedder, "name", None) or type(embedder).__qualname__)
        texts = [embedding_text(p) for p in self.corpus]
        digest = hashlib.sha256(json.dumps([label, EMBEDDING_TEXT, texts]).encode()).hexdigest()
        self.cache_path = (cache_dir or default_cache_dir()) / f"corpus-{digest[:20]}.npz"
        self._vectors: npt.NDArray[np.float32] | None = None
        self._texts = texts
        self._label = label
        self._digest = digest

    def top(self, questions: Sequence[str], k: int) -> list[list[int]]:
        vectors = self._corpus_vectors()
        queries = np.asarray(self.embedder.embed(list(questions)), dtype=np.float32)
        sims = queries @ vectors.T
        return [np.argsort(-row, kind="stable")[:k].tolist() for row in sims]

    def _corpus_vectors(self) -> npt.NDArray[np.float32]:
        if self._vectors is None:
            vectors = self._load_cache()
            if vectors is None:
                vectors = np.asarray(self.embedder.embed(self._texts), dtype=np.float32)
                if vectors.ndim != 2 or vectors.shape[0] != len(self._texts):
                    raise ValueError(
                        f"the embedder returned shape {vectors.shape} for {len(self._texts)} "
                        f"corpus passages; expected ({len(self._texts)}, dim)"
                    )
                self._save_cache(vectors)
            self._vectors = vectors
        return self._vectors

    def _header(self, vectors: npt.NDArray[np.float32]) -> dict[str, Any]:
        """What the cache file records beside ``vectors`` (and checks on load)."""
        return {
            "format": _CACHE_FORMAT,
            "corpus_sha256": self._digest,
            "embedder": self._label,
            "embedding_text": EMBEDDING_TEXT,
            "shape": list(vectors.shape),
            "dtype": vectors.dtype.str,
            "sha256": hashlib.sha256(np.ascontiguousarray(vectors).tobytes()).hexdigest(),
        }

    def _load_cache(self) -> npt.NDArray[np.float32] | None:
        """The cached vectors, or ``None`` (with a warning) unless all of the file checks out."""
        path = self.cache_path
        try:
            if not path.is_file():
                return None
            archive = np.load(path, allow_pickle=False)
            if not isinstance(archive, np.lib.npyio.NpzFile):  # e.g. an .npy: no header
                raise ValueError("not an .npz archive")
            try:
                if sorted(archive.keys()) != ["header", "vectors"]:
                    raise ValueError(f"holds {sorted(archive.keys())}, not header and vectors")
                header = parse_json(str(archive["header"][()]), ValueError)
                vectors = archive["vectors"]
            finally:
                archive.close()
        except Exception as exc:  # whatever a damaged file raises: it is only a cache
            logger.warning(
                "ignoring unreadable cache file %s (%s: %s); embedding the corpus again",
                path,
                type(exc).__name__,
                exc,
            )
            return None
        expected = self._header(vectors)
        wrong = [
            k for k, v in expected.items() if not isinstance(header, dict) or header.get(k) != v
        ]
        if vectors.dtype != np.float32 or vectors.ndim != 2 or len(vectors) != len(self._texts):
            wrong.append(f"vectors of dtype {vectors.dtype} and shape {vectors.shape}")
        if wrong:
            logger.warning(
                "ignoring %s: it does not fit the corpus (%s); embedding the corpus again",
                path,
                ", ".join(wrong),
            )
            return None
        return vectors

    def _save_cache(self, vectors: npt.NDArray[np.float32]) -> None:
        """Write ``vectors`` and their header atomically, owner-only; a failure is a warning."""
        path = self.cache_path
        header = np.array(json.dumps(self._header(vectors)))
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # mkstemp creates the file with mode 0600, which the rename keeps
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as fout:
                    np.savez(fout, header=header, vectors=vectors)
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as exc:
            logger.warning(
                "could not write the cache file %s (%s); continuing without it", path, exc
            )


class BM25Retriever:
    """Okapi BM25 over normalised words (module doc for the constants)."""

    name = "bm25"

    def __init__(self, corpus: Sequence[Passage], *, k1: float = 1.5, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.docs = [Counter(normalize_answer(f"{p.title} {p.text}").split()) for p in corpus]
        self.lengths = np.array([sum(d.values()) for d in self.docs], dtype=np.float64)
        self.avg = float(self.lengths.mean()) if len(self.docs) else 0.0
        self.postings: dict[str, list[tuple[int, int]]] = {}
        for i, doc in enumerate(self.docs):
            for term, tf in doc.items():
                self.postings.setdefault(term, []).append((i, tf))

    def top(self, questions: Sequence[str], k: int) -> list[list[int]]:
        n = len(self.docs)
        ranked = []
        for question in questions:
            scores = np.zeros(n)
            for term in set(normalize_answer(question).split()):
                posting = self.postings.get(term, [])
                if not posting:
                    continue
                idf = math.log(1 + (n - len(posting) + 0.5) / (len(posting) + 0.5))
                for i, tf in posting:
                    norm = self.k1 * (1 - self.b + self.b * self.lengths[i] / self.avg)
                    scores[i] += idf * tf * (self.k1 + 1) / (tf + norm)
            ranked.append(np.argsort(-scores, kind="stable")[:k].tolist())
        return ranked
