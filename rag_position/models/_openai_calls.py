"""One request to an OpenAI-compatible server, and a batch of them, for the ``openai:`` backend.

:func:`call` sends one request through the backend's
:class:`~rag_position.models._http.JSONClient` (retried inside its deadline) to the
endpoint's URL (``/tokenize`` at the server's root, :func:`server_root`, as vLLM serves
it; the rest under ``/v1``) and turns a refusal into the error the caller sees.
:func:`map_metered` runs a batch's requests on up to ``concurrency`` threads
(:func:`map_threads`), in order, metering each one's usage
(:mod:`rag_position.models.openai_backend`, "Prompts of a batch are sent concurrently").
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from rag_position.cost import Cost, UsageMeter, in_context
from rag_position.models._http import HTTPStatusError, JSONClient
from rag_position.models._openai_replies import Usage, context_error, status_error

__all__ = ["call", "map_metered", "map_threads", "server_root"]

T = TypeVar("T")
U = TypeVar("U")


def server_root(base_url: str) -> str:
    """The server's root: ``base_url`` without its ``/v1``."""
    return base_url.removesuffix("/v1")


def call(
    http: JSONClient,
    base_url: str,
    method: str,
    endpoint: str,
    body: Any,
    parse: Callable[[Any], T],
    *,
    what: str,
    raw_bad_request: bool = False,
) -> T:
    """One request, retried inside the deadline; errors become rag-position errors.

    ``/tokenize`` is served at the server's root (vLLM), the rest under ``/v1``.
    With ``raw_bad_request``, a 400 that is not about the context window is re-raised
    as :class:`HTTPStatusError` (the caller may retry differently).
    """
    url = (server_root(base_url) if endpoint == "/tokenize" else base_url) + endpoint
    try:
        return http.call(method, url, body, parse, what=what)
    except HTTPStatusError as exc:
        if exc.status == 400:
            context = context_error(exc.message, what)
            if context is not None:
                raise context from exc
            if raw_bad_request:
                raise
        raise status_error(exc, http.model) from exc


def map_threads(fn: Callable[[T], U], items: list[T], *, concurrency: int) -> list[U]:
    """``fn`` over ``items`` on up to ``concurrency`` threads, in order; the first error
    cancels what has not started."""
    if len(items) <= 1 or concurrency == 1:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(min(concurrency, len(items))) as pool:
        futures: list[Future[U]] = [pool.submit(in_context(fn), item) for item in items]
        try:
            return [f.result() for f in futures]
        except BaseException:
            for f in futures:
                f.cancel()
            raise


def map_metered(
    fn: Callable[[T], tuple[U, Usage]],
    items: list[T],
    *,
    concurrency: int,
    meter: UsageMeter,
) -> list[U]:
    """``fn`` over ``items`` on up to ``concurrency`` threads, in order, metering usage."""
    if not items:
        return []
    start = time.perf_counter()

    def run(item: T) -> U:
        value, usage = fn(item)
        meter.add(Cost(1, usage.prompt_tokens, usage.completion_tokens, 0.0))
        return value

    try:
        return map_threads(run, items, concurrency=concurrency)
    finally:
        meter.add(Cost(seconds=time.perf_counter() - start))
