"""A new ordering strategy with components in both frameworks takes five source files.

Added to a copy of the sources (its function with ``Annotated`` options, its registry row,
its component, one line each in the LangChain and LlamaIndex modules), it runs in a fresh
process, nothing patched; the rest (retrievers, option models, records, the eval, the
conformance kit) follows from the rows.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("langchain_rag_position")
pytest.importorskip("llama_index.postprocessor.rag_position")

ROOT = Path(__file__).resolve().parents[1]
TREES = {  # what is copied: every source file of the package and both integrations
    "rag_position": "rag_position",
    "lc/langchain_rag_position": "integrations/langchain/langchain_rag_position",
    "li/llama_index": "integrations/llama_index/llama_index",
}

FUNCTION = '''"""A demo strategy: the passages in reverse order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, TypeVar

from rag_position.cost import Cost
from rag_position.strategies._base import OrderingResult, check_passages, check_question
from rag_position.strategies._options import opt

T = TypeVar("T")


def reverse_order(
    question: str,
    passages: Sequence[T],
    *,
    keep_first: Annotated[bool, opt("Keep the first passage where it is.")] = False,
    rotate: Annotated[int, opt("Then move this many passages to the end.", ge=0)] = 0,
) -> OrderingResult[T]:
    """The passages in reverse order."""
    check_question(question)
    items = check_passages(passages)
    order = list(range(len(items)))[::-1]
    if keep_first and order:
        order = [0, *order[:-1]]
    order = order[rotate:] + order[:rotate]
    return OrderingResult(passages=[items[i] for i in order], order=order, scores=[], cost=Cost())
'''

EDITS = {  # file -> (anchor, text inserted after it)
    "rag_position/strategies/registry.py": [
        ('__all__ = [', '\n    "reverse_order",'),
        ("from rag_position.strategies._select_and_place import select_and_place\n",
         "from rag_position.strategies._reverse_demo import reverse_order\n"),
        ("        for spec in (\n",
         '            StrategySpec("reverse_demo", reverse_order, summary="reversed"),\n'),
    ],
    "rag_position/_integration/components.py": [
        ("COMPONENT_TABLE: tuple[Component, ...] = (\n",
         '    Component("ReverseReorder", ("reverse_demo",), MappingProxyType({"reversed": False}),'
         ' lambda r: (None, [{"reversed": True} for _ in r.order])),\n'),
    ],
    "lc/langchain_rag_position/compressors.py": [
        ('SelectAndPlace = table_compressor("SelectAndPlace")\n',
         'ReverseReorder = table_compressor("ReverseReorder")\n'),
        ("__all__ = [", '\n    "ReverseReorder",'),
    ],
    "li/llama_index/postprocessor/rag_position/base.py": [
        ('SelectAndPlace = table_postprocessor("SelectAndPlace")\n',
         'ReverseReorder = table_postprocessor("ReverseReorder")\n'),
        ("__all__ = [", '\n    "ReverseReorder",'),
    ],
}  # fmt: skip

RUN = """
import json, sys
sys.meta_path[:] = [f for f in sys.meta_path if "Editable" not in type(f).__name__]
sys.path_hooks[:] = [h for h in sys.path_hooks if "editable" not in repr(h).lower()]
sys.path_importer_cache.clear()
sys.path[:0] = [sys.argv[1] + "/" + p for p in ("", "lc", "li")]

from langchain_core.documents import Document
from llama_index.core.schema import NodeWithScore, TextNode
import langchain_rag_position as lc
import llama_index.postprocessor.rag_position as li
import rag_position.strategies as core
from langchain_rag_position.retrievers import COMPONENTS as LC_RETRIEVABLE
from rag_position.eval.rows.catalog import available_strategies
from rag_position.testing.conformance import record_of

docs = [Document(page_content=f"passage {i}", metadata={"i": i}) for i in range(4)]
out = lc.ReverseReorder(keep_first=True).compress_documents(docs, "Which passage?")
nodes = [NodeWithScore(node=TextNode(text=f"passage {i}", metadata={"i": i})) for i in range(4)]
got = li.ReverseReorder(rotate=1).postprocess_nodes(nodes, query_str="Which passage?")
print(json.dumps({
    "files": [m.__file__ for m in (lc, li, core)],
    "exported": [n for m in (core, lc, li) for n in m.__all__ if n.startswith(("Rev", "rev"))],
    "options": sorted(core.STRATEGIES["reverse_demo"].option_model.model_fields),
    "lc": [d.metadata["i"] for d in out],
    "lc_record": out[0].metadata["rag_position"],
    "li": [n.node.metadata["i"] for n in got],
    "retrievable": [c["reverse_demo"].__name__ for c in (LC_RETRIEVABLE, li.COMPONENTS)],
    "eval": "reverse_demo" in available_strategies(),
    "kit": sorted(record_of(lc.ReverseReorder)[1]),
}))
"""


def _digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*.py"))
        if "__pycache__" not in p.parts
    }


def test_a_new_strategy_with_both_frameworks_components_takes_five_files(tmp_path: Path) -> None:
    skip = shutil.ignore_patterns("__pycache__")
    for copy, source in TREES.items():
        shutil.copytree(ROOT / source, tmp_path / copy, ignore=skip)
    before = _digests(tmp_path)
    (tmp_path / "rag_position/strategies/_reverse_demo.py").write_text(FUNCTION)
    for name, edits in EDITS.items():
        path = tmp_path / name
        text = path.read_text()
        for anchor, inserted in edits:
            assert text.count(anchor) == 1, (name, anchor)
            text = text.replace(anchor, anchor + inserted)
        path.write_text(text)
    after = _digests(tmp_path)
    touched = sorted(k for k in after if before.get(k) != after[k])
    assert len(touched) == 5, touched

    command = [sys.executable, "-c", RUN, str(tmp_path)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert all(f.startswith(str(tmp_path)) for f in found["files"]), found["files"]  # the copy
    assert found["exported"] == ["reverse_order", "ReverseReorder", "ReverseReorder"]
    assert found["options"] == ["keep_first", "rotate"]  # from the annotated signature
    assert found["lc"] == [0, 3, 2, 1] and found["li"] == [2, 1, 0, 3]
    assert found["lc_record"]["reversed"] is True and found["lc_record"]["original_rank"] == 0
    assert found["retrievable"] == ["ReverseReorder", "ReverseReorder"]
    assert found["eval"] is True
    assert found["kit"] == sorted({"strategy", "score", "rank", "original_rank", "reversed"})
