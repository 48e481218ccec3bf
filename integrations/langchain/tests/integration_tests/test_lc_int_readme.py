"""Every ```python example of the package README runs as written, in order, on the embedded
models (one namespace, as a reader pasting them one after the other)."""

from __future__ import annotations

import re
from pathlib import Path

import langchain_rag_position
import pytest

pytestmark = pytest.mark.slow

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```", README.read_text(encoding="utf-8"), re.S | re.M)


def test_every_public_component_has_an_example() -> None:
    code = "\n".join(BLOCKS)
    public = [n for n in langchain_rag_position.__all__ if n[0].isupper() and n != "METADATA_KEY"]
    missing = [n for n in public if n not in code and not n.startswith("LangChain")]
    assert not missing, f"README has no example for {missing}"
    for block in BLOCKS[1:]:  # after the shared setup: five lines per component
        assert len([ln for ln in block.splitlines() if ln.strip()]) == 5, block


def test_readme_examples_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert len(BLOCKS) >= 12
    namespace: dict[str, object] = {"__name__": "readme"}
    for i, block in enumerate(BLOCKS):
        exec(compile(block, f"README.md[python block {i}]", "exec"), namespace)
    printed = capsys.readouterr().out
    assert "rag_position" not in printed or "strategy" in printed
    docs = namespace["docs"]
    assert isinstance(docs, list) and len(docs) == 3
