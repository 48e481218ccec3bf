"""Broken replies, from the double and from a real vLLM server (each ``target`` below).

``double``: the test double (:mod:`rag_position.testing.openai_double`) breaks its own
replies; ``vllm``: :class:`~rag_position.testing.fault_proxy.FaultProxy` passes the session's
vLLM server (``vllm_server``, root conftest.py) through and breaks its replies the same ways,
so each case runs on the bodies vLLM really sends. The contract: a broken reply is retried
like a 5xx and then reported with the URL, never turned into a number or an empty answer; a
trickled or missing answer ends at the deadline; a reply without ``usage`` is counted with
vLLM's ``/tokenize`` before it is trusted. Last, the faults only the double makes: a retry
past the deadline, a clipped generation, a reply without ``usage`` and no ``/tokenize``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from _backends_kit import NoTokenize

from rag_position.errors import BackendError, BackendUnavailableError, ContextLengthError
from rag_position.models import load_model
from rag_position.models.openai_backend import OpenAICompatibleModel
from rag_position.models.protocols import SpanScore
from rag_position.models.transformers_backend import TransformersModel
from rag_position.strategies import likelihood_selection
from rag_position.testing._faults import (
    BREAKS,
    CHAT_BREAKS,
    COMPLETION_BREAKS,
    SCORING_BREAKS,
    InjectingServer,
)
from rag_position.testing._openai_payloads import n_tokens
from rag_position.testing.fault_proxy import FaultProxy
from rag_position.testing.openai_double import ModelServer, serve

pytestmark = pytest.mark.slow

PROMPT = (
    "Document [1](Title: Paris) Paris is the capital of France.\n"
    "Question: what is the capital of France?\nAnswer:"
)
SPAN = (PROMPT.index("Question:"), len(PROMPT))


@dataclass
class Target:
    """Where faults are queued (``server``), the URL and model a client is pointed at."""

    server: InjectingServer
    url: str
    name: str
    window: int
    made: list[OpenAICompatibleModel] = field(default_factory=list)

    def client(self, **kwargs: Any) -> OpenAICompatibleModel:
        remote = OpenAICompatibleModel(self.url, self.name, **kwargs)
        self.made.append(remote)
        assert remote.max_context == self.window  # read now, so breaks hit the request under test
        return remote


@pytest.fixture(scope="module")
def double(embedded_fp32: Any) -> Iterator[ModelServer]:
    with serve(embedded_fp32) as srv:
        yield srv


@pytest.fixture(scope="module")
def proxy(vllm_server: Any) -> Iterator[FaultProxy]:
    with FaultProxy(vllm_server.base_url).start() as running:
        yield running


@pytest.fixture(params=["double", pytest.param("vllm", marks=pytest.mark.xdist_group("vllm"))])
def target(request: pytest.FixtureRequest) -> Target:
    """The double, or the session's vLLM server behind the proxy."""
    return request.getfixturevalue("on_double" if request.param == "double" else "vllm")


@pytest.fixture
def on_double(double: ModelServer) -> Iterator[Target]:
    """The ``double`` target, alone for the faults only the double makes."""
    yield from _used_up(Target(double, double.url, double.model_name, 8192))


@pytest.fixture
def vllm(proxy: FaultProxy, vllm_server: Any) -> Iterator[Target]:
    """The ``vllm`` target, alone for what only a real server shows."""
    yield from _used_up(Target(proxy, proxy.url, vllm_server.name, 4096))


def _used_up(made: Target) -> Iterator[Target]:
    """Each test uses up what it queues: a fault or break left over (a test that failed
    half-way, or a break another request took) would fail the next test for nothing."""
    yield made
    for model in made.made:
        model.close()
    wait = time.monotonic() + 30  # a request still in flight (past a deadline) takes its break
    while made.server.pending() != (0, 0) and time.monotonic() < wait:
        time.sleep(0.1)
    left = made.server.pending()
    made.server.clear()
    assert left == (0, 0), f"(faults, breaks) left queued: {left}"


def test_every_break_is_exercised() -> None:
    used = {*COMPLETION_BREAKS, *CHAT_BREAKS, *SCORING_BREAKS, "trickle", "hang", "no-usage"}
    assert used == set(BREAKS)


def test_an_injected_503_is_retried_to_the_server_s_answer(target: Target) -> None:
    remote = target.client(chat_template=False, max_retries=2)
    want = remote.generate([PROMPT], max_new_tokens=4)
    before = target.server.count("/v1/completions")
    target.server.fail_next(2, status=503, retry_after=0.01)
    assert remote.generate([PROMPT], max_new_tokens=4) == want
    assert target.server.count("/v1/completions") == before + 3  # two faults, then the answer


@pytest.mark.parametrize("kind", COMPLETION_BREAKS)
def test_a_broken_completion_is_retried_then_reported(target: Target, kind: str) -> None:
    remote = target.client(chat_template=False, max_retries=1)
    want = remote.generate([PROMPT], max_new_tokens=4)
    before = target.server.count("/v1/completions")
    target.server.break_next(1, kind)
    assert remote.generate([PROMPT], max_new_tokens=4) == want  # retried to the right answer
    assert target.server.count("/v1/completions") == before + 2
    target.server.break_next(2, kind)
    with pytest.raises(BackendError, match="malformed reply") as info:
        remote.generate([PROMPT], max_new_tokens=4)
    message = str(info.value)
    assert f"{target.url}/completions" in message
    assert repr(target.name) in message and "after 1 retries" in message


@pytest.mark.parametrize("kind", CHAT_BREAKS)
def test_a_broken_chat_reply_is_never_an_empty_answer(target: Target, kind: str) -> None:
    remote = target.client(chat_template=True, max_retries=0)
    assert remote.generate(["Name a colour."], max_new_tokens=3)[0]
    target.server.break_next(1, kind)
    with pytest.raises(BackendError, match=r"/chat/completions sent a malformed reply") as info:
        remote.generate(["Name a colour."], max_new_tokens=3)
    if kind == "null-content":
        assert "message.content is None" in str(info.value)


@pytest.mark.parametrize("kind", SCORING_BREAKS)
def test_a_broken_scoring_reply_is_never_a_number(target: Target, kind: str) -> None:
    """``short-arrays`` is the silently wrong score of issue 30, on vLLM's own arrays too."""
    remote = target.client(scoring="echo", max_retries=1)
    (want,) = remote.score_spans([PROMPT], [SPAN])
    assert want.n_tokens > 5
    before = target.server.count("/v1/completions")
    target.server.break_next(1, kind)
    (got,) = remote.score_spans([PROMPT], [SPAN])
    assert target.server.count("/v1/completions") == before + 2  # the broken reply, the retry
    assert got.n_tokens == want.n_tokens
    assert got.mean == pytest.approx(want.mean, abs=1e-5)
    target.server.break_next(2, kind)
    with pytest.raises(BackendError, match="malformed reply"):
        remote.score_spans([PROMPT], [SPAN])


def test_a_trickled_reply_ends_at_the_deadline(target: Target) -> None:
    """One byte every 0.3 s: a per-read timeout never fires; the deadline does."""
    remote = target.client(chat_template=False, timeout=2.0, max_retries=2)
    target.server.break_next(1, "trickle", seconds=0.3)
    start = time.monotonic()
    with pytest.raises(BackendUnavailableError, match=r"deadline timeout=2\.0s") as info:
        remote.generate([PROMPT], max_new_tokens=4)
    assert time.monotonic() - start < 2.0 + 0.5
    message = str(info.value)
    assert f"{target.url}/completions" in message and repr(target.name) in message


def test_a_reply_that_never_comes_ends_at_the_deadline(target: Target) -> None:
    remote = target.client(scoring="echo", timeout=1.0, max_retries=3)
    target.server.break_next(1, "hang", seconds=4.0)
    start = time.monotonic()
    with pytest.raises(BackendUnavailableError, match=r"within the deadline timeout=1\.0s"):
        remote.score_spans([PROMPT], [SPAN])
    assert time.monotonic() - start < 1.0 + 0.5


def test_the_proxy_changes_nothing_it_is_not_told_to(vllm: Target, vllm_server: Any) -> None:
    direct = load_model(vllm_server.spec, scoring="echo", chat_template=False)
    vllm.made.append(direct)
    via = vllm.client(scoring="echo", chat_template=False)
    (a,), (b,) = via.score_spans([PROMPT], [SPAN]), direct.score_spans([PROMPT], [SPAN])
    assert a.n_tokens == b.n_tokens and a.mean == pytest.approx(b.mean, abs=1e-5)
    assert via.generate([PROMPT], max_new_tokens=6) == direct.generate([PROMPT], max_new_tokens=6)
    assert via.count_tokens(PROMPT) == direct.count_tokens(PROMPT)
    before = vllm.server.count("/v1/completions")
    via.generate([PROMPT], max_new_tokens=2)
    assert vllm.server.count("/v1/completions") == before + 1


@pytest.mark.parametrize("chat", [False, True], ids=["completions", "chat"])
def test_a_generation_vllm_clipped_without_usage_is_counted_and_refused(
    vllm: Target, chat: bool
) -> None:
    """vLLM shortens max_tokens to fit its window; with ``usage`` gone, the client asks
    vLLM's ``/tokenize`` for the prompt's length and refuses the clipped answer."""
    remote = vllm.client(chat_template=chat, max_retries=0)
    before = vllm.server.count("/tokenize")
    vllm.server.break_next(1, "no-usage")
    with pytest.raises(ContextLengthError, match="plus max_new_tokens=400") as info:
        remote.generate(["word " * 3900], max_new_tokens=400)
    assert info.value.limit == 4096 and 4096 < info.value.n_tokens < 3900 + 400 + 100
    assert vllm.server.count("/tokenize") == before + 1  # vLLM counted the prompt
    want = remote.generate([PROMPT], max_new_tokens=4)
    vllm.server.break_next(1, "no-usage")
    assert remote.generate([PROMPT], max_new_tokens=4) == want  # what fits is answered


# ---------------------------------------------------------------------- the double alone
def test_a_retry_that_would_pass_the_deadline_is_not_waited_for(on_double: Target) -> None:
    remote = on_double.client(chat_template=False, timeout=1.0, max_retries=5)
    on_double.server.fail_next(1, status=503, retry_after=30.0, message="come back later")
    start = time.monotonic()
    with pytest.raises(BackendUnavailableError, match="come back later"):
        remote.generate([PROMPT], max_new_tokens=2)
    assert time.monotonic() - start < 1.0


def test_a_deadline_after_a_malformed_reply_says_what_was_wrong(on_double: Target) -> None:
    """A malformed reply, then a hung retry: the deadline's error said only "no complete
    answer" (and asked whether the server was up), not what the server sent."""
    remote = on_double.client(chat_template=False, timeout=2.0, max_retries=3)
    on_double.server.break_next(1, "truncated-json")
    on_double.server.break_next(1, "hang", seconds=4.0)
    with pytest.raises(BackendUnavailableError, match=r"deadline timeout=2\.0s") as info:
        remote.generate([PROMPT], max_new_tokens=2)
    message = str(info.value)
    assert "the last reply was malformed (the body is not JSON" in message
    assert "the retry after it: no complete answer" in message
    assert "not as the endpoint should" in message and "overloaded" not in message


def test_a_deadline_before_a_retry_of_a_malformed_reply_says_so(on_double: Target) -> None:
    remote = on_double.client(timeout=0.3, max_retries=3)
    # the first backoff (0.375 s or more) passes 0.3 s
    on_double.server.break_next(1, "not-an-object")
    with pytest.raises(BackendError, match="the last reply was malformed") as info:
        remote.count_tokens("a short text")  # /tokenize: answered at once
    assert "the body is a JSON list, not an object" in str(info.value)
    assert isinstance(info.value.__cause__, BackendUnavailableError)  # the deadline's error


def _window_model(base: TransformersModel, chat: bool, room: int) -> tuple[TransformersModel, int]:
    """The base weights with a window of the prompt's tokens plus ``room``; the prompt's tokens."""
    probe = TransformersModel(base.model, base.tokenizer, name="w", chat_template=chat)
    n = n_tokens(probe, PROMPT)
    return TransformersModel(
        base.model, base.tokenizer, name="w", chat_template=False, max_context=n + room
    ), n


@pytest.mark.parametrize("chat", [False, True], ids=["completions", "chat"])
def test_a_clipped_generation_is_a_context_length_error_with_or_without_usage(
    embedded_fp32: TransformersModel, chat: bool
) -> None:
    """vLLM shortens max_tokens to fit its window without a word; the client refuses, as the
    local backend refuses it. A reply without ``usage`` skipped the check: now counted."""
    small, n = _window_model(embedded_fp32, chat, room=6)
    with serve(small, clip_to_window=True) as srv:
        remote = OpenAICompatibleModel(srv.url, "w", chat_template=chat, max_retries=0)
        assert remote.max_context == n + 6
        for usage in (True, False):
            if not usage:
                srv.break_next(1, "no-usage")
            with pytest.raises(ContextLengthError, match="prompt 0 plus max_new_tokens=20") as info:
                remote.generate([PROMPT], max_new_tokens=20)
            assert (info.value.n_tokens, info.value.limit) == (n + 20, n + 6), usage
        assert srv.count("/tokenize") == 1  # the server counted the prompt, once
        if not chat:  # the same refusal as the local backend's
            with pytest.raises(ContextLengthError) as same:
                small.generate([PROMPT], max_new_tokens=20)
            assert (same.value.n_tokens, same.value.limit) == (n + 20, n + 6)
        assert remote.generate([PROMPT], max_new_tokens=6)  # what fits is answered
        srv.break_next(1, "no-usage")
        assert remote.generate([PROMPT], max_new_tokens=6)


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


def test_a_lone_surrogate_is_named(on_double: Target) -> None:
    remote = on_double.client(max_retries=0)
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
