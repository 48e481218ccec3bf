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

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _backends_kit import check_first_line_eval, close_scores, instances, qa_spans

from rag_position.eval.engine.common import answer_stop
from rag_position.models import load_model
from rag_position.models.openai_backend import OpenAICompatibleModel
from rag_position.prompts import render_qa

pytestmark = pytest.mark.slow

SCORE_BOUND = 1e-4
"""Largest |mean log-prob difference| per span between vLLM and the local backend."""


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
    prompts = [render_qa(q, passages) for q, passages in instances(3, 1)]
    served = remote.generate(prompts, max_new_tokens=16, stop=["\n"])
    assert all(answer.strip() and "\n" not in answer for answer in served), served
    assert served == local.generate(prompts, max_new_tokens=16, stop=["\n"])


@pytest.fixture(scope="module")
def local_spans(local: Any) -> tuple[list[str], list[tuple[int, int]], list[Any]]:
    """Three ten-passage prompts' question spans and a mid-prompt one, scored locally once."""
    prompts, spans = qa_spans(3, 10)
    assert min(local.count_tokens(p) for p in prompts) > 1024  # past the sliding window
    return prompts, spans, local.score_spans(prompts, spans)


@pytest.mark.parametrize("scoring", ["forced", "echo"])
def test_score_spans_match_the_local_backend(
    vllm_gemma_server: Any, local_spans: Any, scoring: str
) -> None:
    remote = load_model(vllm_gemma_server.spec, scoring=scoring)
    prompts, spans, want = local_spans
    worst = close_scores(want, remote.score_spans(prompts, spans), SCORE_BOUND)
    print(f"{scoring}: largest |mean difference| {worst:.2e}")
    assert remote.usage.generated_tokens == 0 and remote.usage.lm_calls == len(prompts)


def test_the_eval_takes_the_first_line_of_the_served_model(
    remote: OpenAICompatibleModel, tmp_path: Path
) -> None:
    check_first_line_eval(remote, tmp_path)
