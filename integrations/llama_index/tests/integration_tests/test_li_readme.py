"""Every ```python block of the package README runs as written, in order, in one namespace."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import llama_index.postprocessor.rag_position as package
import pytest

pytestmark = pytest.mark.slow

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
COMPONENTS = [
    "LikelihoodReorder",
    "ConvexScoreReorder",
    "PassageLikelihoodReorder",
    "ProfileReorder",
    "EdgeReorder",
    "PositionAwareRetriever",
    "QuerySandwichQueryEngine",
    "ReciteThenSolveQueryEngine",
    "FactQueryEngine",
    "MedoidVotingQueryEngine",
    "RagPositionLLM",
    "RagPositionEmbedding",
    "OpenAILike",
]


def _blocks() -> list[str]:
    return BLOCK.findall(README.read_text(encoding="utf-8"))


def test_every_component_has_a_short_example() -> None:
    blocks = _blocks()
    for name in COMPONENTS:
        examples = [b for b in blocks if f"{name}(" in b or f"{name}.from_index(" in b]
        assert examples, f"no README example constructs {name}"
        assert min(sum(1 for line in b.splitlines() if line.strip()) for b in examples) <= 5, name
    for name in package.__all__:
        assert name in README.read_text(encoding="utf-8") or name.islower() or "_" in name, name


SERVER_URL = "http://127.0.0.1:8000/v1"  # the README's vLLM example: `rag-position serve`


def test_readme_examples_run_as_written() -> None:
    namespace: dict[str, Any] = {"__name__": "__readme__"}
    out = io.StringIO()
    blocks = _blocks()
    assert len(blocks) >= 13
    for i, code in enumerate(blocks):
        if SERVER_URL in code:
            continue  # run against the session's vLLM server below

        with contextlib.redirect_stdout(out):
            try:
                exec(compile(code, f"README.md block {i}", "exec"), namespace)
            except Exception as exc:
                raise AssertionError(f"README block {i} failed:\n{code}") from exc
    printed = out.getvalue()
    assert "'strategy': 'convex_score'" in printed and "'original_rank'" in printed
    assert "Hamlet is a play by William Shakespeare." in printed
    assert printed.count("Question: Who wrote Hamlet?") >= 2  # the sandwich prompt, printed
    response = namespace["response"]
    assert len(response.metadata["rag_position"]["answers"]) == 3  # the medoid engine ran last
    assert namespace["llm"].core_model is not None


def test_the_vllm_example_runs_against_a_real_server(vllm_server: Any) -> None:
    """The README's OpenAILike example, its URL pointed at the session's vLLM server."""
    blocks = _blocks()
    first = next(i for i, b in enumerate(blocks) if SERVER_URL in b)
    namespace: dict[str, Any] = {"__name__": "__readme__"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for code in blocks[:first]:  # what the example builds on (nodes, imports)
            exec(compile(code, "README.md", "exec"), namespace)
        code = blocks[first].replace(SERVER_URL, vllm_server.base_url)
        assert vllm_server.name == "smollm2-135m-instruct"
        assert f'"{vllm_server.name}"' in code
        exec(compile(code, f"README.md block {first}", "exec"), namespace)
    assert "'strategy': 'likelihood_selection'" in out.getvalue().splitlines()[-1]
