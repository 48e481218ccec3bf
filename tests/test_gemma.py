"""Gemma 3 270M, the opt-in second model (``embedded:gemma3-270m``, the ``[gemma]`` extra).

A pretrained base model (no chat template: the eval takes the answer's first line) with a
262k-token vocabulary, sliding-window attention and a 32k-token window; CI runs it for real.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from _backends_kit import check_first_line_eval

from rag_position.errors import ModelSpecError
from rag_position.eval.engine.common import answer_stop
from rag_position.models import find_backend, load_model
from rag_position.models.embedded import GEMMA_PACKAGE, gemma_gguf_path
from rag_position.prompts import render_qa

# ten passages, about 2,000 tokens: past Gemma 3's 512-token sliding window
LONG = ["The Eiffel Tower was built from 1887 to 1889 on the Champ de Mars in Paris. " * 8] * 10
HAMLET = render_qa("Who wrote Hamlet?", ["Hamlet is a tragedy by William Shakespeare."])


@pytest.fixture(scope="module")
def gemma() -> Any:
    return load_model("embedded:gemma3-270m", dtype="float32")


def test_its_own_row_whose_missing_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the extra, the error names it and the licence."""
    backend = find_backend("embedded:gemma3-270m")
    assert backend is not None and backend.prefix == "embedded:gemma3-270m"
    real = importlib.util.find_spec

    def hide(name: str, *a: Any) -> Any:
        return None if name == GEMMA_PACKAGE else real(name, *a)

    monkeypatch.setattr(importlib.util, "find_spec", hide)
    with pytest.raises(ModelSpecError, match=r"rag-position\[gemma\].*Gemma Terms of Use"):
        load_model("embedded:gemma3-270m")


def test_the_gguf_is_assembled_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_POSITION_CACHE", str(tmp_path))
    path = gemma_gguf_path()
    assert path.parent == tmp_path / "gguf" and path.stat().st_size > 200_000_000
    stamp = path.stat().st_mtime_ns
    assert gemma_gguf_path() == path and path.stat().st_mtime_ns == stamp  # not rewritten
    assert [p.name for p in (tmp_path / "gguf").iterdir()] == [path.name]  # no temporary left


@pytest.mark.slow
def test_gemma_is_a_completion_model_with_its_own_window_that_scores_spans(gemma: Any) -> None:
    assert gemma.name == "embedded:gemma-3-270m"
    assert gemma.use_chat_template is False
    assert gemma.max_context == 32768
    assert answer_stop(gemma) == ("\n",)
    start = HAMLET.index("Who wrote Hamlet?")
    (score,) = gemma.score_spans([HAMLET], [(start, start + len("Who wrote Hamlet?"))])
    assert score.n_tokens >= 4 and -20 < score.mean < 0


@pytest.mark.slow
def test_batched_answers_equal_one_by_one_past_the_sliding_window(gemma: Any) -> None:
    prompts = [
        HAMLET,
        render_qa("When was the Eiffel Tower built?", LONG),
        render_qa("What is the capital of France?", ["Paris is the capital of France."] * 3),
    ]
    assert gemma.count_tokens(prompts[1]) > 1024
    batched = gemma.generate(prompts, max_new_tokens=16, stop=["\n"])
    assert gemma.split_prefill  # a plain cache: batched on CPU
    gemma.split_prefill = False  # transformers' generate
    try:
        alone = [gemma.generate([p], max_new_tokens=16, stop=["\n"])[0] for p in prompts]
    finally:
        gemma.split_prefill = True
    assert batched == alone
    assert "Shakespeare" in batched[0] and "1887" in batched[1]
    assert all("\n" not in answer for answer in batched)


@pytest.mark.slow
def test_the_eval_takes_a_completion_models_first_line(gemma: Any, tmp_path: Path) -> None:
    check_first_line_eval(gemma, tmp_path)
