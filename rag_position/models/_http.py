"""JSON over HTTP for the ``openai:`` backend: one deadline for the whole call.

Every call (:meth:`JSONClient.call`) is bounded as a whole by ``timeout`` seconds:
connecting, sending, every byte of the reply, the retries and the waits between them.
A server that trickles its reply one byte at a time, or never answers, ends the call
at the deadline with :class:`~rag_position.errors.BackendUnavailableError` naming the
URL, the model and the deadline. (A per-read timeout, which is what HTTP clients
offer, bounds nothing: a byte every few seconds keeps a read alive forever.)

Requests run on one event-loop thread per client, where ``asyncio.wait_for`` cancels
whatever the request is doing when its time is up; callers on any thread block on
their own request only.

Retried, inside the deadline, with exponential backoff (0.5 s doubling to 8 s, with
jitter; a ``retry-after-ms`` or ``retry-after`` header of at most 60 s is honoured
instead): connection failures, HTTP 408, 409, 429 and 5xx, and **malformed replies**:
a 200 whose body is not JSON, or whose JSON the caller's ``parse`` rejects by raising
:class:`Malformed` (a missing field, arrays of unequal length, a non-finite number).
After the last retry the error names the URL, the model and what was wrong; a number
is never computed from a broken reply. A deadline that ends after a malformed reply
says so, and what was wrong with it (the server answers, but not as it should: more
time would not help).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit, urlunsplit

import httpx

from rag_position.errors import BackendError, BackendUnavailableError, ModelSpecError

T = TypeVar("T")

RETRIED_STATUS = frozenset({408, 409, 429})  # and every 5xx
_BACKOFF_START, _BACKOFF_MAX, _RETRY_AFTER_MAX = 0.5, 8.0, 60.0


def split_base_url(rest: str) -> tuple[str, str | None]:
    """What follows ``openai:`` in a spec: the base URL, and the model named after ``/v1/``.

    A URL with no path gets ``/v1``; a ``ModelSpecError`` for anything but an http(s)
    URL with a host and a valid port.

    Example:
        >>> split_base_url("http://host:8000/v1/Qwen2.5-7B-Instruct")
        ('http://host:8000/v1', 'Qwen2.5-7B-Instruct')
        >>> split_base_url("http://host:8000")
        ('http://host:8000/v1', None)
    """
    parts = urlsplit(rest)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ModelSpecError(
            f"'openai:{rest}' needs an http(s) base URL, e.g. 'openai:http://localhost:8000/v1'"
        )
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number in 0..65535
    except ValueError as exc:
        raise ModelSpecError(f"'openai:{rest}': {exc}") from exc
    path = parts.path.rstrip("/")
    in_url: str | None = None
    head, sep, tail = path.partition("/v1/")
    if sep and tail:
        path, in_url = head + "/v1", unquote(tail)
    elif not path:
        path = "/v1"
    return urlunsplit((parts.scheme, parts.netloc, path, "", "")), in_url


class Malformed(Exception):
    """Raised by a reply parser: the reply is not what the endpoint promises (retried)."""


@dataclass
class HTTPStatusError(Exception):
    """A non-2xx answer that is not retried (or no longer): status and the server's message."""

    status: int
    message: str
    url: str

    def __str__(self) -> str:
        return f"{self.url} answered HTTP {self.status}: {self.message}"


@dataclass(frozen=True)
class _Reply:
    status: int
    headers: httpx.Headers
    content: bytes


def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:  # stopped by _stop: its selector and self-pipe are released now
        loop.close()


def _stop(loop: asyncio.AbstractEventLoop, client: httpx.AsyncClient | None) -> None:
    """Close the client and stop the loop (a finalizer: holds no reference to its owner)."""
    if loop.is_closed():
        return
    if client is not None and loop.is_running():
        with contextlib.suppress(Exception):  # best effort, at exit
            asyncio.run_coroutine_threadsafe(client.aclose(), loop).result(timeout=5)
    if loop.is_running():
        loop.call_soon_threadsafe(loop.stop)


def check_api_key(key: str) -> str:
    """``key`` as an HTTP header can carry it: printable ASCII, no surrounding space (a key
    read from a file with its newline). Refused naming what is wrong, never the key."""
    if not isinstance(key, str):
        raise TypeError(f"the API key must be a str, got {type(key).__name__}")
    if key != key.strip():
        raise ValueError("the API key starts or ends with white space (a newline?): strip it")
    bad = sorted({f"{ord(c):#04x}" for c in key if not " " <= c <= "~"})
    if bad:
        raise ValueError(
            f"the API key holds characters an HTTP header cannot carry ({', '.join(bad)}): "
            "an API key is printable ASCII"
        )
    return key


class JSONClient:
    """POST/GET JSON with a whole-call deadline, retries and reply validation (module doc)."""

    def __init__(
        self,
        *,
        api_key: str,
        model: str,
        timeout: float,
        max_retries: int,
    ) -> None:
        self.api_key = check_api_key(api_key)
        self.model = model
        self.timeout = timeout
        self.max_retries = max_retries
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: httpx.AsyncClient | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None

    # ------------------------------------------------------------------ the loop
    def _start(self) -> tuple[asyncio.AbstractEventLoop, httpx.AsyncClient]:
        with self._lock:
            if self._loop is None or self._client is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=_run_loop, args=(loop,), name="rag-position-http", daemon=True
                )
                thread.start()

                async def make() -> httpx.AsyncClient:
                    # no timeout of httpx's own: the deadline (wait_for) bounds each request
                    return httpx.AsyncClient(timeout=None, follow_redirects=False)

                client = asyncio.run_coroutine_threadsafe(make(), loop).result()
                self._loop, self._client = loop, client
                self._finalizer = weakref.finalize(self, _stop, loop, client)
            return self._loop, self._client

    def close(self) -> None:
        """Close the connections and stop the loop thread (a later call starts them again)."""
        with self._lock:
            finalizer, self._finalizer = self._finalizer, None
            self._loop = self._client = None
        if finalizer is not None:
            # the finalizer itself, so that it runs once: run again when this object is
            # collected, it found the loop still stopping, waited 5 s on it and left the
            # close of the client pending
            finalizer()

    def _send(
        self, method: str, url: str, body: Any, seconds: float
    ) -> _Reply:  # raises TimeoutError, httpx.TransportError
        loop, client = self._start()
        headers = {"Authorization": f"Bearer {self.api_key}"}
        content = None
        if body is not None:
            headers["Content-Type"] = "application/json"
            content = json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8")

        async def fetch() -> _Reply:
            reply = await client.request(method, url, content=content, headers=headers)
            return _Reply(reply.status_code, reply.headers, reply.content)

        async def bounded() -> _Reply:
            return await asyncio.wait_for(fetch(), seconds)

        future = asyncio.run_coroutine_threadsafe(bounded(), loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    # ------------------------------------------------------------------ one call
    def call(
        self,
        method: str,
        url: str,
        body: Any,
        parse: Callable[[Any], T],
        *,
        what: str,
    ) -> T:
        """``parse(json)`` of the reply to one request, retried inside the deadline.

        Non-retried failures: :class:`HTTPStatusError` (a 4xx other than 408/409/429,
        which the caller maps), an exception ``parse`` raises other than
        :class:`Malformed`. Everything else ends as :class:`BackendError` or
        :class:`BackendUnavailableError` naming ``url``, the model and ``what``.
        """
        start = time.monotonic()
        deadline = start + self.timeout
        attempt = 0
        malformed: str | None = None  # what was wrong with the last reply, if it was malformed
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._deadline(url, what, attempt, None, malformed)
            wait: float | None = None
            try:
                reply = self._send(method, url, body, remaining)
            except (TimeoutError, asyncio.TimeoutError) as exc:
                raise self._deadline(
                    url, what, attempt + 1, "no complete answer", malformed
                ) from exc
            except httpx.TransportError as exc:
                failure: BackendError = BackendUnavailableError(
                    f"cannot reach the model server at {url} for model {self.model!r} "
                    f"({type(exc).__name__}: {exc}){self._tries(attempt)} (deadline "
                    f"timeout={self.timeout}s, max_retries={self.max_retries}); start the "
                    "server or check the URL"
                )
                failure.__cause__ = exc
            else:
                if 200 <= reply.status < 300:
                    try:
                        data = json.loads(reply.content)
                        return parse(data)
                    except (Malformed, ValueError, RecursionError) as exc:
                        # ValueError: not JSON, not UTF-8, or an integer past Python's
                        # limit; RecursionError: nesting past the parser's stack
                        malformed = _describe(exc, reply.content)
                        failure = BackendError(
                            f"{url} sent a malformed reply for {what} of model {self.model!r}"
                            f"{self._tries(attempt)}: {malformed}"
                        )
                        failure.__cause__ = exc
                else:
                    malformed = None
                    message = _server_message(reply.content)
                    if not (reply.status in RETRIED_STATUS or reply.status >= 500):
                        raise HTTPStatusError(reply.status, message, url)
                    failure = BackendError(
                        f"{url} answered HTTP {reply.status}{self._tries(attempt)} for model "
                        f"{self.model!r}: {message}"
                    )
                    wait = _retry_after(reply.headers)
            if attempt >= self.max_retries:
                raise failure
            attempt += 1
            if wait is None:
                wait = min(_BACKOFF_MAX, _BACKOFF_START * 2 ** (attempt - 1))
                wait *= 1 - 0.25 * random.random()
            if time.monotonic() + wait >= deadline:
                bad_reply = isinstance(failure.__cause__, (Malformed, ValueError))
                last = None if bad_reply else str(failure)  # a malformed reply: said as such
                raise self._deadline(url, what, attempt, last, malformed) from failure
            time.sleep(wait)

    def _tries(self, retries: int) -> str:
        return f" after {retries} retries" if retries else ""

    def _deadline(
        self, url: str, what: str, attempts: int, last: str | None, malformed: str | None
    ) -> BackendUnavailableError:
        """The deadline's error: ``last``, how the last attempt failed; ``malformed``, what
        was wrong with the last reply when it was malformed (then said first)."""
        if malformed is not None:
            then = f", and the retry after it: {last}" if last else ""
            said = f"; the last reply was malformed ({malformed}){then}"
            hint = (
                "the server answers, but not as the endpoint should: check it (and any proxy "
                "in front of it)"
            )
        else:
            said = f"; last: {last}" if last else ""
            hint = "is the server up and not overloaded? A larger timeout= gives it longer"
        return BackendUnavailableError(
            f"{url} gave no complete answer for {what} of model {self.model!r} within the "
            f"deadline timeout={self.timeout}s ({attempts} attempt(s), "
            f"max_retries={self.max_retries}){said}; {hint}"
        )


def _retry_after(headers: httpx.Headers) -> float | None:
    """Seconds a server asked to wait (``retry-after-ms`` or ``retry-after``), if sane."""
    for key, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        raw = headers.get(key)
        if raw is None:
            continue
        try:
            value = float(raw) * scale
        except ValueError:
            continue
        if 0 < value <= _RETRY_AFTER_MAX:
            return value
    return None


def _server_message(content: bytes) -> str:
    """The message of an error body (OpenAI's ``{"error": {"message"}}``, vLLM's too)."""
    try:
        body = json.loads(content)
    except (ValueError, RecursionError):
        text = content.decode("utf-8", "replace").strip()
        return text[:300] or "(empty body)"
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(body.get("message"), str):
            return str(body["message"])
        if isinstance(body.get("detail"), str):
            return str(body["detail"])
    return json.dumps(body)[:300]


def _describe(exc: Exception, content: bytes) -> str:
    if isinstance(exc, Malformed):
        return str(exc)
    head = content[:80].decode("utf-8", "replace")
    return f"the body is not JSON ({exc}); it starts {head!r}"


__all__ = ["HTTPStatusError", "JSONClient", "Malformed"]
