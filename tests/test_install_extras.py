"""The core installs without torch: what a remote-only user imports works, and what needs an
extra says which (in a subprocess where torch, transformers, sentence-transformers and
matplotlib cannot be imported, as after ``pip install rag-position`` with no extras)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

BLOCKED = ("torch", "transformers", "sentence_transformers", "matplotlib", "accelerate", "gguf")

SCRIPT = textwrap.dedent(
    f"""
    import importlib.abc, sys

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {BLOCKED!r}:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return None

    sys.meta_path.insert(0, Block())
    import rag_position
    from rag_position import STRATEGIES, Passage, load_model
    from rag_position.errors import ModelSpecError
    import rag_position.eval, rag_position.data
    from rag_position.models.openai_backend import OpenAICompatibleModel

    docs = [Passage("Paris is in France."), Passage("Rome is in Italy."), Passage("Oslo.")]
    assert STRATEGIES["edge"]("Where is Paris?", docs).passages[0] is docs[0]
    model = load_model("openai:http://127.0.0.1:9/v1/m", max_retries=0)
    assert type(model).__name__ == "OpenAICompatibleModel"
    try:
        load_model("embedded")
    except ModelSpecError as err:
        assert "rag-position[local]" in str(err), err
    else:
        raise AssertionError("load_model('embedded') worked without torch")
    # the eval draws plots: without [eval] a run is refused before it writes anything
    import os, tempfile
    from rag_position.eval import EvalConfigError, run_kv

    class Echo:
        name = "echo"
        def generate(self, prompts, **options):
            return ["x"] * len(prompts)

    out = os.path.join(tempfile.mkdtemp(), "kv")
    try:
        run_kv(Echo(), pairs=3, questions=1, out=out, progress=False)
    except EvalConfigError as err:
        assert "rag-position[eval]" in str(err), err
    else:
        raise AssertionError("an eval ran without matplotlib")
    assert not os.path.exists(out)
    print("ok")
    """
)


def test_the_core_imports_and_runs_without_torch() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stderr
