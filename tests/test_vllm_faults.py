"""Broken replies from a real vLLM server: the fault-injecting proxy in front of it.

``tests/test_openai_faults.py`` breaks the double's own replies; here
:class:`~rag_position.testing.fault_proxy.FaultProxy` passes the session's vLLM server
(``vllm_server``, root conftest.py) through and breaks its replies the same ways, so
each case runs on the bodies vLLM really sends: its token strings and offsets, its
``usage``, its clipping of a generation to the window. The contract is the same: a
broken reply is retried like a 5xx and then reported with the URL, never turned into
a number or an empty answer; a trickled or missing answer ends at the deadline; a
reply without ``usage`` is counted with vLLM's ``/tokenize`` before it is trusted.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from rag_position.errors import BackendError, BackendUnavailableError, ContextLengthError
from rag_position.models import load_model
from rag_position.models.openai_backend import OpenAICompatibleModel
from rag_position.testing._faults import BREAKS, CHAT_BREAKS, COMPLETION_BREAKS, SCORING_BREAKS
from rag_position.testing.fault_proxy import FaultProxy

pytestmark = pytest.mark.slow

PROMPT = (
    "Document [1](Title: Paris) Paris is the capital of France.\n"
    "Question: what is the capital of France?\nAnswer:"
)
SPAN = (PROMPT.index("Question:"), len(PROMPT))
Clients = list[OpenAICompatibleModel]


@pytest.fixture(scope="module")
def proxy(vllm_server: Any) -> Iterator[FaultProxy]:
    with FaultProxy(vllm_server.base_url).start() as running:
        yield running


@pytest.fixture(autouse=True)
def _every_fault_taken(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each test uses up what it queues: a fault or break left over (a test that failed
    half-way, or a break another request took) would fail the next test for nothing."""
    yield
    if "proxy" in request.fixturenames:
        running: FaultProxy = request.getfixturevalue("proxy")
        left = running.pending()
        running.clear()
        assert left == (0, 0), f"(faults, breaks) left queued: {left}"


@pytest.fixture
def clients() -> Iterator[Clients]:
    made: list[OpenAICompatibleModel] = []
    yield made
    for model in made:
        model.close()


def _client(
    proxy: FaultProxy, vllm_server: Any, made: Clients, **kwargs: Any
) -> OpenAICompatibleModel:
    remote = OpenAICompatibleModel(proxy.url, vllm_server.name, **kwargs)
    made.append(remote)
    assert remote.max_context == 4096  # read now, so breaks hit the request under test
    return remote


def test_every_break_is_tried_on_vllm() -> None:
    used = {*COMPLETION_BREAKS, *CHAT_BREAKS, *SCORING_BREAKS, "trickle", "hang", "no-usage"}
    assert used == set(BREAKS)


def test_the_proxy_changes_nothing_it_is_not_told_to(
    proxy: FaultProxy, vllm_server: Any, clients: Clients
) -> None:
    direct = load_model(vllm_server.spec, scoring="echo", chat_template=False)
    clients.append(direct)
    via = _client(proxy, vllm_server, clients, scoring="echo", chat_template=False)
    (a,), (b,) = via.score_spans([PROMPT], [SPAN]), direct.score_spans([PROMPT], [SPAN])
    assert a.n_tokens == b.n_tokens and a.mean == pytest.approx(b.mean, abs=1e-5)
    assert via.generate([PROMPT], max_new_tokens=6) == direct.generate([PROMPT], max_new_tokens=6)
    assert via.count_tokens(PROMPT) == direct.count_tokens(PROMPT)
    before = proxy.count("/v1/completions")
    via.generate([PROMPT], max_new_tokens=2)
    assert proxy.count("/v1/completions") == before + 1


def test_an_injected_503_is_retried_to_vllm_s_answer(
    proxy: FaultProxy, vllm_server: Any, clients: Clients
) -> None:
    remote = _client(proxy, vllm_server, clients, chat_template=False, max_retries=2)
    want = remote.generate([PROMPT], max_new_tokens=4)
    before = proxy.count("/v1/completions")
    proxy.fail_next(2, status=503, retry_after=0.01)
    assert remote.generate([PROMPT], max_new_tokens=4) == want
    assert proxy.count("/v1/completions") == before + 3  # two faults, then vLLM's answer


@pytest.mark.parametrize("kind", COMPLETION_BREAKS)
def test_a_broken_vllm_completion_is_retried_then_reported(
    proxy: FaultProxy, vllm_server: Any, clients: Clients, kind: str
) -> None:
    remote = _client(proxy, vllm_server, clients, chat_template=False, max_retries=1)
    want = remote.generate([PROMPT], max_new_tokens=4)
    before = proxy.count("/v1/completions")
    proxy.break_next(1, kind)
    assert remote.generate([PROMPT], max_new_tokens=4) == want  # retried to vLLM's answer
    assert proxy.count("/v1/completions") == before + 2
    proxy.break_next(2, kind)
    with pytest.raises(BackendError, match="malformed reply") as info:
        remote.generate([PROMPT], max_new_tokens=4)
    message = str(info.value)
    assert f"{proxy.url}/completions" in message
    assert repr(vllm_server.name) in message and "after 1 retries" in message


@pytest.mark.parametrize("kind", CHAT_BREAKS)
def test_a_broken_vllm_chat_reply_is_never_an_empty_answer(
    proxy: FaultProxy, vllm_server: Any, clients: Clients, kind: str
) -> None:
    remote = _client(proxy, vllm_server, clients, chat_template=True, max_retries=0)
    assert remote.generate(["Name a colour."], max_new_tokens=3)[0]
    proxy.break_next(1, kind)
    with pytest.raises(BackendError, match=r"/chat/completions sent a malformed reply") as info:
        remote.generate(["Name a colour."], max_new_tokens=3)
    if kind == "null-content":
        assert "message.content is None" in str(info.value)


@pytest.mark.parametrize("kind", SCORING_BREAKS)
def test_a_broken_vllm_scoring_reply_is_never_a_number(
    proxy: FaultProxy, vllm_server: Any, clients: Clients, kind: str
) -> None:
    """``short-arrays`` is the silently wrong score of issue 30, on vLLM's own arrays."""
    remote = _client(proxy, vllm_server, clients, scoring="echo", max_retries=1)
    (want,) = remote.score_spans([PROMPT], [SPAN])
    assert want.n_tokens > 5
    before = proxy.count("/v1/completions")
    proxy.break_next(1, kind)
    (got,) = remote.score_spans([PROMPT], [SPAN])
    assert proxy.count("/v1/completions") == before + 2  # the broken reply, then the retry
    assert got.n_tokens == want.n_tokens
    assert got.mean == pytest.approx(want.mean, abs=1e-5)
    proxy.break_next(2, kind)
    with pytest.raises(BackendError, match="malformed reply"):
        remote.score_spans([PROMPT], [SPAN])


def test_a_trickled_vllm_reply_ends_at_the_deadline(
    proxy: FaultProxy, vllm_server: Any, clients: Clients
) -> None:
    remote = _client(proxy, vllm_server, clients, chat_template=False, timeout=2.0, max_retries=2)
    proxy.break_next(1, "trickle", seconds=0.3)
    start = time.monotonic()
    with pytest.raises(BackendUnavailableError, match=r"deadline timeout=2\.0s") as info:
        remote.generate([PROMPT], max_new_tokens=4)
    assert time.monotonic() - start < 2.0 + 0.5
    assert f"{proxy.url}/completions" in str(info.value)


def test_a_vllm_reply_that_never_comes_ends_at_the_deadline(
    proxy: FaultProxy, vllm_server: Any, clients: Clients
) -> None:
    remote = _client(proxy, vllm_server, clients, scoring="echo", timeout=1.0, max_retries=3)
    proxy.break_next(1, "hang", seconds=4.0)
    start = time.monotonic()
    with pytest.raises(BackendUnavailableError, match=r"within the deadline timeout=1\.0s"):
        remote.score_spans([PROMPT], [SPAN])
    assert time.monotonic() - start < 1.0 + 0.5


@pytest.mark.parametrize("chat", [False, True], ids=["completions", "chat"])
def test_a_generation_vllm_clipped_without_usage_is_counted_and_refused(
    proxy: FaultProxy, vllm_server: Any, clients: Clients, chat: bool
) -> None:
    """vLLM shortens max_tokens to fit its window; with ``usage`` gone, the client asks
    vLLM's ``/tokenize`` for the prompt's length and refuses the clipped answer."""
    remote = _client(proxy, vllm_server, clients, chat_template=chat, max_retries=0)
    long = "word " * 3900
    before = proxy.count("/tokenize")
    proxy.break_next(1, "no-usage")
    with pytest.raises(ContextLengthError, match="plus max_new_tokens=400") as info:
        remote.generate([long], max_new_tokens=400)
    assert info.value.limit == 4096 and 4096 < info.value.n_tokens < 3900 + 400 + 100
    assert proxy.count("/tokenize") == before + 1  # vLLM counted the prompt
    want = remote.generate([PROMPT], max_new_tokens=4)
    proxy.break_next(1, "no-usage")
    assert remote.generate([PROMPT], max_new_tokens=4) == want  # what fits is answered
