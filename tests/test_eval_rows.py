"""No eval module outside the row table (:mod:`rag_position.eval.rows` and the modules defining
rows) names a strategy or a variant (issue 40, target 1). Docstrings do not count; a string that
only shares a row's name (open-domain's ``retriever``) is marked ``# not a row`` on its line."""

from __future__ import annotations

import ast
from pathlib import Path

from rag_position.eval import rows
from rag_position.eval.rows.attention_sort import ATTENTION_ROWS
from rag_position.eval.rows.catalog import builtin_strategies
from rag_position.eval.rows.lingua import LINGUA_ROWS
from rag_position.eval.rows.peers import PEER_ROWS
from rag_position.strategies import STRATEGIES

EVAL = Path(__file__).resolve().parents[1] / "rag_position" / "eval"
ROW_TABLE = {
    "rows/__init__.py",
    "rows/catalog.py",
    "rows/peers.py",
    "rows/lingua.py",
    "rows/attention_sort.py",
}
MARK = "# not a row"


def _row_names() -> set[str]:
    names = {*STRATEGIES, *builtin_strategies(), *PEER_ROWS, *LINGUA_ROWS, *ATTENTION_ROWS}
    for name, value in vars(rows).items():  # and the tasks' own (single_pass, direct)
        if name.endswith(("_ROWS", "_STRATEGIES")):
            names.update(value)
    return names


def _named(path: Path, names: set[str]) -> list[str]:
    """The strings in ``path`` that name a row, as ``line: 'text'``."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    tree = ast.parse(source)
    docs = {  # documentation: any string standing alone as a statement
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    hits = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docs
        and (node.value in names or node.value.split(":", 1)[0] in names)
        and MARK not in lines[node.lineno - 1]
    ]
    return [f"{node.lineno}: {node.value!r}" for node in sorted(hits, key=lambda n: n.lineno)]


def test_only_the_row_table_names_strategies() -> None:
    names = _row_names()
    assert {"retriever", "select_and_place", "random", "langchain_reorder", "direct"} <= names
    found = {
        str(path.relative_to(EVAL)): hits
        for path in sorted(EVAL.rglob("*.py"))
        if str(path.relative_to(EVAL)) not in ROW_TABLE and (hits := _named(path, names))
    }
    assert not found, f"eval modules naming a strategy (move it to eval/rows/__init__.py): {found}"
