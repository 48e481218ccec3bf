"""The data layer: the published data files, the accuracy metric, instance building."""

from __future__ import annotations

from rag_position.data.builder import (
    CACHE_ENV,
    EMBEDDING_TEXT,
    InstanceBuilder,
    build_instances,
    default_cache_dir,
    place_gold,
    random_distractor_order,
)
from rag_position.data.loaders import (
    DATA_ENV,
    KV_75_FILE,
    KV_140_FILE,
    ORACLE_FILE,
    KVInstance,
    QAInstance,
    default_data_dir,
    iter_jsonl,
    load_kv,
    load_qa,
    packaged_data_dir,
    read_jsonl,
)
from rag_position.data.metrics import best_subspan_em, contains_answer, normalize_answer

__all__ = [
    "CACHE_ENV",
    "DATA_ENV",
    "EMBEDDING_TEXT",
    "KV_75_FILE",
    "KV_140_FILE",
    "ORACLE_FILE",
    "InstanceBuilder",
    "KVInstance",
    "QAInstance",
    "best_subspan_em",
    "build_instances",
    "contains_answer",
    "default_cache_dir",
    "default_data_dir",
    "iter_jsonl",
    "load_kv",
    "load_qa",
    "normalize_answer",
    "packaged_data_dir",
    "place_gold",
    "random_distractor_order",
    "read_jsonl",
]
