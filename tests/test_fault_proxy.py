"""The fault-injecting proxy itself (:mod:`rag_position.testing.fault_proxy`), over the double.

Its errors are replies, never a dropped connection a client would retry without a trace.
Against real vLLM: ``tests/test_vllm_faults.py``.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import httpx
import pytest

from rag_position.models.openai_backend import OpenAICompatibleModel
from rag_position.models.transformers_backend import TransformersModel
from rag_position.serving import free_port
from rag_position.testing.fault_proxy import FaultProxy
from rag_position.testing.openai_double import ModelServer, serve

PROMPT = "Question: what is the capital of France?\nAnswer:"


@pytest.fixture(scope="module")
def double(embedded_fp32: TransformersModel) -> Iterator[ModelServer]:
    with serve(embedded_fp32) as srv:
        yield srv


def test_replies_pass_through_unchanged(double: ModelServer) -> None:
    with FaultProxy(double.url).start() as proxy:
        assert proxy.url.endswith("/v1") and proxy.url != double.url
        name = double.model_name
        direct = OpenAICompatibleModel(double.url, name, scoring="echo", chat_template=False)
        via = OpenAICompatibleModel(proxy.url, name, scoring="echo", chat_template=False)
        span = [(0, len("Question:"))]
        assert via.score_spans([PROMPT], span) == direct.score_spans([PROMPT], span)
        generated = direct.generate([PROMPT], max_new_tokens=4)
        assert via.generate([PROMPT], max_new_tokens=4) == generated
        assert via.max_context == direct.max_context
        assert proxy.count("/v1/completions") == 2 and proxy.count("/v1/models", "GET") == 1
        direct.close()
        via.close()


def test_an_injected_fault_never_reaches_the_upstream(double: ModelServer) -> None:
    with FaultProxy(double.url).start() as proxy:
        proxy.fail_next(1, status=429, retry_after=2.0, message="slow down")
        before = double.count("/v1/models", "GET")
        reply = httpx.get(f"{proxy.url}/models", timeout=30)
        assert reply.status_code == 429 and reply.headers["retry-after-ms"] == "2000"
        assert reply.json()["error"]["message"] == "slow down"
        assert double.count("/v1/models", "GET") == before
        assert proxy.pending() == (0, 0)


def test_an_upstream_that_is_gone_is_a_502_naming_it_and_must_be_http() -> None:
    port = free_port()
    with FaultProxy(f"http://127.0.0.1:{port}/v1").start() as proxy:
        reply = httpx.get(f"{proxy.url}/models", timeout=30)
    assert reply.status_code == 502
    message = reply.json()["error"]["message"]
    assert f"http://127.0.0.1:{port}/v1" in message and "ConnectionRefused" in message
    with pytest.raises(ValueError, match="upstream must be http://HOST:PORT"):
        FaultProxy("127.0.0.1:8000/v1")


def test_a_break_that_does_not_fit_the_reply_says_so(double: ModelServer) -> None:
    """A scoring break landing on ``/v1/models`` (no ``choices``): a 500 that names it."""
    with FaultProxy(double.url).start() as proxy:
        proxy.break_next(1, "nan-logprob")
        reply = httpx.get(f"{proxy.url}/models", timeout=30)
        assert reply.status_code == 500
        message = reply.json()["error"]["message"]
        assert "injected break 'nan-logprob' does not fit the reply of /v1/models" in message
        assert proxy.pending() == (0, 0)
        assert httpx.get(f"{proxy.url}/models", timeout=30).status_code == 200  # still serving


def test_a_body_break_breaks_the_upstream_s_reply(double: ModelServer) -> None:
    with FaultProxy(double.url).start() as proxy:
        body = {"model": double.model_name, "prompt": PROMPT, "max_tokens": 2}
        proxy.break_next(1, "null-text")
        broken = httpx.post(f"{proxy.url}/completions", json=body, timeout=60)
        right = httpx.post(f"{proxy.url}/completions", json=body, timeout=60)
    assert broken.status_code == 200 and broken.json()["choices"][0]["text"] is None
    assert isinstance(right.json()["choices"][0]["text"], str)


def test_a_request_it_cannot_read_is_refused(double: ModelServer) -> None:
    with FaultProxy(double.url).start() as proxy:
        host, port = proxy.server_address[:2]
        with socket.create_connection((str(host), int(port)), timeout=30) as sock:
            sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ten\r\n\r\n")
            sock.shutdown(socket.SHUT_WR)
            head = b"".join(iter(lambda: sock.recv(65536), b"")).decode()
        assert head.startswith("HTTP/1.1 400")
        message = json.loads(head.split("\r\n\r\n", 1)[1])["error"]["message"]
        assert "a bad Content-Length" in message
        assert proxy.count("/v1/completions") == 0
