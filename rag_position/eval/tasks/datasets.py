"""Multi-document QA instances for the eval, from either data format.

``--data`` takes an original ``nq-open-{k}_total_documents_gold_at_{i}`` file (every
record holds k passages, one gold: the exact published setting) or an oracle-format
file (one gold passage a record: instances are then built from it, distractors mined
from that file's own passages by dense retrieval). The default is the dev oracle file
in the packaged data folder (or $RAG_POSITION_DATA).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from rag_position.data import ORACLE_FILE, InstanceBuilder, QAInstance, default_data_dir, load_qa
from rag_position.errors import DataFormatError
from rag_position.eval.engine.common import EvalConfigError, check_questions

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class MultidocData:
    """k-passage instances in retriever order, gold passage first (moved per setting).

    ``kind`` says how they were made: ``"oracle"`` (built from an oracle file) or
    ``"gold_at_i"`` (read as given).

    Example::

        dataset = load_multidoc("nq-open-20_total_documents_gold_at_9.jsonl.gz", docs=20,
                                questions=50)
        dataset.kind, dataset.docs, dataset.path      # "gold_at_i", 20, the file
        dataset.instances[0].gold_index               # 0: gold first, moved per setting
    """

    path: Path
    kind: Literal["oracle", "gold_at_i"]
    docs: int
    instances: list[QAInstance]


def default_oracle_path() -> Path:
    """The dev oracle file of the data folder (:func:`~rag_position.data.default_data_dir`)."""
    return default_data_dir() / ORACLE_FILE


def load_multidoc(
    data: PathLike | None,
    *,
    docs: int,
    questions: int | None,
    embedder: Any = None,
    cache_dir: PathLike | None = None,
) -> MultidocData:
    """The first ``questions`` instances of ``data`` with ``docs`` passages each.

    Raises :class:`DataFormatError` naming the file, line and field for a record
    without a gold passage or with another number of passages than ``docs``.

    Example::

        dataset = load_multidoc(None, docs=10, questions=20, embedder=load_embedder("embedded"))
        dataset.kind, len(dataset.instances)          # "oracle", 20 (built from the dev file)
        dataset.instances[0].question, dataset.instances[0].k
    """
    if isinstance(docs, bool) or not isinstance(docs, int) or docs < 1:
        raise EvalConfigError(f"--docs must be a positive number of passages, got {docs!r}")
    check_questions(questions)
    path = Path(data) if data is not None else default_oracle_path()
    records = load_qa(path)
    for record in records:
        if record.gold_index is None:
            raise DataFormatError(
                f"{path}: line {record.line}: field 'ctxs[].isgold': no passage is marked gold"
            )
    check_questions(questions, len(records))
    if all(r.k == 1 for r in records):
        builder = InstanceBuilder(records, embedder or LazyEmbedder(), cache_dir=cache_dir)
        if docs > 1:
            built = builder.build(docs, 0, n_questions=questions)
        else:
            built = records[: questions or len(records)]
        return MultidocData(path, "oracle", docs, built)
    chosen = records[: questions or len(records)]
    for record in chosen:
        if record.k != docs:
            raise DataFormatError(
                f"{path}: line {record.line}: field 'ctxs' holds {record.k} passages, but "
                f"--docs is {docs}; pass --docs {record.k} for this file (a file holds either "
                "one gold passage a record, or the same number of passages in every record)"
            )
    return MultidocData(path, "gold_at_i", docs, [_gold_first(r) for r in chosen])


def _gold_first(instance: QAInstance) -> QAInstance:
    from rag_position.data import place_gold

    return place_gold(instance, 0)


class LazyEmbedder:
    """The embedded embedder, loaded on the first ``embed`` call only.

    Instance building calls no embedder when its cache already holds the distractors,
    so the eval does not pay sentence-transformers' start-up when it needs nothing.
    ``name`` equals the loaded embedder's, so the cache keys agree.
    """

    def __init__(self) -> None:
        from rag_position.models.embedded import embedded_embedder_name

        self.name = embedded_embedder_name()
        self._model: Any = None

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if self._model is None:
            from rag_position.models import load_embedder

            self._model = load_embedder("embedded")
        return np.asarray(self._model.embed(texts), dtype=np.float32)
