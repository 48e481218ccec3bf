"""Property tests (hypothesis) of every LlamaIndex reorderer: the conformance kit's adapter,
the contract of integrations/llama_index/README.md "The metadata key" on ``NodeWithScore``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import llama_index.postprocessor.rag_position as package
from hypothesis import strategies as st
from li_testkit import ListRetriever
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, TextNode
from llama_index.postprocessor.rag_position import METADATA_KEY, PositionAwareRetriever
from llama_index.postprocessor.rag_position.retriever import COMPONENTS

from rag_position.testing.conformance import Case, ComponentConformance
from rag_position.testing.conformance_checks import containers, deep_equal
from rag_position.testing.strategies import metadata_dicts, retriever_scores, texts, with_repeats

EXCLUDED = ("excluded_llm_metadata_keys", "excluded_embed_metadata_keys")


@st.composite
def text_nodes(draw: st.DrawFn, scores: st.SearchStrategy[Any]) -> TextNode:
    excluded = draw(st.lists(st.sampled_from(["source", "page", METADATA_KEY]), unique=True))
    node_id = draw(st.one_of(st.none(), st.text(min_size=1, max_size=5)))
    return TextNode(
        text=draw(texts),
        metadata=draw(metadata_dicts(scores)),
        excluded_llm_metadata_keys=excluded,
        excluded_embed_metadata_keys=list(reversed(excluded)),
        **({} if node_id is None else {"id_": node_id}),
    )


def rewrap(n: NodeWithScore) -> st.SearchStrategy[NodeWithScore]:
    """The same node in another wrapper, with another retriever score."""
    return st.builds(NodeWithScore, node=st.just(n.node), score=retriever_scores)


def plain(node: TextNode) -> dict[str, Any]:
    dump = node.model_dump()
    for name in ("metadata", *EXCLUDED):
        dump.pop(name)
    return dump


class TestLlamaIndexReorderers(ComponentConformance):
    max_examples = 80
    optional_question = True  # no query at all: only a scoring postprocessor needs one
    components = COMPONENTS
    package = package
    reorderer_base = (BaseNodePostprocessor,)
    item_type = NodeWithScore

    def items(self, max_n: int, scores: st.SearchStrategy[Any]) -> st.SearchStrategy[list[Any]]:
        wrapped = st.builds(NodeWithScore, node=text_nodes(scores), score=retriever_scores)
        return with_repeats(wrapped, max_n, rewrap)

    def wrap(self, text: str, metadata: dict[str, Any], ident: str) -> NodeWithScore:
        return NodeWithScore(node=TextNode(text=text, id_=ident, metadata=metadata), score=0.5)

    def run(self, reorderer: Any, items: Sequence[Any], question: Any, use_async: bool) -> Any:
        if use_async:
            return asyncio.run(reorderer.apostprocess_nodes(items, query_str=question))
        return reorderer.postprocess_nodes(items, query_str=question)

    def state(self, item: NodeWithScore) -> Any:
        return (item.score, item.node.model_dump())

    def inner(self, item: NodeWithScore) -> list[int]:
        node = item.node
        return [id(node), *containers(node.metadata), *(id(getattr(node, k)) for k in EXCLUDED)]

    def metadata(self, item: NodeWithScore) -> dict[str, Any]:
        return item.node.metadata

    def parts(self, item: NodeWithScore) -> tuple[Any, ...]:
        return (item, item.node)

    def identity(self, item: NodeWithScore) -> int:
        return id(item.node)

    def copy_of(self, item: NodeWithScore) -> NodeWithScore:
        return NodeWithScore(node=item.node.model_copy(), score=item.score)

    def check_output(
        self, given: Sequence[Any], out: Any, case: Case, key: str | None, replace: bool = False
    ) -> None:
        if key is None:  # the caller's own NodeWithScore, or a new one around the caller's node
            mine = {id(n) for n in given}
            assert replace or all(id(n) in mine for n in out), "a new wrapper, no replace_score"
        super().check_output(given, out, case, key, replace)

    def check_copy(self, src: Any, out: Any, key: str, score: float | None, replace: bool) -> None:
        node, before = out.node, src.node
        assert type(node) is type(before) and node.node_id == before.node_id
        assert deep_equal(plain(node), plain(before)), "text or another field changed"
        for name in EXCLUDED:
            keys, was = getattr(node, name), getattr(before, name)
            assert keys is not was and keys == (was if key in was else [*was, key])
        expected = score if replace and score is not None else src.score
        assert deep_equal(out.score, expected), "NodeWithScore.score changed"

    def retriever(
        self, items: list[Any], name: str, options: dict[str, Any], data: st.DataObject
    ) -> tuple[Callable[[str, bool], Any], list[Any]]:
        retriever = PositionAwareRetriever(ListRetriever(items), name, **options)
        seen: set[str] = set()  # BaseRetriever.retrieve keeps the first node of each node_id
        kept = [n for n in items if not (n.node.node_id in seen or seen.add(n.node.node_id))]

        def call(question: str, use_async: bool) -> Any:
            if use_async:
                return asyncio.run(retriever.aretrieve(question))
            return retriever.retrieve(question)

        return call, kept

    def broken(self, given: list[Any], out: list[Any]) -> list[list[Any]]:
        deep = [NodeWithScore(node=n.node.model_copy(deep=True), score=n.score) for n in out]
        same_node = [NodeWithScore(node=given[0].node, score=0.5), *out[1:]]  # the caller's node
        rescored = [NodeWithScore(node=n.node, score=0.9) for n in out]
        return [deep, same_node, rescored]

    def mutations(self, items: list[Any]) -> list[Callable[[], Any]]:
        node = items[2].node
        return [
            lambda: setattr(node, "metadata", dict(node.metadata)),  # an equal new dict
            lambda: items[0].node.excluded_llm_metadata_keys.append(METADATA_KEY),
            lambda: setattr(items[1], "score", 0.2),
            lambda: setattr(items[2], "node", node.model_copy()),
        ]
