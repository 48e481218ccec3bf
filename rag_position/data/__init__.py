"""The data layer: the published data files, the accuracy metric, instance building."""

from __future__ import annotations

from rag_position.data.builder import (
    InstanceBuilder,
    build_instances,
    place_gold,
)
from rag_position.data.loaders import (
    KV_75_FILE,
    KV_140_FILE,
    ORACLE_FILE,
    KVInstance,
    QAInstance,
    default_data_dir,
    load_kv,
    load_qa,
    packaged_data_dir,
)
from rag_position.data.metrics import best_subspan_em, contains_answer, normalize_answer

__all__ = [
    "KV_75_FILE",
    "KV_140_FILE",
    "ORACLE_FILE",
    "InstanceBuilder",
    "KVInstance",
    "QAInstance",
    "best_subspan_em",
    "build_instances",
    "contains_answer",
    "default_data_dir",
    "load_kv",
    "load_qa",
    "normalize_answer",
    "packaged_data_dir",
    "place_gold",
]
