"""One run at a time in a run folder: an exclusive lock, held while the run is open.

A run takes ``fcntl.flock(LOCK_EX)`` on ``.run.lock`` in its folder when it opens the
folder (:func:`~rag_position.eval.engine.session.open_context`) and writes its process id
there; it lets go when it writes its report, when its run context is collected, and
at the latest when its process ends (the system drops the lock of a killed process).
A second run into the folder, in another process, is refused at once
(:class:`~rag_position.eval.engine.common.EvalConfigError` naming the process holding it), by
:func:`check_folder_free` before its model loads and by :func:`lock_run_folder`
itself. Two runs writing into one folder interleave their records (duplicate keys).

Within one process the lock is shared: a run may open its own folder again (a rerun
after a failure whose traceback still holds the failed run). The worker processes a
run forks inherit the lock's file without taking it: the lock belongs to the open
file, which the run's process closes; the file is closed on ``exec``.

The file stays in the folder (removing a lock file races with a run taking it).
"""

from __future__ import annotations

import os
import stat
import threading
import weakref
from pathlib import Path
from typing import Any

from rag_position.eval.engine.common import EvalConfigError

LOCK_FILE = ".run.lock"
"""The lock file of a run folder."""

try:
    import fcntl
except ImportError:  # not POSIX: no lock (runs into one folder are the user's to avoid)
    fcntl = None  # type: ignore[assignment]

_FLAGS = os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
_GUARD = threading.Lock()
_HELD: dict[tuple[int, int], list[int]] = {}
"""The folders this process holds: (device, inode) -> [file descriptor, holders, pid]."""


def _key(folder: Path) -> tuple[int, int]:
    info = os.stat(folder)
    return info.st_dev, info.st_ino


def _holds(key: tuple[int, int]) -> bool:
    held = _HELD.get(key)
    return held is not None and held[2] == os.getpid()  # a forked child holds nothing


class FolderLock:
    """This process's hold on a run folder; :meth:`release` lets go (once)."""

    def __init__(self, folder: Path, key: tuple[int, int] | None) -> None:
        self.folder = folder
        self._key = key

    def release(self) -> None:
        """Let go of the folder (the lock itself once the last holder in the process has)."""
        with _GUARD:
            key, self._key = self._key, None
            held = None if key is None else _HELD.get(key)
            if key is None or held is None or held[2] != os.getpid():
                return
            held[1] -= 1
            if held[1] == 0:
                del _HELD[key]
                os.close(held[0])  # the lock goes with the open file


def _in_use(folder: Path, fd: int) -> EvalConfigError:
    try:
        text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
    except OSError:
        text = ""
    who = f"process {text}" if text.isdigit() else "a process"
    return EvalConfigError(
        f"--out {folder} is in use by another run ({who} holds {folder / LOCK_FILE}); two "
        "runs writing into one folder would mix their records: wait for that run to end, "
        "or give this run another --out"
    )


def _open(path: Path, flags: int) -> int:
    try:
        fd = os.open(path, flags | _FLAGS, 0o644)
    except OSError as exc:
        raise EvalConfigError(
            f"--out {path.parent}: cannot open its lock file {path} ({exc.strerror or exc})"
        ) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise EvalConfigError(f"--out {path.parent}: {path} is not a regular file; remove it")
    return fd


def lock_run_folder(folder: str | os.PathLike[str]) -> FolderLock:
    """Take the run folder ``folder`` (it exists) for this run: refused at once when
    another process holds it (module doc)."""
    path = Path(folder)
    if fcntl is None:
        return FolderLock(path, None)
    key = _key(path)
    with _GUARD:
        held = _HELD.get(key)
        if held is not None and held[2] == os.getpid():
            held[1] += 1
            return FolderLock(path, key)
        fd = _open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            error = _in_use(path, fd)
            os.close(fd)
            raise error from None
        except OSError:  # a file system without locks: run unlocked
            os.close(fd)
            return FolderLock(path, None)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        _HELD[key] = [fd, 1, os.getpid()]
    return FolderLock(path, key)


def check_folder_free(folder: str | os.PathLike[str]) -> None:
    """Refuse ``folder`` when another process's run holds it, or when its lock file is
    not a regular file (nothing is created: a folder without a lock file is free)."""
    path = Path(folder)
    if fcntl is None or not path.is_dir():
        return
    lock = path / LOCK_FILE
    with _GUARD:
        if _holds(_key(path)):
            return
        try:
            mode = os.lstat(lock).st_mode
        except FileNotFoundError:
            return
        if not stat.S_ISREG(mode):  # a FIFO, device, folder or link: refused before any work
            raise EvalConfigError(f"--out {path}: {lock} is not a regular file; remove it")
        try:
            fd = os.open(lock, os.O_RDONLY | os.O_NONBLOCK | _FLAGS)
        except OSError:
            return  # lock_run_folder says what is wrong, if anything
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _in_use(path, fd) from None
        except OSError:
            return
        finally:
            os.close(fd)  # a shared lock taken here goes with it


_RUNS: dict[int, FolderLock] = {}


def hold_for(owner: Any, lock: FolderLock) -> None:
    """Keep ``lock`` until :func:`let_go` of ``owner`` or until ``owner`` is collected."""
    _RUNS[id(owner)] = lock
    weakref.finalize(owner, _release, id(owner))


def let_go(owner: Any) -> None:
    """Release the lock :func:`hold_for` keeps for ``owner`` (nothing if none)."""
    _release(id(owner))


def _release(key: int) -> None:
    lock = _RUNS.pop(key, None)
    if lock is not None:
        lock.release()
