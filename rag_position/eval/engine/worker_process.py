"""What runs inside a worker process: its thread count, its death with the parent (Linux's
parent-death signal), SIGTERM turned into a clean exit.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class Terminated(SystemExit):
    """The run's process received ``SIGTERM`` while its workers ran: they are stopped,
    and the run ends (``SystemExit`` with status 143, 128 + SIGTERM, as a process the
    signal ends reports it); the predictions saved so far stay, and a rerun resumes."""

    def __init__(self) -> None:
        super().__init__(128 + signal.SIGTERM)


def threads_each(workers: int) -> int | None:
    """Torch threads per worker: this process's threads shared out, at least 1."""
    if "torch" not in sys.modules:
        return None
    import torch

    return max(1, int(torch.get_num_threads()) // workers)


def start_worker(threads: int | None, parent: int, prctl: Callable[..., int] | None) -> None:
    """In each worker, first: die with the run's process ``parent``; leave Ctrl-C to it
    (the terminal sends SIGINT to every process of the group; the parent stops the
    workers) and take SIGTERM's default (the parent's handler is not the worker's)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if prctl is not None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # it died before the call: no signal will come
            os._exit(1)
    if threads is not None:
        import torch

        torch.set_num_threads(threads)


_PR_SET_PDEATHSIG = 1


def parent_death_prctl() -> Callable[..., int] | None:
    """Linux's ``prctl``, looked up in the run's process (so a worker imports nothing
    before it asks for its parent-death signal), or ``None`` where there is none."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        found: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return found


@contextmanager
def terminate_on_sigterm() -> Iterator[None]:
    """While the workers run: ``SIGTERM`` raises :class:`Terminated` in the run's process,
    which stops the workers on its way out (:func:`run_forked`). Only where SIGTERM has
    its default action, in the main thread (a handler of the program's own is kept;
    the workers' parent-death signal still ends them if the process dies)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            yield
            return
    except (ValueError, OSError):
        yield
        return

    def terminated(signum: int, frame: object) -> None:
        raise Terminated()

    signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
