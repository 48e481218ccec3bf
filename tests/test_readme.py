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
        assert all(d.metadata["rag_position"]["strategy"] == "passage_likelihood" for d in docs)
        assert docs[0].page_content == "Paris is the capital of France."  # the gold first
        assert capsys.readouterr().out.strip()  # the chain's printed answer
    else:
        response = namespace["response"]
        assert response.source_nodes  # type: ignore[attr-defined]
        assert all("rag_position" in n.node.metadata for n in response.source_nodes)  # type: ignore[attr-defined]
        assert response.source_nodes[0].node.text == "Paris is the capital of France."  # type: ignore[attr-defined]
        assert capsys.readouterr().out.strip()  # the printed answer


SCALE_OUT = "## Scale out: serve the model with vLLM"


def test_scale_out_examples_run_against_a_real_vllm_server(vllm_server: object) -> None:
    """The "Scale out" section's LangChain and LlamaIndex blocks, pointed at the session's vLLM."""
    from langchain_core.documents import Document
    from llama_index.core.schema import NodeWithScore, TextNode

    text = README.read_text(encoding="utf-8")
    section = text.split(SCALE_OUT, 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 2
    url = "http://127.0.0.1:8000/v1"
    texts = ["Lyon is in France.", "Paris is the capital of France.", "Rome is in Italy."]
    for i, block in enumerate(blocks):
        assert url in block and f'"{vllm_server.name}"' in block  # type: ignore[attr-defined]
        namespace: dict[str, object] = {}
        code = block.replace(url, vllm_server.base_url)  # type: ignore[attr-defined]
        exec(compile(code, f"README.md Scale out block {i}", "exec"), namespace)
        reorder = namespace["reorder"]
        if i == 0:
            docs = reorder.compress_documents(  # type: ignore[attr-defined]
                [Document(page_content=t) for t in texts], "What is the capital of France?"
            )
            assert sorted(d.page_content for d in docs) == sorted(texts)
        else:
            nodes = reorder.postprocess_nodes(  # type: ignore[attr-defined]
                [NodeWithScore(node=TextNode(text=t)) for t in texts],
                query_str="What is the capital of France?",
            )
            assert sorted(n.node.text for n in nodes) == sorted(texts)
