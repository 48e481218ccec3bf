"""Both frameworks behind one interface: LangChain's compressors and LlamaIndex's postprocessors
come from one strategy table, so ``tests/test_components_*.py`` test them once, parametrised
over :data:`FRAMEWORKS`; what one framework alone has stays in its own tests."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from operator import attrgetter
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import pytest

lc = pytest.importorskip("langchain_rag_position")
li = pytest.importorskip("llama_index.postprocessor.rag_position")

from langchain_core.documents import Document  # noqa: E402
from langchain_core.retrievers import BaseRetriever as LangChainRetriever  # noqa: E402
from langchain_rag_position._adapters import to_passage  # noqa: E402
from langchain_rag_position.compressors import GivenOrder as LangChainGivenOrder  # noqa: E402
from llama_index.core.base.base_retriever import BaseRetriever as LlamaIndexRetriever  # noqa: E402
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode  # noqa: E402
from llama_index.postprocessor.rag_position._nodes import node_passage  # noqa: E402
from llama_index.postprocessor.rag_position.base import GivenOrder as LlamaIndexGivenOrder  # noqa: E402
from pydantic import ValidationError  # noqa: E402

from rag_position._integration import METADATA_KEY, RECORD_KEYS, record_keys  # noqa: E402
from rag_position.errors import ModelSpecError  # noqa: E402
from rag_position.passages import Passage  # noqa: E402
from rag_position.testing.conformance_checks import Snapshot, containers  # noqa: E402

QUESTION = "What is the capital of France?"
GOLD = "Paris is the capital of France."
FACTS = [
    ("Lyon", "Lyon is a large city in France, known for its cuisine."),
    ("Paris", GOLD),
    ("Berlin", "Berlin is the capital of Germany."),
    ("Madrid", "Madrid is the capital of Spain."),
    ("Rome", "Rome is the capital of Italy."),
]
"""(title, text) of the items :meth:`Framework.items` makes, in that order."""
EXCLUDED = ("excluded_llm_metadata_keys", "excluded_embed_metadata_keys")


class Framework:
    """One framework's items, components and retriever, as the shared tests use them
    (``state``/``inner``: what must not change in a caller's item, :class:`Snapshot`)."""

    name: ClassVar[str]
    package: ClassVar[ModuleType]
    components: ClassVar[Mapping[str, type]]  # the retriever's strategy name -> class
    given_order: ClassVar[type]  # what a tuned file of the retriever's own order builds
    # the messages (patterns) of malformed input: an unwrapped item at index 1, one item
    # instead of a list, a blank question, a query that is not a str (format ``name``)
    wrong_item: ClassVar[str]
    lone_item: ClassVar[str]
    blank_query: ClassVar[str]
    query_type: ClassVar[str]
    spec_error: ClassVar[type[Exception]]  # what an unknown model spec is refused with

    def __repr__(self) -> str:
        return self.name

    def wrap(self, text: str, metadata: dict[str, Any], ident: str, score: float) -> Any: ...
    def text(self, item: Any) -> str: ...
    def ident(self, item: Any) -> str | None: ...
    def metadata(self, item: Any) -> dict[str, Any]: ...
    def score(self, item: Any) -> float | None: ...
    def passage(self, item: Any) -> Passage: ...
    def state(self, item: Any) -> Any: ...
    def inner(self, item: Any) -> list[int]: ...
    def run(self, component: Any, items: Sequence[Any], question: str, use_async: bool) -> Any: ...
    def unknown_option(self, name: str) -> tuple[type[Exception], str]: ...
    def retrieve(self, aware: Any, question: str = QUESTION, use_async: bool = False) -> Any: ...
    def reorderer(self, aware: Any) -> Any: ...
    def retriever(self, items: list[Any], strategy: Any = None, **options: Any) -> Any: ...
    def ask(self, component: Any, items: Sequence[Any], query: Any, use_async: bool) -> Any: ...
    def unwrapped(self, item: Any) -> Any: ...

    def items(self, n: int = 5) -> list[Any]:
        """``n`` items of :data:`FACTS` (repeated past five), with titles, ids ``id-<i>``,
        nested metadata and a falling retriever score (``relevance_score`` in metadata)."""
        out = []
        for i in range(n):
            (title, text), score = FACTS[i % len(FACTS)], 1.0 - i / 10
            meta = {"title": title, "source": f"doc-{i}", "tags": ["geo", str(i)],
                    "relevance_score": score}  # fmt: skip
            out.append(self.wrap(text, meta, f"id-{i}", score))
        return out

    def with_metadata(self, item: Any, **extra: Any) -> Any:
        """A new item of the same text, id and retriever score, with ``extra`` metadata."""
        return self.wrap(self.text(item), {**self.metadata(item), **extra}, self.ident(item),
                         self.score(item))  # fmt: skip

    def records(self, out: Sequence[Any], key: str = METADATA_KEY) -> list[dict[str, Any]]:
        return [self.metadata(x)[key] for x in out]

    def passages(self, items: Sequence[Any]) -> list[Passage]:
        return [self.passage(x) for x in items]

    def outcome(self, out: Sequence[Any]) -> list[tuple[Any, ...]]:
        """Each item's id, text, metadata and retriever score, in order."""
        return [(self.ident(x), self.text(x), self.metadata(x), self.score(x)) for x in out]

    def snapshot(self, items: Sequence[Any]) -> Snapshot:
        """The caller's items now; ``.check()`` later: nothing replaced or mutated."""
        return Snapshot(items, state=self.state, inner=self.inner)

    def check_copy(self, src: Any, out: Any, key: str = METADATA_KEY) -> None:
        """``out`` is the documented copy of ``src``: the same text and id, a NEW metadata
        dict with the caller's keys and (the very) values plus the record under ``key``."""
        assert out is not src and self.metadata(out) is not self.metadata(src)
        assert self.text(out) == self.text(src) and self.ident(out) == self.ident(src)
        assert {k: v for k, v in self.metadata(out).items() if k != key} == self.metadata(src)
        assert all(self.metadata(out)[k] is v for k, v in self.metadata(src).items() if k != key)

    def check_record(self, out: Sequence[Any], items: list[Any], strategy: str) -> list[int]:
        """The one schema, each input once (unless in the record's ``dropped``), documented
        copies; returns the order."""
        order = [r["original_rank"] for r in self.records(out)]
        for rank, (x, i) in enumerate(zip(out, order, strict=True)):
            record = self.metadata(x)[METADATA_KEY]
            assert set(record) == {*RECORD_KEYS, *record_keys(strategy)}
            assert record["strategy"] == strategy and record["rank"] == rank
            assert record["score"] is None or isinstance(record["score"], float)
            assert sorted([*order, *record.get("dropped", [])]) == list(range(len(items)))
            self.check_copy(items[i], x)
        return order

    def component(self, name: str, **options: Any) -> Any:
        """The package's component class ``name``, built with ``options``."""
        return getattr(self.package, name)(**options)

    def compress(self, component: Any, items: Sequence[Any], question: str = QUESTION) -> Any:
        """What the component returns, called synchronously."""
        return self.run(component, items, question, False)

    def from_tuned(self, tuned: str | Path, scorer: Any = None, **options: Any) -> Any:
        return self.package.from_tuned(tuned, scorer, **options)


class LangChainList(LangChainRetriever):
    docs: Any

    def _get_relevant_documents(self, query: str, *, run_manager: object) -> list[Document]:
        return list(self.docs)


class LangChain(Framework):
    """``Document``s and document compressors (``compress_documents``)."""

    name = "langchain"
    package = lc
    components = lc.retrievers.COMPONENTS
    given_order = LangChainGivenOrder
    wrong_item = r"documents\[1\] is a str, not a langchain Document"
    lone_item = "must be a sequence of Documents, not a single Document"
    blank_query = "`question` must be a non-empty string"
    query_type = "{name}: the query must be a str, got"
    spec_error = ValidationError  # pydantic wraps the ModelSpecError of the validator
    text = unwrapped = attrgetter("page_content")
    ident = attrgetter("id")
    metadata = attrgetter("metadata")
    reorderer = attrgetter("reorderer")
    passage = staticmethod(to_passage)

    def wrap(self, text: str, metadata: dict[str, Any], ident: str, score: float) -> Document:
        return Document(page_content=text, metadata=metadata, id=ident)

    def score(self, item: Document) -> float | None:
        return item.metadata.get("relevance_score")  # type: ignore[no-any-return]

    def state(self, item: Document) -> Any:
        return (item.page_content, item.id, item.type, item.metadata)

    def inner(self, item: Document) -> list[int]:
        return containers(item.metadata)

    def check_copy(self, src: Any, out: Any, key: str = METADATA_KEY) -> None:
        super().check_copy(src, out, key)
        assert type(out) is type(src) and out.type == src.type

    def run(self, component: Any, items: Sequence[Any], question: str, use_async: bool) -> Any:
        if use_async:
            return asyncio.run(component.acompress_documents(items, question))
        return component.compress_documents(items, question)

    def unknown_option(self, name: str) -> tuple[type[Exception], str]:
        return ValidationError, rf"{name}\n  Extra inputs are not permitted"

    def retriever(self, items: list[Any], strategy: Any = None, **options: Any) -> Any:
        own = {k: options.pop(k) for k in ("tuned", "scorer", "trust_spec") if k in options}
        return lc.PositionAwareRetriever(
            retriever=LangChainList(docs=items),
            **({} if strategy is None else {"strategy": strategy}),
            **own,
            **({"strategy_options": options} if options else {}),
        )

    def retrieve(self, aware: Any, question: str = QUESTION, use_async: bool = False) -> Any:
        return asyncio.run(aware.ainvoke(question)) if use_async else aware.invoke(question)

    def ask(self, component: Any, items: Sequence[Any], query: Any, use_async: bool) -> Any:
        return self.run(component, items, query, use_async)


class LlamaIndexList(LlamaIndexRetriever):
    def __init__(self, nodes: list[NodeWithScore]) -> None:
        self.nodes = nodes
        super().__init__()

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return list(self.nodes)


class LlamaIndex(Framework):
    """``NodeWithScore``s around ``TextNode``s, and node postprocessors."""

    name = "llama_index"
    package = li
    components = li.COMPONENTS
    given_order = LlamaIndexGivenOrder
    wrong_item = "item 1 is a TextNode, not a NodeWithScore"
    lone_item = "takes a list of NodeWithScore, got NodeWithScore"
    blank_query = "needs the query: call postprocess_nodes"
    query_type = r"{name}: query_bundle\.query_str must be a str, got"
    spec_error = ModelSpecError
    ident = attrgetter("node.node_id")
    metadata = attrgetter("node.metadata")
    score = attrgetter("score")
    reorderer = attrgetter("postprocessor")
    unwrapped = attrgetter("node")

    def wrap(self, text: str, metadata: dict[str, Any], ident: str, score: float) -> Any:
        node = TextNode(text=text, id_=ident, metadata=metadata,
                        excluded_llm_metadata_keys=["source"])  # fmt: skip
        return NodeWithScore(node=node, score=score)

    def text(self, item: NodeWithScore) -> str:
        return item.node.get_content(metadata_mode=MetadataMode.NONE)

    def passage(self, item: NodeWithScore) -> Passage:
        return node_passage(item, "title")

    def state(self, item: NodeWithScore) -> Any:
        return (item.score, item.node.model_dump())

    def inner(self, item: NodeWithScore) -> list[int]:
        node = item.node
        return [id(node), *containers(node.metadata), *(id(getattr(node, k)) for k in EXCLUDED)]

    def check_copy(self, src: Any, out: Any, key: str = METADATA_KEY) -> None:
        """Also a new node, the record's key kept out of prompts and embeddings (once, the
        node's own excluded keys kept), the retriever's score kept."""
        super().check_copy(src, out, key)
        node, before = out.node, src.node
        assert node is not before and type(node) is type(before) and out.score == src.score
        for name in EXCLUDED:
            keys = getattr(node, name)
            assert keys.count(key) == 1 and set(getattr(before, name)) <= set(keys)
        for mode in (MetadataMode.LLM, MetadataMode.EMBED):
            assert key not in node.get_content(metadata_mode=mode)

    def run(self, component: Any, items: Sequence[Any], question: str, use_async: bool) -> Any:
        if use_async:
            return asyncio.run(component.apostprocess_nodes(items, query_str=question))
        return component.postprocess_nodes(items, query_str=question)

    def unknown_option(self, name: str) -> tuple[type[Exception], str]:
        return TypeError, f"unknown options {name}"

    def retriever(self, items: list[Any], strategy: Any = None, **options: Any) -> Any:
        return li.PositionAwareRetriever(LlamaIndexList(items), strategy, **options)

    def retrieve(self, aware: Any, question: str = QUESTION, use_async: bool = False) -> Any:
        return asyncio.run(aware.aretrieve(question)) if use_async else aware.retrieve(question)

    def ask(self, component: Any, items: Sequence[Any], query: Any, use_async: bool) -> Any:
        bundle = QueryBundle(query_str=query)
        if use_async:
            return asyncio.run(component.apostprocess_nodes(items, query_bundle=bundle))
        return component.postprocess_nodes(items, query_bundle=bundle)


FRAMEWORKS = [
    pytest.param(LangChain(), id="langchain"),
    pytest.param(LlamaIndex(), id="llama_index"),
]
"""The ``fw`` parameter of the shared component tests: each framework once."""
