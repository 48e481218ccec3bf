"""Worker processes for a local model: the run's chunks on forked copies of the process.

A local model on a CPU decodes a few prompts at a time, steps too small for several
threads to share: two threads gave 1.4 times one thread's speed on the 2-core machine
of docs/measurements.md. Processes of one thread each share nothing. Each worker is a
fork of the running process, made when the run starts: it inherits the loaded model
(its weights are shared, copy-on-write, not copied) and the jobs, closures included,
so nothing is pickled but a chunk's index and its prepared prompts, and the answers
on the way back. The workers prepare chunks ahead (a strategy's scoring calls) and
generate; the parent plans each chunk in order (a prompt an earlier chunk of the run
generates is read back, not generated again) and alone writes the prediction file,
chunk by chunk in job order. So a run with workers sends the model the same batches
and writes the same records as the same run in one process on one thread (a
different thread count changes the low bits of the arithmetic, and so can change a
greedy answer), and resumes the same.

The workers die with the run's process: each asks the kernel for ``SIGKILL`` when
its parent dies (Linux ``PR_SET_PDEATHSIG``; a parent already gone by then ends it at
once), so that a run killed with ``SIGKILL`` leaves no worker behind holding a copy
of the model's memory. While the workers run, ``SIGTERM`` of the run's process (where
it has no handler of its own) stops them and ends the run with :class:`Terminated`
(exit status 143), and the workers ignore ``SIGINT``: Ctrl-C reaches the run's
process, which stops them (``KeyboardInterrupt``).

Linux only (``fork``); elsewhere ``workers`` must be 1.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence, Set
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from rag_position.eval.engine.common import EvalConfigError
from rag_position.eval.engine.worker_process import (
    parent_death_prctl,
    start_worker,
    terminate_on_sigterm,
    threads_each,
)
from rag_position.models.loading import is_remote

Records = list[dict[str, Any]]

_TASK: tuple[Staged, Sequence[Any]] | None = None
"""What the forked workers run: set just before they fork, read only in them."""


@dataclass(frozen=True)
class _Failure:
    """An error raised in a worker, brought back as text (an exception object may not
    pickle, and its type may matter less than what it says)."""

    kind: str
    message: str
    trace: str
    pid: int


class _RemoteTraceback(Exception):
    """The worker's traceback, chained under :class:`WorkerError` (as
    :mod:`concurrent.futures` chains one)."""

    def __str__(self) -> str:
        return f"\n{self.args[0]}"


class WorkerError(RuntimeError):
    """A chunk failed in a worker process: the worker's error type and message (its
    traceback is chained as the cause)."""


def can_fork() -> bool:
    """Whether this platform can fork worker processes (Linux: yes)."""
    return sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()


def check_workers(workers: int, model: Any) -> int:
    """``workers`` checked against the model and the platform.

    Example:
        >>> check_workers(1, object())
        1
        >>> class Remote:
        ...     concurrency = 8
        >>> check_workers(2, Remote())
        Traceback (most recent call last):
        ...
        rag_position.eval.engine.common.EvalConfigError: --workers is for a local model; a server's model takes --concurrency (requests in flight)
    """  # noqa: E501
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise EvalConfigError(f"--workers must be an integer >= 1, got {workers!r}")
    if workers == 1:
        return 1
    if is_remote(model):
        raise EvalConfigError(
            "--workers is for a local model; a server's model takes --concurrency "
            "(requests in flight)"
        )
    if not can_fork():
        raise EvalConfigError(
            f"--workers {workers} needs fork (Linux); on {sys.platform} run with --workers 1, "
            "or split the run with --shard over several processes"
        )
    return workers


def resolve_workers(workers: int | None, model: Any) -> int:
    """``workers`` checked, ``None`` being :func:`auto_workers`'s choice for ``model``."""
    return check_workers(auto_workers(model) if workers is None else workers, model)


def auto_workers(model: Any) -> int:
    """The default: a local model on a CPU gets one worker per torch thread (each worker
    then runs one thread), as many as the free memory holds at :data:`MEMORY_FACTOR`
    times the model's weights each; anything else, and a process already held to one
    thread (``OMP_NUM_THREADS=1``, as when shares run side by side), gets 1.

    Example:
        >>> auto_workers(object())  # not a local model on a CPU
        1
    """
    device = getattr(model, "device", None)
    if getattr(device, "type", device) != "cpu" or is_remote(model):
        return 1
    if not can_fork() or "torch" not in sys.modules:
        return 1
    import torch

    threads = max(1, int(torch.get_num_threads()))
    weights, free = _weights_bytes(model), _free_memory()
    if threads > 1 and weights and free is not None:
        threads = max(1, min(threads, free // (MEMORY_FACTOR * weights)))
    return threads


MEMORY_FACTOR = 4
"""Free memory counted per worker, in multiples of the model's weights: a worker shares
the weights but keeps its own activations and key-value cache. A rough allowance that
keeps a large model on a many-core machine from starting a worker per core (the
embedded models are 0.3 to 0.5 GB; 2 workers need 2 to 4 GB free)."""


def _weights_bytes(model: Any) -> int:
    """The bytes of the model's torch weights (0 where it has none to count)."""
    module = getattr(model, "model", None)
    parameters = getattr(module, "parameters", None)
    if not callable(parameters):
        return 0
    return sum(int(p.numel()) * int(p.element_size()) for p in parameters())


def _free_memory() -> int | None:
    """Memory the system can give now (Linux: ``MemAvailable``), or ``None``."""
    try:
        with open("/proc/meminfo", encoding="ascii") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


class Staged(Protocol):
    """A chunk's work in stages (the runner's ``_Chunk``): ``prepare`` and ``generate``
    run in the workers; ``plan`` and ``records`` in the run's process, chunk by chunk
    in order."""

    def prepare(self, jobs: Any) -> Any: ...

    def plan(self, prepared: Any, claimed: Set[str]) -> Any:
        """Returns a plan with ``to_generate`` (prompts) and ``generated_keys()``."""

    def generate(self, prompts: list[str]) -> Any: ...

    def records(self, jobs: Any, plan: Any, generated: Any) -> Records: ...


def run_forked(work: Staged, chunks: Sequence[Any], workers: int) -> Iterator[Records]:
    """Run ``work`` on each chunk in ``workers`` forked processes; yield the records of
    each chunk in chunk order as soon as it and those before it are done.

    The workers prepare chunks ahead (a strategy's scoring) and generate; this process
    plans each chunk in order, so that a prompt an earlier chunk generates is not
    generated again but read back once that chunk is written, as one process does it:
    each chunk sends the model the same prompts in the same batches.

    A failed chunk stops the run: what has not started is cancelled, the workers are
    stopped and :class:`WorkerError` carries the worker's error. The chunks before it
    have been yielded (the caller has saved them).
    """
    global _TASK
    threads = threads_each(workers)
    context = multiprocessing.get_context("fork")
    _TASK = (work, chunks)
    try:
        with _quiet_tokenizers(), terminate_on_sigterm():  # the workers fork at the first submit
            pool = ProcessPoolExecutor(
                workers,
                mp_context=context,
                initializer=start_worker,
                initargs=(threads, os.getpid(), parent_death_prctl()),
            )
            try:
                yield from _pipeline(pool, work, chunks, workers)
            except BaseException:
                _stop(pool)
                raise
            pool.shutdown(wait=True)
    finally:
        _TASK = None


def _pipeline(
    pool: ProcessPoolExecutor, work: Staged, chunks: Sequence[Any], workers: int
) -> Iterator[Records]:
    n = len(chunks)
    window = 2 * workers  # chunks prepared ahead of the one being written
    preparing: dict[int, Future[Any]] = {}
    generating: dict[int, tuple[Any, Future[Any] | None]] = {}
    claimed: set[str] = set()  # prompts a planned chunk generates
    submitted = planned = written = 0
    while written < n:
        while submitted < n and submitted < written + window:
            preparing[submitted] = _submit(pool, workers, _prepare, submitted)
            submitted += 1
        moved = False
        while planned < submitted and preparing[planned].done():
            plan = work.plan(_outcome(preparing.pop(planned), workers), claimed)
            claimed.update(plan.generated_keys())
            job = _submit(pool, workers, _generate, plan.to_generate) if plan.to_generate else None
            generating[planned] = (plan, job)
            planned += 1
            moved = True
        while written < planned:
            plan, job = generating[written]
            if job is not None and not job.done():
                break
            del generating[written]
            generated = ([], 0.0) if job is None else _outcome(job, workers)
            yield work.records(chunks[written], plan, generated)
            written += 1
            moved = True
        if not moved:
            running = [*preparing.values(), *(j for _, j in generating.values() if j is not None)]
            wait(running, return_when=FIRST_COMPLETED)


def _submit(pool: ProcessPoolExecutor, workers: int, step: Callable[[Any], Any], arg: Any) -> Any:
    """``pool.submit(step, arg)``; a pool broken by a worker that died is the same
    :class:`WorkerError` whether it shows here or in a result (:func:`_outcome`)."""
    try:
        return pool.submit(step, arg)
    except BrokenProcessPool as exc:
        raise _died(workers) from exc


def _died(workers: int) -> WorkerError:
    return WorkerError(
        "a worker process ended without finishing its chunk (killed, or out of "
        f"memory?); {workers} workers hold {workers} copies of the model's working "
        "memory: --workers 1 needs the least"
    )


def _outcome(future: Future[Any], workers: int) -> Any:
    """A worker task's result, or its error raised here."""
    try:
        outcome = future.result()
    except BrokenProcessPool as exc:
        raise _died(workers) from exc
    if isinstance(outcome, _Failure):
        raise WorkerError(
            f"{outcome.kind} in worker process {outcome.pid}: {outcome.message}"
        ) from _RemoteTraceback(outcome.trace)
    return outcome


def _prepare(index: int) -> Any:
    assert _TASK is not None, "a worker runs only in a process forked by run_forked"
    work, chunks = _TASK
    return _guarded(work.prepare, chunks[index])


def _generate(prompts: list[str]) -> Any:
    assert _TASK is not None, "a worker runs only in a process forked by run_forked"
    return _guarded(_TASK[0].generate, prompts)


def _guarded(step: Callable[[Any], Any], arg: Any) -> Any:
    try:
        return step(arg)
    except Exception as exc:
        return _Failure(type(exc).__name__, str(exc), traceback.format_exc(), os.getpid())


def _stop(pool: ProcessPoolExecutor) -> None:
    """Cancel what has not started and stop the workers at once (a failed or interrupted
    run must not wait for chunks whose records nobody will save)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())  # before shutdown
    manager = getattr(pool, "_executor_manager_thread", None)  # shutdown forgets it
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=5)
    if manager is not None:  # else its pipe may close under concurrent.futures' exit hook,
        manager.join(timeout=5)  # which then prints an EBADF traceback after Ctrl-C


@contextmanager
def _quiet_tokenizers() -> Iterator[None]:
    """Hugging Face tokenizers warn in every forked child once the parent has used their
    threads, and turn them off; turn them off here first, for the workers only."""
    before = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = before
