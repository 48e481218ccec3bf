"""Faults and broken replies, and the test server that injects them.

Shared by the OpenAI-compatible double (:mod:`rag_position.testing.openai_double`,
which serves a local model) and the fault-injecting proxy
(:mod:`rag_position.testing.fault_proxy`, which passes a real server's replies through):
the faults (:class:`Fault`, an HTTP error instead of the reply) and broken replies
(:class:`Break`, every name in :data:`BREAKS`) a test queues, how a broken reply goes on
the wire (:func:`send_broken`), and :class:`InjectingServer`, the threaded HTTP server
with the queues, the request log and the lifecycle both servers share.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, TypeVar

JSON = dict[str, Any]
_S = TypeVar("_S", bound="InjectingServer")


@dataclass(frozen=True)
class Fault:
    """An HTTP error to answer with instead of serving (``fail_next``)."""

    status: int
    retry_after: float | None
    message: str


@dataclass(frozen=True)
class Break:
    """A broken reply to send instead of the right one (``break_next``)."""

    kind: str
    seconds: float


def _logprobs_of(body: JSON) -> JSON:
    lp = body["choices"][0].get("logprobs")
    if not isinstance(lp, dict):
        raise ValueError("this break needs a reply with logprobs (a scoring request)")
    return lp


def _set_null_text(body: JSON) -> None:
    body["choices"][0]["text"] = None


def _set_null_content(body: JSON) -> None:
    body["choices"][0]["message"]["content"] = None


def _set_nan_logprob(body: JSON) -> None:
    values = _logprobs_of(body)["token_logprobs"]
    values[len(values) // 2] = float("nan")


def _set_null_logprob(body: JSON) -> None:
    values = _logprobs_of(body)["token_logprobs"]
    values[len(values) // 2] = None


def _set_short_logprobs(body: JSON) -> None:
    lp = _logprobs_of(body)
    lp["token_logprobs"] = lp["token_logprobs"][: max(1, len(lp["token_logprobs"]) // 2)]


def _set_short_offsets(body: JSON) -> None:
    lp = _logprobs_of(body)
    lp["text_offset"] = lp["text_offset"][:1]


def _set_short_arrays(body: JSON) -> None:
    """Every array cut to the same shorter length: consistent, but short of the text."""
    lp = _logprobs_of(body)
    n = max(1, len(lp["tokens"]) // 2)
    for name in ("tokens", "token_logprobs", "text_offset", "top_logprobs"):
        if isinstance(lp.get(name), list):
            lp[name] = lp[name][:n]


def _cut_token(body: JSON, *, double: bool) -> None:
    lp = _logprobs_of(body)
    at = len(lp["tokens"]) // 2
    for name in ("tokens", "token_logprobs", "text_offset", "top_logprobs"):
        values = lp.get(name)
        if isinstance(values, list) and len(values) > at:
            lp[name] = values[: at + 1] + values[at:] if double else values[:at] + values[at + 1 :]


def _drop_token(body: JSON) -> None:
    """A middle token removed from every array: consistent arrays, one token short."""
    _cut_token(body, double=False)


def _double_token(body: JSON) -> None:
    """A middle token repeated in every array: consistent arrays, one token long."""
    _cut_token(body, double=True)


def _set_positive_logprob(body: JSON) -> None:
    values = _logprobs_of(body)["token_logprobs"]
    values[len(values) // 2] = 5.0  # a probability above 1


def _set_huge_logprobs(body: JSON) -> None:
    values = _logprobs_of(body)["token_logprobs"]
    values[1:] = [-1e308] * (len(values) - 1)  # their sum overflows to -inf


def _drop_choices(body: JSON) -> None:
    body["choices"] = []


def _drop_usage(body: JSON) -> None:
    """A reply without ``usage``: well formed (the field is optional), but the client
    must then count the prompt's tokens itself."""
    body.pop("usage", None)


BODY_BREAKS: dict[str, Callable[[JSON], None]] = {
    "null-text": _set_null_text,
    "null-content": _set_null_content,
    "nan-logprob": _set_nan_logprob,
    "null-logprob": _set_null_logprob,
    "short-logprobs": _set_short_logprobs,
    "short-offsets": _set_short_offsets,
    "short-arrays": _set_short_arrays,
    "dropped-token": _drop_token,
    "doubled-token": _double_token,
    "positive-logprob": _set_positive_logprob,
    "huge-logprobs": _set_huge_logprobs,
    "no-choices": _drop_choices,
    "no-usage": _drop_usage,
}
BREAKS = ("truncated-json", "html", "not-an-object", *BODY_BREAKS, "trickle", "hang")

# Which request each break applies to (a body break needs the field it breaks):
COMPLETION_BREAKS = ("truncated-json", "html", "not-an-object", "null-text", "no-choices")
"""Breaks of a ``/v1/completions`` generation reply."""
CHAT_BREAKS = ("null-content", "no-choices", "truncated-json")
"""Breaks of a ``/v1/chat/completions`` reply."""
SCORING_BREAKS = (
    "truncated-json",
    "html",
    "null-text",
    "no-choices",
    "nan-logprob",
    "null-logprob",
    "short-logprobs",
    "short-offsets",
    "short-arrays",
    "dropped-token",
    "doubled-token",
    "positive-logprob",
    "huge-logprobs",
)
"""Breaks of an echo scoring reply (``/v1/completions`` with ``echo`` and ``logprobs``)."""


def error_body(status: int, message: str, type_: str) -> JSON:
    return {"error": {"message": message, "type": type_, "param": None, "code": status}}


def send_broken(handler: BaseHTTPRequestHandler, broken: Break, body: JSON) -> None:
    """Answer 200 with the reply broken as ``broken.kind`` says (``BREAKS``)."""
    kind = broken.kind
    data = json.dumps(body).encode()
    content_type = "application/json"
    if kind == "hang":  # headers never come: the client must give up by itself
        time.sleep(broken.seconds)
        handler.close_connection = True
        return
    if kind == "truncated-json":
        data = data[: len(data) // 2]
    elif kind == "html":
        data, content_type = b"<html><body>502 Bad Gateway</body></html>", "text/html"
    elif kind == "not-an-object":
        data = b"[]"
    elif kind in BODY_BREAKS:
        try:
            BODY_BREAKS[kind](body)
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
            # the break does not apply to this reply (another endpoint's, say): say so
            # rather than drop the connection, which a client retries without a trace
            message = f"injected break {kind!r} does not fit the reply of {handler.path}: {exc!r}"
            send_json(handler, 500, error_body(500, message, "InjectedBreakMismatch"))
            return
        data = json.dumps(body).encode()  # NaN is written as the literal NaN
    elif kind != "trickle":
        raise ValueError(f"unknown break {kind!r}")
    handler.send_response(200)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    if kind != "trickle":
        handler.wfile.write(data)
        return
    handler.close_connection = True
    for i in range(len(data)):  # one byte every broken.seconds, to the end
        try:
            handler.wfile.write(data[i : i + 1])
            handler.wfile.flush()
        except OSError:  # the client gave up
            return
        time.sleep(broken.seconds)


def send_json(
    handler: BaseHTTPRequestHandler, status: int, body: JSON, headers: dict[str, str] | None = None
) -> None:
    """Answer ``status`` with ``body`` as JSON, and any extra ``headers``."""
    data = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    for key, value in (headers or {}).items():
        handler.send_header(key, value)
    handler.end_headers()
    handler.wfile.write(data)


def fault_headers(fault: Fault) -> dict[str, str]:
    """The fault's ``retry-after-ms`` header, where it has a wait."""
    if fault.retry_after is None:
        return {}
    return {"retry-after-ms": str(max(1, round(fault.retry_after * 1000)))}


def send_fault(handler: BaseHTTPRequestHandler, fault: Fault) -> None:
    """Answer with the fault's HTTP error (and ``retry-after-ms`` where it has one)."""
    body = error_body(fault.status, fault.message, "InjectedFault")
    send_json(handler, fault.status, body, fault_headers(fault))


class InjectingServer(ThreadingHTTPServer):
    """A threaded HTTP server on which a test queues faults and broken replies.

    ``fail_next`` answers the next requests with an HTTP error, ``break_next`` breaks
    the next successful replies; the handler takes them with ``take_fault`` and
    ``take_break`` and logs each request with ``record`` (``count`` reads the log).
    ``start`` serves in a daemon thread; ``shutdown`` (or leaving a ``with`` block)
    stops it.
    """

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self.requests: list[tuple[str, str]] = []  # (method, path) of every request seen
        self._faults: deque[Fault] = deque()
        self._breaks: deque[Break] = deque()
        self._state_lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        """``http://HOST:PORT`` (127.0.0.1 for a server bound to every address)."""
        host, port = self.server_address[:2]
        if isinstance(host, bytes):
            host = host.decode()
        host = "127.0.0.1" if host in ("0.0.0.0", "") else host
        return f"http://{host}:{port}"

    # ------------------------------------------------------------------ testing aids
    def fail_next(
        self,
        n: int,
        status: int = 500,
        *,
        retry_after: float | None = None,
        message: str = "injected fault",
    ) -> None:
        """Testing aid: answer the next ``n`` requests with ``status`` instead of serving them.

        ``retry_after`` (seconds) adds a ``retry-after-ms`` header, which OpenAI clients
        honour instead of their exponential backoff (keeps retry tests fast).
        """
        with self._state_lock:
            self._faults.extend([Fault(status, retry_after, message)] * n)

    def break_next(self, n: int, kind: str, *, seconds: float = 1.0) -> None:
        """Testing aid: answer the next ``n`` successful requests with a broken reply.

        ``kind`` is one of ``BREAKS``: ``truncated-json``, ``html``, ``not-an-object``,
        ``null-text``, ``null-content``, ``nan-logprob``, ``null-logprob``,
        ``short-logprobs``, ``short-offsets``, ``short-arrays`` (every logprobs array cut
        alike), ``no-choices`` (a 200 with that body); ``no-usage`` (the right body
        without ``usage``: well formed, but the client must count the prompt itself);
        ``trickle`` (the right body, one byte every ``seconds``); ``hang`` (no answer for
        ``seconds``, then the connection closes).
        """
        if kind not in BREAKS:
            raise ValueError(f"kind must be one of {', '.join(BREAKS)}, got {kind!r}")
        with self._state_lock:
            self._breaks.extend([Break(kind, seconds)] * n)

    def take_break(self) -> Break | None:
        with self._state_lock:
            return self._breaks.popleft() if self._breaks else None

    def take_fault(self) -> Fault | None:
        with self._state_lock:
            return self._faults.popleft() if self._faults else None

    def pending(self) -> tuple[int, int]:
        """Testing aid: (faults, breaks) queued and not yet taken."""
        with self._state_lock:
            return len(self._faults), len(self._breaks)

    def clear(self) -> None:
        """Testing aid: drop every queued fault and break."""
        with self._state_lock:
            self._faults.clear()
            self._breaks.clear()

    def record(self, method: str, path: str) -> None:
        with self._state_lock:
            self.requests.append((method, path))

    def count(self, path: str, method: str = "POST") -> int:
        """Testing aid: how many requests for ``path`` the server has seen (faults included)."""
        with self._state_lock:
            return sum(1 for m, p in self.requests if (m, p) == (method, path))

    # ------------------------------------------------------------------ lifecycle
    def start(self: _S) -> _S:
        """Serve in a daemon thread; returns ``self``."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
            )
            self._thread.start()
        return self

    def shutdown(self) -> None:
        """Stop serving (if started) and close the listening socket."""
        if self._thread is not None:
            super().shutdown()
            self._thread.join()
            self._thread = None
        self.server_close()

    def __enter__(self: _S) -> _S:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()


__all__ = [
    "BODY_BREAKS",
    "BREAKS",
    "CHAT_BREAKS",
    "COMPLETION_BREAKS",
    "JSON",
    "SCORING_BREAKS",
    "Break",
    "Fault",
    "InjectingServer",
    "error_body",
    "fault_headers",
    "send_broken",
    "send_fault",
    "send_json",
]
