"""Property tests (hypothesis) for every LangChain reorderer: the conformance kit's adapter
(the contract: integrations/langchain/README.md "The metadata key")."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import langchain_rag_position
from hypothesis import strategies as st
from langchain_core.documents import BaseDocumentCompressor, BaseDocumentTransformer, Document
from langchain_rag_position import EdgeReorder, EdgeReorderTransformer, PositionAwareRetriever
from langchain_rag_position.retrievers import COMPONENTS
from lc_testkit import ListRetriever

from rag_position.testing.conformance import ComponentConformance, containers
from rag_position.testing.strategies import metadata_dicts, texts, with_repeats


class TestLangChainReorderers(ComponentConformance):
    max_examples = 80
    components = COMPONENTS
    alike: ClassVar[dict[type, type]] = {EdgeReorderTransformer: EdgeReorder}
    package = langchain_rag_position
    reorderer_base = (BaseDocumentCompressor, BaseDocumentTransformer)
    item_type = Document

    def items(self, max_n: int, scores: st.SearchStrategy[Any]) -> st.SearchStrategy[list[Any]]:
        ids = st.one_of(st.none(), st.text(max_size=5))
        docs = st.builds(Document, page_content=texts, metadata=metadata_dicts(scores), id=ids)
        return with_repeats(docs, max_n)

    def wrap(self, text: str, metadata: dict[str, Any], ident: str) -> Document:
        return Document(page_content=text, metadata=metadata, id=ident)

    def run(self, reorderer: Any, items: Sequence[Any], question: Any, use_async: bool) -> Any:
        if isinstance(reorderer, BaseDocumentCompressor):
            if use_async:
                return list(asyncio.run(reorderer.acompress_documents(items, question)))
            return list(reorderer.compress_documents(items, question))
        if use_async:
            return list(asyncio.run(reorderer.atransform_documents(items)))
        return list(reorderer.transform_documents(items))

    def state(self, item: Document) -> Any:
        return (item.page_content, item.id, item.type, item.metadata)

    def inner(self, item: Document) -> list[int]:
        return containers(item.metadata)

    def metadata(self, item: Document) -> dict[str, Any]:
        return item.metadata

    def check_copy(self, src: Document, out: Document, key: str, *_: Any) -> None:
        assert type(out) is type(src) and out is not src, "not a copy"
        assert (out.page_content, out.id, out.type) == (src.page_content, src.id, src.type)

    def retriever(
        self, items: list[Any], name: str, options: dict[str, Any], data: st.DataObject
    ) -> tuple[Callable[[str, bool], Any], list[Any]]:
        k = data.draw(st.one_of(st.none(), st.integers(1, 32)), label="k")
        retriever = PositionAwareRetriever(
            retriever=ListRetriever(docs=items),
            strategy=name,
            scorer=options.pop("scorer", None),
            strategy_options=options,
            k=k,
        )

        def call(question: str, use_async: bool) -> Any:
            if use_async:
                return asyncio.run(retriever.ainvoke(question))
            return retriever.invoke(question)

        return call, items if k is None else items[:k]

    def broken(self, given: list[Any], out: list[Any]) -> list[list[Any]]:
        deep = [d.model_copy(deep=True) for d in out]  # metadata values copied, not shared
        added = [d.model_copy(update={"metadata": {**d.metadata, "extra": 1}}) for d in out]
        return [deep, added]

    def mutations(self, items: list[Any]) -> list[Callable[[], Any]]:
        return [lambda: setattr(items[2], "metadata", dict(items[2].metadata))]  # an equal dict
