"""A new ordering strategy takes five files; this test adds one, as a demo row, to prove it.

The five files a new reordering strategy with components in both frameworks touches:

1. ``rag_position/strategies/_<name>.py``: the core function, its options annotated once
   (``Annotated[type, opt("description", ge=1)]``);
2. ``rag_position/strategies/registry.py``: its row (function, models it needs,
   ``component`` class name, ``record_keys`` and ``record``, ``check``, ``seed_group``);
3. ``rag_position/strategies/__init__.py``: the export;
4. ``integrations/langchain/langchain_rag_position/compressors.py``: one line,
   ``NewReorder = table_compressor("NewReorder")`` (and its ``__all__``);
5. ``integrations/llama_index/llama_index/postprocessor/rag_position/base.py``: one line,
   ``NewReorder = table_postprocessor("NewReorder")`` (and its ``__all__``).

Both packages' ``__init__`` re-export those modules' ``__all__``; the retrievers'
strategy lists (``COMPONENTS``), the option models, the metadata records and the eval
are derived from the row. Here the row lives in the test (the table is patched), and the
components are built exactly as the five-line recipe builds them.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType
from typing import Annotated, Any, TypeVar

import pytest

pytest.importorskip("langchain_rag_position")
pytest.importorskip("llama_index.postprocessor.rag_position")

from langchain_core.documents import Document
from langchain_rag_position.compressors import table_compressor
from llama_index.core.schema import NodeWithScore, TextNode
from llama_index.postprocessor.rag_position.base import table_postprocessor
from pydantic import ValidationError

import rag_position._integration.reorder as reorder
from rag_position import Cost
from rag_position._integration import RECORD_KEYS, component_rows
from rag_position.strategies import STRATEGIES, OrderingResult, StrategySpec
from rag_position.strategies._base import check_passages, check_question
from rag_position.strategies._options import opt

T = TypeVar("T")


def reverse_order(
    question: str,
    passages: Sequence[T],
    *,
    keep_first: Annotated[bool, opt("Keep the first passage where it is.")] = False,
    rotate: Annotated[
        int, opt("Then move this many passages from the front to the end.", ge=0)
    ] = 0,
) -> OrderingResult[T]:
    """The passages in reverse order (a demo strategy: file 1 of 5)."""
    check_question(question)
    items = check_passages(passages)
    order = list(range(len(items)))[::-1]
    if keep_first and order:
        order = [0, *order[:-1]]
    order = order[rotate:] + order[:rotate]
    return OrderingResult(passages=[items[i] for i in order], order=order, scores=[], cost=Cost())


ROW = StrategySpec(  # file 2 of 5: the row
    "reverse_demo",
    reverse_order,
    summary="the given order, reversed",
    component="ReverseReorder",
    record_keys=MappingProxyType({"reversed": False}),
    record=lambda result: (None, [{"reversed": True} for _ in result.order]),
)


@pytest.fixture
def table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reorder, "STRATEGIES", MappingProxyType({**STRATEGIES, ROW.name: ROW}))


def test_the_row_gives_the_option_model_from_the_signature() -> None:
    fields = ROW.option_model.model_fields
    assert set(fields) == {"keep_first", "rotate"}
    assert fields["keep_first"].description == "Keep the first passage where it is."
    assert fields["rotate"].default == 0
    with pytest.raises(ValidationError):
        ROW.option_model(rotate=-1)  # the constraint declared in the signature


@pytest.mark.usefixtures("table")
def test_a_new_row_reaches_both_retrievers_lists() -> None:
    assert component_rows()["reverse_demo"] is ROW


@pytest.mark.usefixtures("table")
def test_a_new_row_becomes_a_langchain_compressor_in_one_line() -> None:
    reverse = table_compressor("ReverseReorder")  # file 4 of 5
    assert reverse.__name__ == "ReverseReorder" and "keep_first" in (reverse.__doc__ or "")
    docs = [Document(page_content=f"passage {i}", metadata={"i": i}) for i in range(4)]
    out = reverse(keep_first=True).compress_documents(docs, "Which passage?")
    assert [d.metadata["i"] for d in out] == [0, 3, 2, 1]
    records = [d.metadata["rag_position"] for d in out]
    assert all(set(r) == {*RECORD_KEYS, "reversed"} for r in records)
    assert [r["original_rank"] for r in records] == [0, 3, 2, 1]
    assert all(r["strategy"] == "reverse_demo" and r["reversed"] for r in records)
    assert all("rag_position" not in d.metadata for d in docs)  # inputs untouched
    one = reverse().compress_documents(docs[:1], "Which passage?")
    assert one[0].metadata["rag_position"]["reversed"] is False  # not scored: unscored value
    rotated = reverse(rotate=1).compress_documents(docs, "Which passage?")
    assert [d.metadata["i"] for d in rotated] == [2, 1, 0, 3]
    with pytest.raises(ValidationError):
        reverse(rotate=-1)


@pytest.mark.usefixtures("table")
def test_a_new_row_becomes_a_llamaindex_postprocessor_in_one_line() -> None:
    reverse = table_postprocessor("ReverseReorder")  # file 5 of 5
    assert reverse.class_name() == "RagPositionReverseReorder"
    nodes = [NodeWithScore(node=TextNode(text=f"passage {i}", metadata={"i": i})) for i in range(4)]
    out = reverse().postprocess_nodes(nodes, query_str="Which passage?")
    assert [n.node.metadata["i"] for n in out] == [3, 2, 1, 0]
    records: list[dict[str, Any]] = [n.node.metadata["rag_position"] for n in out]
    assert all(set(r) == {*RECORD_KEYS, "reversed"} for r in records)
    assert reverse(keep_first=True).to_dict()["keep_first"] is True
