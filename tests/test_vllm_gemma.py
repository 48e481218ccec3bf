"""Gemma 3 270M served by vLLM (``rag-position serve --model embedded:gemma3-270m``).

The server is the module's ``vllm_gemma_server`` (root conftest.py): started by
``rag-position serve --model embedded:gemma3-270m --port 0 --dtype float32
--max-model-len 4096``, the way a user starts it. Gemma 3 is the pretrained base model:
no chat template, so the ``openai:`` backend finds (asking the server's /tokenize, not
by generating) that it must send raw prompts, and the eval takes the answer's first
line. The local reference is the same exported weights in float32 with the chat
template off. Where vLLM is missing or cannot start, every test here is skipped and
the summary says why.

Measured (vLLM 0.32.0 CPU build, float32, 2-core AMD EPYC; 10-passage prompts of
1,100-1,200 tokens, past Gemma 3's 512-token sliding window, and a 160-token one; three
server starts): the mean log-probability of a span differs from the local backend's by
at most 3.7e-6 through forced generation and 1.7e-6 through echo, the float32 rounding
of two implementations (SmolLM2: 3.9e-6 forced, 4.1e-6 echo). SCORE_BOUND allows 27x the larger,
as tests/test_vllm_server.py allows SmolLM2 25x. Token counts and greedy answers are
equal. (With ``--dtype auto`` vLLM serves these float32 weights in bfloat16: 2e-2.)
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rag_position.data import ORACLE_FILE, default_data_dir, load_qa
from rag_position.eval import run_multidoc
from rag_position.eval.engine.common import answer_stop
from rag_position.models import load_model
from rag_position.models.openai_backend import OpenAICompatibleModel
from rag_position.prompts import question_span, render_qa

pytestmark = pytest.mark.slow

SCORE_BOUND = 1e-4
"""Largest |mean log-prob difference| per span between vLLM and the local backend."""


def _instances(n: int, docs: int) -> list[tuple[str, list[str]]]:
    records = load_qa(default_data_dir() / ORACLE_FILE)[: n + docs]
    return [
        (records[i].question, [records[i + j].passages[0] for j in range(docs)]) for i in range(n)
    ]


@pytest.fixture(scope="module")
def local() -> Iterator[Any]:
    """The local backend's Gemma: float32, no chat template (what the server serves)."""
    yield load_model("embedded:gemma3-270m", dtype="float32", chat_template=False)


@pytest.fixture(scope="module")
def remote(vllm_gemma_server: Any) -> OpenAICompatibleModel:
    model = load_model(vllm_gemma_server.spec)  # chat_template=None: the server is asked
    assert isinstance(model, OpenAICompatibleModel)
    return model


def test_the_served_base_model_has_no_chat_template(
    vllm_gemma_server: Any, remote: OpenAICompatibleModel
) -> None:
    assert vllm_gemma_server.name == "gemma-3-270m" and remote.name == "gemma-3-270m"
    assert remote.max_context == 4096
    assert remote.use_chat_template is False
    assert answer_stop(remote) == ("\n",)


def test_generation_is_the_first_line_and_matches_the_local_model(
    remote: OpenAICompatibleModel, local: Any
) -> None:
    prompts = [render_qa(q, passages) for q, passages in _instances(3, 1)]
    served = remote.generate(prompts, max_new_tokens=16, stop=["\n"])
    assert all(answer.strip() and "\n" not in answer for answer in served), served
    assert served == local.generate(prompts, max_new_tokens=16, stop=["\n"])


@pytest.fixture(scope="module")
def local_spans(local: Any) -> tuple[list[str], list[tuple[int, int]], list[Any]]:
    """Three ten-passage prompts' question spans and one mid-prompt span, scored locally
    once for both scoring modes."""
    prompts, spans = [], []
    for question, passages in _instances(3, 10):
        prompt = render_qa(question, passages)
        prompts.append(prompt)
        spans.append(question_span(prompt, question))
    mid = prompts[0].index("Document [5]")
    prompts.append(prompts[0])
    spans.append((mid + 3, mid + 40))  # a span starting inside a word, mid-prompt
    assert min(local.count_tokens(p) for p in prompts) > 1024  # past the sliding window
    return prompts, spans, local.score_spans(prompts, spans)


@pytest.mark.parametrize("scoring", ["forced", "echo"])
def test_score_spans_match_the_local_backend(
    vllm_gemma_server: Any, local_spans: Any, scoring: str
) -> None:
    remote = load_model(vllm_gemma_server.spec, scoring=scoring)
    prompts, spans, want = local_spans
    got = remote.score_spans(prompts, spans)
    for i, (a, b) in enumerate(zip(want, got, strict=True)):
        assert a.n_tokens == b.n_tokens, (i, a, b)
        assert abs(a.mean - b.mean) <= SCORE_BOUND, (i, a, b)
        assert abs(a.sum - b.sum) <= SCORE_BOUND * a.n_tokens, (i, a, b)
        print(f"{scoring} span {i}: |mean difference| {abs(a.mean - b.mean):.2e}")
    assert remote.usage.generated_tokens == 0 and remote.usage.lm_calls == len(prompts)


def test_the_eval_takes_the_first_line_of_the_served_model(
    remote: OpenAICompatibleModel, tmp_path: Path
) -> None:
    result = run_multidoc(remote, questions=1, positions=[0], baselines=False, out=tmp_path)
    (record,) = [json.loads(line) for line in (tmp_path / "predictions.jsonl").open()]
    assert record["decoding"]["stop"] == ["\n"]
    assert record["prediction"].strip() and "\n" not in record["prediction"]
    assert "first line break" in result.report.read_text()
