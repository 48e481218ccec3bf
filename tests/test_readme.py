"""The README's pipeline examples run as written, on the embedded models (nothing downloaded)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
SECTION = "## In your LangChain or LlamaIndex pipeline"

pytestmark = pytest.mark.slow


def _blocks() -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_the_section_has_both_examples() -> None:
    blocks = _blocks()
    assert len(blocks) == 2
    assert "langchain_rag_position" in blocks[0]
    assert "llama_index.postprocessor.rag_position" in blocks[1]


@pytest.mark.parametrize("index", [0, 1], ids=["langchain", "llama_index"])
def test_pipeline_example_runs(index: int, capsys: pytest.CaptureFixture[str]) -> None:
    namespace: dict[str, object] = {}
    exec(compile(_blocks()[index], f"README.md block {index}", "exec"), namespace)
    if index == 0:
        docs = namespace["docs"]
        assert isinstance(docs, list)
        assert sorted(d.page_content for d in docs) == [  # a permutation of the three texts
            "Lyon is in France.",
            "Paris is the capital of France.",
            "Rome is in Italy.",
        ]
        assert all(d.metadata["rag_position"]["strategy"] == "convex_score" for d in docs)
        assert capsys.readouterr().out.strip()  # the chain's printed answer
    else:
        response = namespace["response"]
        assert response.source_nodes  # type: ignore[attr-defined]
        assert all("rag_position" in n.node.metadata for n in response.source_nodes)  # type: ignore[attr-defined]
        assert capsys.readouterr().out.strip()  # the printed answer
