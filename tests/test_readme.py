"""The README: its two commands first and exact, its links live, its pipeline examples run.

The README is the page a newcomer reads first, so it stays short; the measurements and
the reference live under docs/ (tests/test_docs.py builds those pages). The serving
examples moved with the rest of the "Scale out" section to docs/serving.md and run here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
SECTION = "## In your LangChain or LlamaIndex pipeline"
# CI runs the second command as written (.ci/run); a newcomer runs the first.
COMMANDS = [
    "bash scripts/setup.sh && .venv/bin/rag-position eval quick",
    "bash scripts/setup.sh --dev && .venv/bin/python -m pytest -q --all -n 2",
]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _text(path: Path = README) -> str:
    return path.read_text(encoding="utf-8")


def _blocks() -> list[str]:
    section = _text().split(SECTION, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_the_two_commands_come_first_and_exact() -> None:
    blocks = re.findall(r"^```(\w*)\n(.*?)^```", _text(), flags=re.S | re.M)
    assert [(lang, code.strip()) for lang, code in blocks[:2]] == [("bash", c) for c in COMMANDS]


def test_the_readme_stays_short() -> None:
    assert len(_text().splitlines()) < 300


def _slug(heading: str) -> str:
    """The anchor MkDocs (Python-Markdown's toc) gives a heading."""
    from markdown.extensions.toc import slugify

    return slugify(re.sub(r"`", "", heading), "-")


def test_the_readme_links_resolve() -> None:
    """Every relative link names a file of the repository, and an anchor one of its headings."""
    for url in LINK.findall(_text()):
        if "://" in url:
            continue
        path, _, anchor = url.partition("#")
        target = ROOT / path
        assert target.exists(), url
        if anchor:
            headings = re.findall(r"^#+ (.+)$", _text(target), flags=re.M)
            assert anchor in {_slug(h) for h in headings}, url


def test_the_readme_leads_to_every_docs_page() -> None:
    linked = {url.partition("#")[0] for url in LINK.findall(_text())}
    pages = {p.relative_to(ROOT).as_posix() for p in DOCS.rglob("*.md")}
    assert pages <= linked, sorted(pages - linked)


def test_the_measurements_page_holds_every_measured_section() -> None:
    text = _text(DOCS / "measurements.md")
    for section in [
        "## Measured: `eval quick` on the embedded model",
        "## Measured: the U-curve on the embedded model, 200 questions",
        "## Measured: the ordering strategies, gold at a random position (200 questions)",
        "## Measured: identifying the gold passage, by design and cost",
        "## Measured: select, then place (200 questions)",
        "## Measured: the open-domain curve on the embedded model",
        "## Measured: key-value retrieval and SWiM on the embedded model",
        "## Measured: FACT on multi-value needles (`eval multifact`)",
        "## Measured: recite-then-solve as context grows (`eval length`)",
        "## Measured: medoid voting at the worst position (`eval voting`)",
    ]:
        assert f"\n{section}\n" in text, section
    assert not re.search(r"^#+ Measured:", _text(), flags=re.M)  # the README links there


def test_the_section_has_both_examples() -> None:
    blocks = _blocks()
    assert len(blocks) == 2
    assert "langchain_rag_position" in blocks[0]
    assert "llama_index.postprocessor.rag_position" in blocks[1]


@pytest.mark.slow
@pytest.mark.parametrize("index", [0, 1], ids=["langchain", "llama_index"])
def test_pipeline_example_runs(
    index: int, capsys: pytest.CaptureFixture[str], vllm_server: object
) -> None:
    """A small local scorer in front of the reader served by the session's vLLM."""
    block = _blocks()[index]
    url = "http://127.0.0.1:8000/v1"
    assert url in block and f'"{vllm_server.name}"' in block  # type: ignore[attr-defined]
    code = block.replace(url, vllm_server.base_url)  # type: ignore[attr-defined]
    namespace: dict[str, object] = {}
    exec(compile(code, f"README.md block {index}", "exec"), namespace)
    if index == 0:
        docs = namespace["docs"]
        assert isinstance(docs, list)
        texts = [d.page_content for d in docs]  # a selection of the three texts, each once
        assert len(set(texts)) == len(texts) and set(texts) <= {
            "Lyon is in France.",
            "Paris is the capital of France.",
            "Rome is in Italy.",
        }
        assert all(d.metadata["rag_position"]["strategy"] == "select_and_place" for d in docs)
        assert docs[-1].page_content == "Paris is the capital of France."  # the gold last
        dropped = docs[0].metadata["rag_position"]["dropped"]
        assert len(docs) + len(dropped) == 3  # what it left out is listed
        assert capsys.readouterr().out.strip()  # the chain's printed answer
    else:
        response = namespace["response"]
        assert response.source_nodes  # type: ignore[attr-defined]
        assert all("rag_position" in n.node.metadata for n in response.source_nodes)  # type: ignore[attr-defined]
        assert response.source_nodes[-1].node.text == "Paris is the capital of France."  # type: ignore[attr-defined]
        assert capsys.readouterr().out.strip()  # the printed answer


SERVING = DOCS / "serving.md"
SCALE_OUT = "# Scale out: serve the model with vLLM"


@pytest.mark.slow
def test_scale_out_examples_run_against_a_real_vllm_server(vllm_server: object) -> None:
    """docs/serving.md's LangChain and LlamaIndex blocks, pointed at the session's vLLM."""
    from langchain_core.documents import Document
    from llama_index.core.schema import NodeWithScore, TextNode

    text = _text(SERVING)
    assert text.startswith(SCALE_OUT + "\n")
    section = text.split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 2
    url = "http://127.0.0.1:8000/v1"
    texts = ["Lyon is in France.", "Paris is the capital of France.", "Rome is in Italy."]
    for i, block in enumerate(blocks):
        assert url in block and f'"{vllm_server.name}"' in block  # type: ignore[attr-defined]
        namespace: dict[str, object] = {}
        code = block.replace(url, vllm_server.base_url)  # type: ignore[attr-defined]
        exec(compile(code, f"docs/serving.md block {i}", "exec"), namespace)
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
