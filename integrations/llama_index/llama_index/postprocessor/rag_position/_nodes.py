"""Node helpers shared by the postprocessors and query engines: views and annotated copies.

Nothing here mutates a node, a ``NodeWithScore`` or a list it was given.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle

from rag_position.passages import Passage

METADATA_KEY = "rag_position"
"""The node metadata key our reorderers write (see :func:`reorder_nodes`)."""


def check_nodes(nodes: Sequence[Any], who: str) -> list[NodeWithScore]:
    """A private list of the caller's ``NodeWithScore`` objects (the input is never touched)."""
    if isinstance(nodes, (str, bytes, Mapping)) or not isinstance(nodes, Sequence):
        raise TypeError(f"{who} takes a list of NodeWithScore, got {type(nodes).__name__}")
    items = list(nodes)
    for i, item in enumerate(items):
        if not isinstance(item, NodeWithScore):
            raise TypeError(
                f"{who}: item {i} is a {type(item).__name__}, not a NodeWithScore; wrap nodes "
                "as NodeWithScore(node=..., score=...)"
            )
    return items


def question_of(query_bundle: QueryBundle | None, who: str) -> str:
    """The query text; ``ValueError`` when there is none (the strategy needs the question)."""
    query = None if query_bundle is None else query_bundle.query_str
    if not isinstance(query, str) or not query.strip():
        raise ValueError(
            f"{who} scores the question's likelihood, so it needs the query: call "
            "postprocess_nodes(nodes, query_str=...) (query engines and retrievers pass it)"
        )
    return query


def node_passage(nws: NodeWithScore, title_key: str | None) -> Passage:
    """The node as a rag-position ``Passage``: its text without metadata, its title, id, score."""
    node = nws.node
    title = node.metadata.get(title_key) if title_key else None
    return Passage(
        text=node.get_content(metadata_mode=MetadataMode.NONE),
        title=title if isinstance(title, str) else "",
        id=node.node_id,
        score=nws.score,
    )


def reorder_nodes(
    nodes: Sequence[NodeWithScore],
    order: Sequence[int],
    *,
    strategy: str,
    metadata_key: str | None,
    scores: Sequence[float | None] | None = None,
    extras: Sequence[Mapping[str, Any]] | None = None,
    replace_score: bool = False,
) -> list[NodeWithScore]:
    """``nodes`` in ``order``, annotated under ``metadata_key`` (``nodes[i]`` is input ``i``).

    With a key, each returned item is a new ``NodeWithScore`` around a shallow copy of
    the node whose ``metadata`` is a new dict ``{**old, key: {"strategy", "score",
    "rank", "original_rank", **extras[i]}}``, with the key added to the copy's
    ``excluded_llm_metadata_keys`` and ``excluded_embed_metadata_keys`` so it never
    reaches a prompt or an embedding. ``metadata_key=None``: the caller's own objects,
    in the new order. ``scores[i]`` (per input node; NaN counts as missing) becomes the
    ``NodeWithScore.score`` only with ``replace_score`` (then new wrappers are made
    even without a key; the nodes inside are the caller's).
    """
    n = len(nodes)
    if sorted(order) != list(range(n)):
        raise RuntimeError(f"internal error: {list(order)} is not a permutation of {n} nodes")
    clean = [_clean(s) for s in scores] if scores else [None] * n
    out: list[NodeWithScore] = []
    for rank, i in enumerate(order):
        nws = nodes[i]
        score = nws.score
        if replace_score and clean[i] is not None:
            score = clean[i]
        if metadata_key is None:
            out.append(nws if score is nws.score else NodeWithScore(node=nws.node, score=score))
            continue
        entry: dict[str, Any] = {
            "strategy": strategy,
            "score": clean[i],
            "rank": rank,
            "original_rank": i,
        }
        if extras:
            entry.update(extras[i])
        node = nws.node
        copied = node.model_copy(
            update={
                "metadata": {**node.metadata, metadata_key: entry},
                "excluded_llm_metadata_keys": _with(node.excluded_llm_metadata_keys, metadata_key),
                "excluded_embed_metadata_keys": _with(
                    node.excluded_embed_metadata_keys, metadata_key
                ),
            }
        )
        out.append(NodeWithScore(node=copied, score=score))
    return out


def _with(keys: Sequence[str], key: str) -> list[str]:
    return list(keys) if key in keys else [*keys, key]


def _clean(score: float | None) -> float | None:
    if score is None:
        return None
    value = float(score)
    return None if math.isnan(value) else value
