"""How a run's chunks execute, chosen once from the backend (:func:`choose_executor`):
forked worker processes for a local model on a CPU, one after another for a server's
model (its requests in flight are its own ``concurrency``), else threads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import Any, Protocol

from rag_position.eval.engine._workers import Staged, run_forked
from rag_position.models.loading import is_remote

Records = list[dict[str, Any]]


class Work(Staged, Protocol):
    """A chunk's work: its stages (for worker processes), or all of them at once."""

    def __call__(self, jobs: Any) -> Records: ...


def threaded(
    work: Work, chunks: list[list[Any]], concurrency: int
) -> Iterator[list[dict[str, Any]]]:
    """Run chunks on up to ``concurrency`` threads; yield each chunk's records as it ends."""
    with ThreadPoolExecutor(concurrency) as pool:
        queue = iter(chunks)
        running: set[Future[list[dict[str, Any]]]] = set()
        error: BaseException | None = None
        while True:
            while error is None and len(running) < concurrency:
                chunk = next(queue, None)
                if chunk is None:
                    break
                running.add(pool.submit(work, chunk))
            if not running:
                break
            finished, running = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                exc = future.exception()
                if exc is not None:
                    error = error or exc
                else:
                    yield future.result()
        if error is not None:
            raise error


def choose_executor(
    work: Work, *, workers: int, concurrency: int, remote: bool
) -> Callable[[list[list[Any]]], Iterator[list[dict[str, Any]]]]:
    """How the chunks run, chosen once: in ``workers`` forked processes (a local model on
    a CPU); one after another (a server's model, whose requests in flight are its own
    ``concurrency``, or ``concurrency`` 1); else ``concurrency`` chunks on threads."""

    def serial(chunks: list[list[Any]]) -> Iterator[list[dict[str, Any]]]:
        return (work(chunk) for chunk in chunks)

    def execute(chunks: list[list[Any]]) -> Iterator[list[dict[str, Any]]]:
        if workers > 1 and len(chunks) > 1:
            return run_forked(work, chunks, workers)
        if concurrency == 1 or remote:
            return serial(chunks)
        return threaded(work, chunks, concurrency)

    return execute


@contextmanager
def backend_concurrency(model: Any, concurrency: int) -> Iterator[None]:
    """Give a backend with its own ``concurrency`` the run's value, restored afterwards."""
    if not is_remote(model):
        yield
        return
    before = model.concurrency
    model.concurrency = concurrency
    try:
        yield
    finally:
        model.concurrency = before
