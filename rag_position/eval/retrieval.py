"""Retrievers for the open-domain task: dense (the embedded embedder) and BM25.

Both rank a corpus of passages for a question. Dense retrieval embeds every passage
once (``{title}\\n{text}``, cached as ``.npy`` under the instance cache folder, keyed
by the corpus and the embedder) and ranks by cosine similarity. BM25 is Okapi BM25
(k1 = 1.5, b = 0.75, idf ``log(1 + (N - n + 0.5) / (n + 0.5))``) over the
metric's normalised words.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from rag_position.data import normalize_answer
from rag_position.data.builder import EMBEDDING_TEXT, default_cache_dir
from rag_position.passages import Passage


class Retriever(Protocol):
    """Ranks the corpus for each question: top ``k`` passage indices, best first."""

    name: str

    def top(self, questions: Sequence[str], k: int) -> list[list[int]]: ...


class DenseRetriever:
    """Cosine similarity of embeddings (``embedder.embed`` returns unit rows)."""

    name = "dense"

    def __init__(self, corpus: Sequence[Passage], embedder: Any, *, cache_dir: Path | None = None):
        self.corpus = list(corpus)
        self.embedder = embedder
        label = str(getattr(embedder, "name", None) or type(embedder).__qualname__)
        texts = [_embedding_text(p) for p in self.corpus]
        digest = hashlib.sha256(json.dumps([label, EMBEDDING_TEXT, texts]).encode()).hexdigest()
        self.cache_path = (cache_dir or default_cache_dir()) / f"corpus-{digest[:20]}.npy"
        self._vectors: npt.NDArray[np.float32] | None = None
        self._texts = texts

    def top(self, questions: Sequence[str], k: int) -> list[list[int]]:
        vectors = self._corpus_vectors()
        queries = np.asarray(self.embedder.embed(list(questions)), dtype=np.float32)
        sims = queries @ vectors.T
        return [np.argsort(-row, kind="stable")[:k].tolist() for row in sims]

    def _corpus_vectors(self) -> npt.NDArray[np.float32]:
        if self._vectors is None:
            if self.cache_path.is_file():
                self._vectors = np.load(self.cache_path, allow_pickle=False)
            else:
                self._vectors = np.asarray(self.embedder.embed(self._texts), dtype=np.float32)
                self.cache_path.parent.mkdir(parents=True, exist_ok=True)
                tmp = self.cache_path.with_name(self.cache_path.name + f".{os.getpid()}.tmp")
                with open(tmp, "wb") as fout:
                    np.save(fout, self._vectors, allow_pickle=False)
                os.replace(tmp, self.cache_path)
        return self._vectors


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


def _embedding_text(p: Passage) -> str:
    return EMBEDDING_TEXT.format(title=p.title, text=p.text) if p.title else p.text
