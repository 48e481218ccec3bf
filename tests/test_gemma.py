"""Gemma 3 270M, the opt-in second model (``embedded:gemma3-270m``, the ``[gemma]`` extra).

A different family from the embedded SmolLM2: the pretrained base model (no chat
template, so a prompt goes in as plain text and the eval takes the answer's first
line), a 262k-token vocabulary, sliding-window attention and a 32k-token window. The
dev extra installs it, so these tests run in CI on the real model.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from rag_position.errors import ModelSpecError
from rag_position.eval import run_multidoc
from rag_position.eval.engine.common import answer_stop
from rag_position.models import find_backend, load_model
from rag_position.models.embedded import GEMMA_PACKAGE, gemma_gguf_path
from rag_position.prompts import render_qa

LONG = ["The Eiffel Tower was built from 1887 to 1889 on the Champ de Mars in Paris. " * 8] * 10
"""Ten passages, about 2,000 tokens: past Gemma 3's 512-token sliding window."""


@pytest.fixture(scope="module")
def gemma() -> Iterator[object]:
    yield load_model("embedded:gemma3-270m", dtype="float32")


def test_the_spec_is_its_own_backend_row() -> None:
    backend = find_backend("embedded:gemma3-270m")
    assert backend is not None and backend.prefix == "embedded:gemma3-270m"
    assert find_backend("embedded").prefix == "embedded"  # type: ignore[union-attr]


def test_without_the_extra_the_error_names_it_and_the_licence(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == GEMMA_PACKAGE else real(name, *a),
    )
    with pytest.raises(ModelSpecError, match=r"rag-position\[gemma\].*Gemma Terms of Use"):
        load_model("embedded:gemma3-270m")


def test_the_file_is_assembled_once_into_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_POSITION_CACHE", str(tmp_path))
    path = gemma_gguf_path()
    assert path.parent == tmp_path / "gguf" and path.stat().st_size > 200_000_000
    stamp = path.stat().st_mtime_ns
    assert gemma_gguf_path() == path and path.stat().st_mtime_ns == stamp  # not rewritten
    assert [p.name for p in (tmp_path / "gguf").iterdir()] == [path.name]  # no temporary left


@pytest.mark.slow
def test_gemma_is_a_completion_model_with_its_own_window(gemma: object) -> None:
    assert gemma.name == "embedded:gemma-3-270m"  # type: ignore[attr-defined]
    assert gemma.use_chat_template is False  # type: ignore[attr-defined]
    assert gemma.max_context == 32768  # type: ignore[attr-defined]
    assert answer_stop(gemma) == ("\n",)


@pytest.mark.slow
def test_batched_answers_equal_one_by_one_past_the_sliding_window(gemma: object) -> None:
    prompts = [
        render_qa("Who wrote Hamlet?", ["Hamlet is a tragedy by William Shakespeare."]),
        render_qa("When was the Eiffel Tower built?", LONG),
        render_qa("What is the capital of France?", ["Paris is the capital of France."] * 3),
    ]
    assert gemma.count_tokens(prompts[1]) > 1024  # type: ignore[attr-defined]
    batched = gemma.generate(prompts, max_new_tokens=16, stop=["\n"])  # type: ignore[attr-defined]
    assert gemma.split_prefill  # type: ignore[attr-defined]  # a plain cache: batched on CPU
    gemma.split_prefill = False  # type: ignore[attr-defined]  # transformers' generate
    try:
        alone = [gemma.generate([p], max_new_tokens=16, stop=["\n"])[0] for p in prompts]  # type: ignore[attr-defined]
    finally:
        gemma.split_prefill = True  # type: ignore[attr-defined]
    assert batched == alone
    assert "Shakespeare" in batched[0] and "1887" in batched[1]
    assert all("\n" not in answer for answer in batched)


@pytest.mark.slow
def test_gemma_scores_spans(gemma: object) -> None:
    prompt = render_qa("Who wrote Hamlet?", ["Hamlet is a tragedy by William Shakespeare."])
    start = prompt.index("Who wrote Hamlet?")
    (score,) = gemma.score_spans([prompt], [(start, start + len("Who wrote Hamlet?"))])  # type: ignore[attr-defined]
    assert score.n_tokens >= 4 and -20 < score.mean < 0


@pytest.mark.slow
def test_the_eval_takes_a_completion_models_first_line(gemma: object, tmp_path: Path) -> None:
    result = run_multidoc(gemma, questions=1, positions=[0], baselines=False, out=tmp_path)
    (record,) = [json.loads(line) for line in (tmp_path / "predictions.jsonl").open()]
    assert record["decoding"]["stop"] == ["\n"]
    assert record["prediction"].strip() and "\n" not in record["prediction"]
    assert "first line break" in result.report.read_text()
