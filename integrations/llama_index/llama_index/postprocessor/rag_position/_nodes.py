"""Node helpers shared by the postprocessors and query engines: views and annotated copies.

The record written on each node comes from :func:`rag_position._integration.reorder_records`
(the same record the LangChain compressors write). Nothing here mutates a node, a
``NodeWithScore`` or a list it was given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle

from rag_position import _integration as core
from rag_position._integration import METADATA_KEY
from rag_position.passages import Passage


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


def query_of(query_bundle: QueryBundle | None, who: str) -> str | None:
    """The query text (``None``: no ``query_bundle`` was given).

    A ``TypeError`` naming what is wrong when ``query_bundle`` is not a ``QueryBundle``
    (a string passed where the bundle goes, say) or its ``query_str`` is not a string.
    """
    if query_bundle is None:
        return None
    if not isinstance(query_bundle, QueryBundle):
        raise TypeError(
            f"{who}: query_bundle must be a QueryBundle, got {_short(query_bundle)}; pass the "
            "query as postprocess_nodes(nodes, query_str=...)"
        )
    query = query_bundle.query_str
    if not isinstance(query, str):
        raise TypeError(f"{who}: query_bundle.query_str must be a str, got {_short(query)}")
    return query


def _short(value: Any) -> str:
    """``None``, or the value's type and (at most 60 characters of) its repr."""
    if value is None:
        return "None"
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def question_of(query_bundle: QueryBundle | None, who: str) -> str:
    """The query text; ``ValueError`` when there is none (the strategy needs the question),
    ``TypeError`` when it is not a string (:func:`query_of`)."""
    query = query_of(query_bundle, who)
    if query is None or not query.strip():
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
    reordering: core.Reordering,
    *,
    strategy: str,
    metadata_key: str | None,
    replace_score: bool = False,
) -> list[NodeWithScore]:
    """``nodes`` in the new order, annotated under ``metadata_key``.

    With a key, each returned item is a new ``NodeWithScore`` around a shallow copy of
    the node whose ``metadata`` is a new dict ``{**old, key: record}`` (the record of
    :func:`rag_position._integration.reorder_record`), with the key added to the copy's
    ``excluded_llm_metadata_keys`` and ``excluded_embed_metadata_keys`` so it never
    reaches a prompt or an embedding. ``metadata_key=None``: the caller's own objects,
    in the new order. The strategy's score becomes the ``NodeWithScore.score`` only
    with ``replace_score`` (then new wrappers are made even without a key; the nodes
    inside are the caller's).
    """
    records = core.reorder_records(reordering, strategy)
    out: list[NodeWithScore] = []
    for i, record in zip(reordering.order, records, strict=True):
        nws = nodes[i]
        score = nws.score
        if replace_score and reordering.scores[i] is not None:
            score = reordering.scores[i]
        if metadata_key is None:
            out.append(nws if score is nws.score else NodeWithScore(node=nws.node, score=score))
            continue
        node = nws.node
        copied = node.model_copy(
            update={
                "metadata": core.with_record(node.metadata, metadata_key, record),
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


__all__ = [
    "METADATA_KEY",
    "check_nodes",
    "node_passage",
    "query_of",
    "question_of",
    "reorder_nodes",
]
