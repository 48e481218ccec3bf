"""The files the library trusts, read and written with bounds.

:func:`read_json` is the one reader of every JSON file the library reads back (tuned
files, a run folder's ``run.json``, position profiles, caches): a regular file only (a
FIFO, a device, a socket or a folder is refused from ``os.stat``, before it is opened,
and the file is opened without blocking), at most :data:`MAX_BYTES` bytes, UTF-8, JSON
nested at most :data:`MAX_DEPTH` deep (counted before it is parsed, so that no input
ends in a ``RecursionError``), numbers of at most :data:`MAX_DIGITS` characters and
finite (``NaN``, ``Infinity`` and ``1e999`` are refused), whatever
``sys.set_int_max_str_digits`` says. A ``.gz`` file (the packaged distractor rankings)
is read the same way and decompressed to at most :data:`MAX_BYTES` too. Every problem is a
:class:`~rag_position.errors.DataFormatError` naming the file and what is wrong (a
missing file: :class:`MissingFileError`, a ``FileNotFoundError`` naming it).

:func:`check_output_file` checks a file the library is about to write whole (a tuned
file): a regular file (replaced) or a new name in a folder that exists; never a
folder, a device or a FIFO (a write renames a temporary file over the target, which
would replace a device with a regular file).

Example:
    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> path = os.path.join(folder, "a.json")
    >>> with open(path, "w") as f:
    ...     _ = f.write('{"a": [1, 2.5]}')
    >>> read_json(path)
    {'a': [1, 2.5]}
    >>> with open(path, "w") as f:
    ...     _ = f.write("[" * 100 + "]" * 100)
    >>> read_json(path, what="tuned file")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rag_position.errors.DataFormatError: tuned file '...a.json' is nested more than 64 deep...
    >>> read_json("/dev/null")
    Traceback (most recent call last):
    ...
    rag_position.errors.DataFormatError: JSON file '/dev/null' is a character device, not a regular file
    >>> check_output_file("/dev/null", what="--tuned")
    Traceback (most recent call last):
    ...
    ValueError: --tuned /dev/null is a character device, not a regular file: writing would replace it; name a file
"""  # noqa: E501

from __future__ import annotations

import gzip
import io
import json
import math
import os
import re
import secrets
import stat
import zlib
from pathlib import Path
from typing import Any

from rag_position.errors import DataFormatError

MAX_BYTES = 16 * 2**20
"""The largest JSON file :func:`read_json` reads (16 MiB; a tuned file is a few KB)."""
MAX_DEPTH = 64
"""The deepest nesting of arrays and objects :func:`read_json` parses."""
MAX_DIGITS = 4300
"""The longest number :func:`read_json` parses, in characters (Python's default limit
for integers, applied whatever ``sys.set_int_max_str_digits`` says)."""

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class MissingFileError(FileNotFoundError):
    """The file is not there (a ``FileNotFoundError`` whose message names it, as a missing
    file has always been; every other problem is a ``DataFormatError``)."""


def file_kind(mode: int) -> str:
    """What a file of ``mode`` is, in words (``"a regular file"``, ``"a FIFO..."``)."""
    if stat.S_ISREG(mode):
        return "a regular file"
    return next((words for test, words in _KINDS if test(mode)), "not a regular file")


def read_json(
    path: str | os.PathLike[str],
    *,
    what: str = "JSON file",
    hint: str | None = None,
    max_bytes: int = MAX_BYTES,
    max_depth: int = MAX_DEPTH,
    gzipped: bool | None = None,
) -> Any:
    """The JSON value in the file at ``path``, read within bounds (module doc).

    ``what`` names the file in errors (``"tuned file"``); ``hint`` ends the error of a
    missing file (what makes one); ``gzipped``: decompress (default: when the name ends
    in ``.gz``), at most ``max_bytes`` out.
    """
    where = os.fspath(path)

    def problem(text: str) -> DataFormatError:
        return DataFormatError(f"{what} {where!r} {text}")

    try:
        info = os.stat(where)
    except FileNotFoundError:
        text = f"{what} {where!r} does not exist" + (f"; {hint}" if hint else "")
        raise MissingFileError(text) from None
    except NotADirectoryError:
        raise problem("does not exist (a part of its path is a file, not a folder)") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        raise problem(f"cannot be read: {_reason(exc)}") from None
    _check_regular(info.st_mode, problem)
    _check_size(info.st_size, max_bytes, problem)
    try:
        fd = os.open(where, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | _CLOEXEC)
    except OSError as exc:
        raise problem(f"cannot be read: {_reason(exc)}") from None
    try:
        opened = os.fstat(fd)  # the file opened, should it have been swapped since
        _check_regular(opened.st_mode, problem)
        _check_size(opened.st_size, max_bytes, problem)
        data = _read_at_most(fd, max_bytes + 1)
    except OSError as exc:
        raise problem(f"cannot be read: {_reason(exc)}") from None
    finally:
        os.close(fd)
    _check_size(len(data), max_bytes, problem)
    unpack = where.endswith(".gz") if gzipped is None else gzipped
    if unpack:
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as unpacked:
                data = unpacked.read(max_bytes + 1)
        except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
            raise problem(f"is not a gzip file this library reads: {exc}") from None
        if len(data) > max_bytes:
            raise problem(f"unpacks to more than {max_bytes:,} bytes; not a file of ours")
    return parse_json(data, problem, max_depth=max_depth)


def parse_json(
    data: bytes | str,
    problem: Any = None,
    *,
    max_depth: int = MAX_DEPTH,
) -> Any:
    """``data`` (UTF-8 bytes or text) parsed with :func:`read_json`'s bounds on depth and
    numbers; ``problem(text)`` makes the error (default: a ``DataFormatError`` of ``text``)."""
    make = problem or (lambda text: DataFormatError(f"JSON text {text}"))
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise make(f"is not UTF-8 text: {exc}") from None
    else:
        text = data
    depth = nesting_depth(text, stop=max_depth)
    if depth > max_depth:
        raise make(f"is nested more than {max_depth} deep (arrays and objects); not a file of ours")
    try:
        return json.loads(
            text, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_no_constant
        )
    except json.JSONDecodeError as exc:
        raise make(f"is not JSON: {exc}") from None
    except _NumberError as exc:
        raise make(str(exc)) from None
    except (ValueError, RecursionError) as exc:  # e.g. an integer past Python's own limit
        raise make(f"is not JSON this library reads: {exc}") from None


_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_INTERESTING = re.compile(r'["\\\[\]{}]')


def nesting_depth(text: str, *, stop: int | None = None) -> int:
    """The deepest nesting of arrays and objects in JSON ``text`` (brackets inside strings
    not counted); the count stops as soon as it passes ``stop``.

    Example:
        >>> nesting_depth('{"a": [1, "[[["]}'), nesting_depth("[" * 10, stop=3)
        (2, 4)
    """
    if text.count("[") + text.count("{") <= (stop if stop is not None else 0):
        return text.count("[") + text.count("{")  # at most that deep: nothing to scan
    depth = deepest = 0
    in_string = False
    skip = -1  # the position of a character a backslash escapes
    for match in _INTERESTING.finditer(text):
        at = match.start()
        if at == skip:
            continue
        char = match.group()
        if in_string:
            if char == "\\":
                skip = at + 1
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if stop is not None and deepest > stop:
                    return deepest
        elif char in "]}":
            depth -= 1
    return deepest


class _NumberError(ValueError):
    """A number :func:`parse_json` refuses (too long, not finite)."""


def _parse_int(text: str) -> int:
    if len(text) > MAX_DIGITS:
        raise _NumberError(
            f"holds an integer of {len(text)} digits (at most {MAX_DIGITS} are read)"
        )
    return int(text)


def _parse_float(text: str) -> float:
    if len(text) > MAX_DIGITS:
        raise _NumberError(
            f"holds a number of {len(text)} characters (at most {MAX_DIGITS} are read)"
        )
    value = float(text)
    if not math.isfinite(value):
        raise _NumberError(f"holds the number {text}, too large for a float")
    return value


def _no_constant(text: str) -> Any:
    raise _NumberError(f"holds {text}, which is not JSON (numbers must be finite)")


def _check_regular(mode: int, problem: Any) -> None:
    if not stat.S_ISREG(mode):
        if stat.S_ISDIR(mode):
            raise problem("is a folder, not a file")
        raise problem(f"is {file_kind(mode)}, not a regular file")


def _check_size(size: int, limit: int, problem: Any) -> None:
    if size > limit:
        raise problem(
            f"is {size:,} bytes, over the {limit:,} this library reads from a JSON file"
            " (not a file of ours?)"
        )


def _read_at_most(fd: int, limit: int) -> bytes:
    parts: list[bytes] = []
    left = limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc)


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """``text`` (UTF-8) as the whole of ``path``: written to a new file of a random name
    beside it, then renamed over it, so that a reader never sees half a file, and no
    link or FIFO left at a fixed temporary name is written through or blocks the write
    (the new file is created exclusively, mode 0666 less the umask); on failure the
    temporary file is removed and ``path`` is as it was."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fout:
            fout.write(text)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def check_output_file(
    path: str | os.PathLike[str], *, what: str, error: type[Exception] = ValueError
) -> Path:
    """``path`` checked as a file about to be written whole: an existing regular file (it
    is replaced), or a new name in a folder that exists and can be written; never empty,
    a folder, a device, a FIFO or a socket. Returns it as a ``Path``; ``error`` (a
    ``ValueError`` by default) names ``what`` (the option, e.g. ``"--tuned"``).

    Example:
        >>> check_output_file("", what="--tuned")
        Traceback (most recent call last):
        ...
        ValueError: --tuned is empty: name the file to write
    """
    text = os.fspath(path)
    if not isinstance(text, str) or not text.strip():
        raise error(f"{what} is empty: name the file to write")
    target = Path(text)
    if text.endswith(("/", os.sep)) or target.name in ("", ".", ".."):
        raise error(f"{what} {text} names a folder: name the file to write")
    try:
        info: os.stat_result | None = os.stat(text)
    except FileNotFoundError:
        info = None
    except NotADirectoryError:
        raise error(f"{what} {text} cannot be made: a part of its path is a file") from None
    except (OSError, ValueError) as exc:
        raise error(f"{what} {text} cannot be checked: {_reason(exc)}") from None
    if info is not None:
        if stat.S_ISDIR(info.st_mode):
            raise error(
                f"{what} {text} is a folder: name a file to write (e.g. {target / 'tuned.json'})"
            )
        if not stat.S_ISREG(info.st_mode):
            raise error(
                f"{what} {text} is {file_kind(info.st_mode)}, not a regular file: writing "
                "would replace it; name a file"
            )
    folder = target.parent
    if not folder.is_dir():
        missing = "does not exist" if not folder.exists() else "is not a folder"
        raise error(f"{what} {text} cannot be written: its folder {folder} {missing}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise error(f"{what} {text} cannot be written: its folder {folder} is not writable")
    return target
