"""A fault-injecting proxy in front of a real OpenAI-compatible server (vLLM), for tests.

The double (:mod:`rag_position.testing.openai_double`) breaks replies it makes itself,
from a local model; this proxy breaks a real server's replies. Every request goes to the
upstream server unchanged, and its reply comes back unchanged, except where a test has
queued a fault (``fail_next``: an HTTP error instead, the upstream never asked) or a
break (``break_next``: the upstream's successful JSON reply, broken as the double breaks
its own: truncated, HTML, a null text, a NaN log-probability, arrays cut short, no
``usage``, trickled, or no answer at all; every name in
:data:`~rag_position.testing._faults.BREAKS`). So the malformed-reply cases run against
the exact bodies vLLM sends: its token strings, offsets and ``usage``.

**For tests on 127.0.0.1, not for serving**: it passes the ``Authorization`` header
through, buffers each reply whole and keeps no connection to the upstream between
requests.

Example:
    >>> with FaultProxy("http://127.0.0.1:8000/v1").start() as proxy:
    ...     model = load_model(f"openai:{proxy.url}/smollm2-135m-instruct", scoring="echo")
    ...     proxy.break_next(1, "short-arrays")   # the next reply is cut, then retried
    ...     model.score_spans([prompt], [span])
"""

from __future__ import annotations

import http.client
import json
import logging
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlsplit

from rag_position.testing._faults import (
    InjectingServer,
    error_body,
    send_broken,
    send_fault,
    send_json,
)

logger = logging.getLogger(__name__)

_PASSED_HEADERS = ("Content-Type", "Authorization", "Accept")
_RETURNED_HEADERS = ("Content-Type", "retry-after", "retry-after-ms")


class _ProxyHandler(BaseHTTPRequestHandler):
    server: FaultProxy
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self._forward("GET")

    def do_POST(self) -> None:
        self._forward("POST")

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s " + format, self.address_string(), *args)

    def _forward(self, method: str) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            self.close_connection = True
            send_json(self, 400, error_body(400, "a bad Content-Length", "BadRequestError"))
            return
        if self.headers.get("Transfer-Encoding"):
            self.close_connection = True
            message = "the proxy reads request bodies by Content-Length only"
            send_json(self, 411, error_body(411, message, "LengthRequired"))
            return
        raw = self.rfile.read(length) if length > 0 else b""
        self.server.record(method, self.path.split("?", 1)[0].rstrip("/") or "/")
        fault = self.server.take_fault()
        if fault is not None:
            send_fault(self, fault)
            return
        try:
            status, headers, data = self.server.ask_upstream(method, self.path, raw, self.headers)
        except (OSError, http.client.HTTPException) as exc:
            late = isinstance(exc, TimeoutError)
            message = f"the proxy got no answer from {self.server.upstream}: {exc!r}"
            status = 504 if late else 502
            send_json(self, status, error_body(status, message, "BadGateway"))
            return
        if status == 200 and headers.get("Content-Type", "").startswith("application/json"):
            broken = self.server.take_break()
            if broken is not None:
                try:
                    body = json.loads(data)
                except ValueError as exc:
                    message = f"the upstream's reply of {self.path} is not JSON: {exc}"
                    send_json(self, 500, error_body(500, message, "InjectedBreakMismatch"))
                    return
                send_broken(self, broken, body)
                return
        self._send(status, headers, data)

    def _send(self, status: int, headers: dict[str, str], data: bytes) -> None:
        try:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up
            self.close_connection = True


class FaultProxy(InjectingServer):
    """The proxy (see the module docstring): ``upstream`` is the server's base URL.

    ``url`` is the proxy's base URL, with the upstream's path (``http://127.0.0.1:PORT/v1``):
    point the client there. ``upstream_timeout`` bounds each upstream request, in seconds
    (no answer in time: a 504).
    The testing aids (``fail_next``, ``break_next``, ``count``) and the lifecycle
    (``start``, ``shutdown``, a ``with`` block) are
    :class:`~rag_position.testing._faults.InjectingServer`'s.
    """

    def __init__(
        self,
        upstream: str,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        upstream_timeout: float = 600.0,
    ) -> None:
        parts = urlsplit(upstream)
        if parts.scheme != "http" or not parts.hostname or parts.port is None:
            raise ValueError(f"upstream must be http://HOST:PORT[/PATH], got {upstream!r}")
        super().__init__((host, port), _ProxyHandler)
        self.upstream = upstream.rstrip("/")
        self.upstream_timeout = upstream_timeout
        self._upstream_host, self._upstream_port = parts.hostname, parts.port
        self._prefix = parts.path.rstrip("/")

    @property
    def url(self) -> str:
        """The proxy's base URL for OpenAI clients, e.g. ``http://127.0.0.1:40513/v1``."""
        return self.address + self._prefix

    def ask_upstream(
        self, method: str, path: str, body: bytes, headers: Any
    ) -> tuple[int, dict[str, str], bytes]:
        """Send one request upstream: its status, the headers passed back, and its body."""
        connection = http.client.HTTPConnection(
            self._upstream_host, self._upstream_port, timeout=self.upstream_timeout
        )
        try:
            sent = {k: headers[k] for k in _PASSED_HEADERS if headers.get(k)}
            connection.request(method, path, body=body or None, headers=sent)
            reply = connection.getresponse()
            data = reply.read()
            back = {k: v for k in _RETURNED_HEADERS if (v := reply.getheader(k))}
            return reply.status, back, data
        finally:
            connection.close()


__all__ = ["FaultProxy"]
