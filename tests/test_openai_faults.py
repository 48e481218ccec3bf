"""The openai: backend against the double's broken replies (each found by a probe): retried
like a 5xx, then reported with the URL, never a number or an empty answer.

Against a real vLLM server: ``tests/test_vllm_server.py``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator

import pytest

from rag_position.errors import BackendError, BackendUnavailableError, ContextLengthError
from rag_position.models.openai_backend import OpenAICompatibleModel
from rag_position.models.protocols import SpanScore
from rag_position.models.transformers_backend import TransformersModel
from rag_position.strategies import likelihood_selection
from rag_position.testing._faults import CHAT_BREAKS, COMPLETION_BREAKS, SCORING_BREAKS
from rag_position.testing._openai_payloads import JSON, n_tokens
from rag_position.testing.openai_double import BREAKS, ModelServer, OpenAIHandler, serve

pytestmark = pytest.mark.slow

PROMPT = (
    "Document [1](Title: Paris) Paris is the capital of France.\n"
    "Question: what is the capital of France?\nAnswer:"
)
SPAN = (PROMPT.index("Question:"), len(PROMPT))


@pytest.fixture(scope="module")
def server(embedded_fp32: TransformersModel) -> Iterator[ModelServer]:
    with serve(embedded_fp32) as srv:
        yield srv


def _client(srv: ModelServer, **kwargs: object) -> OpenAICompatibleModel:
    remote = OpenAICompatibleModel(srv.url, srv.model_name, **kwargs)  # type: ignore[arg-type]
    assert remote.max_context  # the window is read now, so breaks hit the request under test
    return remote


def test_every_break_is_exercised() -> None:
    used = {*COMPLETION_BREAKS, *CHAT_BREAKS, *SCORING_BREAKS, "trickle", "hang", "no-usage"}
    assert used == set(BREAKS)


@pytest.mark.parametrize("kind", COMPLETION_BREAKS)
def test_a_broken_completion_is_retried_then_reported(server: ModelServer, kind: str) -> None:
    remote = _client(server, chat_template=False, max_retries=1)
    want = remote.generate([PROMPT], max_new_tokens=4)
    server.break_next(1, kind)
    assert remote.generate([PROMPT], max_new_tokens=4) == want  # retried to the right answer
    server.break_next(2, kind)
    with pytest.raises(BackendError, match="malformed reply") as info:
        remote.generate([PROMPT], max_new_tokens=4)
    message = str(info.value)
    assert f"{server.url}/completions" in message
    assert repr(server.model_name) in message and "after 1 retries" in message


@pytest.mark.parametrize("kind", CHAT_BREAKS)
def test_a_broken_chat_reply_is_never_an_empty_answer(server: ModelServer, kind: str) -> None:
    remote = _client(server, chat_template=True, max_retries=0)
    server.break_next(1, kind)
    with pytest.raises(BackendError, match=r"/chat/completions sent a malformed reply") as info:
        remote.generate(["Name a colour."], max_new_tokens=3)
    if kind == "null-content":
        assert "message.content is None" in str(info.value)


@pytest.mark.parametrize("kind", SCORING_BREAKS)
def test_a_broken_scoring_reply_is_never_a_number(
    server: ModelServer, embedded_raw: TransformersModel, kind: str
) -> None:
    remote = _client(server, scoring="echo", max_retries=1)
    (want,) = embedded_raw.score_spans([PROMPT], [SPAN])
    server.break_next(1, kind)
    (got,) = remote.score_spans([PROMPT], [SPAN])
    assert got.n_tokens == want.n_tokens
    assert got.mean == pytest.approx(want.mean, abs=1e-4)
    server.break_next(2, kind)
    with pytest.raises(BackendError, match="malformed reply"):
        remote.score_spans([PROMPT], [SPAN])


def test_a_trickled_reply_ends_at_the_deadline(server: ModelServer) -> None:
    """One byte every 0.3 s: a per-read timeout never fires; the deadline does."""
    remote = _client(server, chat_template=False, timeout=2.0, max_retries=2)
    server.break_next(1, "trickle", seconds=0.3)
    start = time.monotonic()
    with pytest.raises(BackendUnavailableError, match=r"deadline timeout=2\.0s") as info:
        remote.generate([PROMPT], max_new_tokens=4)
    assert time.monotonic() - start < 2.0 + 0.5
    message = str(info.value)
    assert f"{server.url}/completions" in message and repr(server.model_name) in message


def test_a_silent_server_ends_at_the_deadline(server: ModelServer) -> None:
    remote = _client(server, scoring="echo", timeout=1.0, max_retries=3)
    server.break_next(1, "hang", seconds=4.0)
    start = time.monotonic()
    with pytest.raises(BackendUnavailableError, match=r"within the deadline timeout=1\.0s"):
        remote.score_spans([PROMPT], [SPAN])
    assert time.monotonic() - start < 1.0 + 0.5


def test_a_retry_that_would_pass_the_deadline_is_not_waited_for(server: ModelServer) -> None:
    remote = _client(server, chat_template=False, timeout=1.0, max_retries=5)
    server.fail_next(1, status=503, retry_after=30.0, message="come back later")
    start = time.monotonic()
    with pytest.raises(BackendUnavailableError, match="come back later"):
        remote.generate([PROMPT], max_new_tokens=2)
    assert time.monotonic() - start < 1.0


def test_a_clipped_generation_is_a_context_length_error(embedded_fp32: TransformersModel) -> None:
    """vLLM shortens max_tokens to fit its window without a word; the client refuses."""
    small = TransformersModel(
        embedded_fp32.model, embedded_fp32.tokenizer, name="w", chat_template=False, max_context=64
    )
    n = small.count_tokens(PROMPT)
    assert n < 64 < n + 40
    with serve(small, clip_to_window=True) as srv:
        remote = OpenAICompatibleModel(srv.url, "w", chat_template=False, max_retries=0)
        with pytest.raises(ContextLengthError, match="prompt 0 plus max_new_tokens=40") as info:
            remote.generate([PROMPT], max_new_tokens=40)
        assert (info.value.n_tokens, info.value.limit) == (n + 40, 64)
        with pytest.raises(ContextLengthError) as same:
            small.generate([PROMPT], max_new_tokens=40)
        assert (same.value.n_tokens, same.value.limit) == (n + 40, 64)  # the same refusal
        assert remote.generate([PROMPT], max_new_tokens=64 - n)  # what fits is answered


def test_a_deadline_after_a_malformed_reply_says_what_was_wrong(server: ModelServer) -> None:
    """A malformed reply, then a hung retry: the deadline's error said only "no complete
    answer" (and asked whether the server was up), not what the server sent."""
    remote = _client(server, chat_template=False, timeout=2.0, max_retries=3)
    server.break_next(1, "truncated-json")
    server.break_next(1, "hang", seconds=4.0)
    with pytest.raises(BackendUnavailableError, match=r"deadline timeout=2\.0s") as info:
        remote.generate([PROMPT], max_new_tokens=2)
    message = str(info.value)
    assert "the last reply was malformed (the body is not JSON" in message
    assert "the retry after it: no complete answer" in message
    assert "not as the endpoint should" in message and "overloaded" not in message


def test_a_deadline_before_a_retry_of_a_malformed_reply_says_so(server: ModelServer) -> None:
    remote = _client(server, timeout=0.3, max_retries=3)
    server.break_next(1, "not-an-object")  # the first backoff (0.375 s or more) passes 0.3 s
    with pytest.raises(BackendError, match="the last reply was malformed") as info:
        remote.count_tokens("a short text")  # /tokenize: answered at once
    assert "the body is a JSON list, not an object" in str(info.value)
    assert isinstance(info.value.__cause__, BackendUnavailableError)  # the deadline's error


class NoTokenize(OpenAIHandler):
    """A server with no ``/tokenize``; ``FINISH`` (when set) as every reply's finish_reason."""

    FINISH: str | None = None

    def _routes(self) -> dict[tuple[str, str], Callable[[JSON], JSON]]:
        return {k: v for k, v in super()._routes().items() if "tokenize" not in k[1]}

    def postprocess(self, path: str, body: JSON) -> JSON:
        if self.FINISH is not None and "choices" in body:
            for choice in body["choices"]:
                choice["finish_reason"] = self.FINISH
        return body


def _window_model(base: TransformersModel, chat: bool, room: int) -> tuple[TransformersModel, int]:
    """The base weights with a window of the prompt's tokens plus ``room``; the prompt's tokens."""
    probe = TransformersModel(base.model, base.tokenizer, name="w", chat_template=chat)
    n = n_tokens(probe, PROMPT)
    return TransformersModel(
        base.model, base.tokenizer, name="w", chat_template=False, max_context=n + room
    ), n


@pytest.mark.parametrize("chat", [False, True], ids=["completions", "chat"])
def test_a_clipped_generation_without_usage_is_counted_and_refused(
    embedded_fp32: TransformersModel, chat: bool
) -> None:
    """A reply without ``usage`` skipped the window check: the clipped answer came back."""
    small, n = _window_model(embedded_fp32, chat, room=6)
    with serve(small, clip_to_window=True) as srv:
        remote = OpenAICompatibleModel(srv.url, "w", chat_template=chat, max_retries=0)
        assert remote.max_context == n + 6
        srv.break_next(1, "no-usage")
        with pytest.raises(ContextLengthError, match="prompt 0 plus max_new_tokens=20") as info:
            remote.generate([PROMPT], max_new_tokens=20)
        assert (info.value.n_tokens, info.value.limit) == (n + 20, n + 6)
        assert srv.count("/tokenize") == 1  # the server counted the prompt
        srv.break_next(1, "no-usage")
        assert remote.generate([PROMPT], max_new_tokens=6)  # what fits is answered


def test_no_usage_and_no_tokenize_is_refused_rather_than_guessed(
    embedded_fp32: TransformersModel,
) -> None:
    small, n = _window_model(embedded_fp32, False, room=6)
    with serve(small, clip_to_window=True, handler=NoTokenize) as srv:
        remote = OpenAICompatibleModel(srv.url, "w", chat_template=False, max_retries=0)
        assert remote.max_context == n + 6
        srv.break_next(1, "no-usage")
        with pytest.raises(BackendError, match="reported no token usage") as info:
            remote.generate([PROMPT], max_new_tokens=20)
        message = str(info.value)
        assert f"{srv.url}/completions" in message and "no /tokenize endpoint" in message
        assert f"window of {n + 6} tokens" in message and "'length'" in message
        assert not isinstance(info.value, ContextLengthError)
        NoTokenize.FINISH = "stop"  # an answer that ended by itself was not cut: returned
        try:
            srv.break_next(1, "no-usage")
            assert remote.generate([PROMPT], max_new_tokens=20)
        finally:
            NoTokenize.FINISH = None
        assert srv.count("/tokenize") == 1  # asked once: its absence is remembered


def test_a_lone_surrogate_is_named(server: ModelServer) -> None:
    remote = _client(server, max_retries=0)
    bad = "what is \ud800?"
    with pytest.raises(ValueError, match=r"prompt 1 is not valid Unicode.*at character 8"):
        remote.generate(["fine", bad], max_new_tokens=2)
    with pytest.raises(ValueError, match=r"prompt 0 is not valid Unicode"):
        remote.score_spans([bad], [(0, 4)])


def test_a_nan_score_never_wins_an_ordering() -> None:
    """A scorer (any backend, or the user's own) that returns NaN stops the strategy."""

    class NaNScorer:
        def score_spans(self, prompts: object, spans: list[object]) -> list[SpanScore]:
            out = [SpanScore(-1.0, -3.0, 3) for _ in spans]
            out[1] = SpanScore(math.nan, math.nan, 3)
            return out

    passages = [f"passage {i}" for i in range(4)]
    with pytest.raises(BackendError, match="not a finite number"):
        likelihood_selection("q?", passages, NaNScorer(), n_orders=3, seed=0)
