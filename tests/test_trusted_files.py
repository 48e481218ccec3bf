"""The files the library trusts (issue 42): one bounded JSON reader (``read_json``) for every
file read back, and output paths checked before any work.

A FIFO (blocks forever), a device (``/dev/zero`` fills the memory), a huge file, deep nesting
(a ``RecursionError``) or a 100,000-digit integer is refused with an error naming the file.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rag_position import DataFormatError, PositionProfile, read_tuned
from rag_position._jsonfile import MAX_BYTES, check_output_file, nesting_depth, read_json
from rag_position.eval.engine.common import Decoding, EvalConfigError
from rag_position.eval.engine.marker import RUN_FILE, check_run_folder
from rag_position.testing.tuned import example_choice


def _check_run_folder(folder: Path) -> None:
    check_run_folder(folder, task="kv", decoding=Decoding())


READERS: list[tuple[str, Callable[[Path], Any], type[Exception]]] = [
    ("tuned.json", read_tuned, DataFormatError),  # load_tuned's too (test_tuned.py)
    (RUN_FILE, lambda path: _check_run_folder(path.parent), EvalConfigError),
    ("profile.json", PositionProfile.load, ValueError),
]


def _sparse(path: Path) -> None:
    with open(path, "wb") as f:
        f.truncate(2**30)  # 1 GiB of zeros that takes no disk


BAD_FILES: dict[str, tuple[Callable[[Path], Any], str]] = {
    "deep": (lambda p: p.write_text("[" * 200_000 + "]" * 200_000), "nested more than 64 deep"),
    "huge-int": (
        lambda p: p.write_text('{"format": ' + "1" * 100_000 + "}"),
        "an integer of 100000 digits",
    ),
    "device": (lambda p: p.symlink_to("/dev/zero"), "is a character device, not a regular file"),
    "large": (_sparse, f"over the {MAX_BYTES:,}"),
    "fifo": (os.mkfifo, "is a FIFO (named pipe), not a regular file"),
}


@pytest.fixture(autouse=True)
def _unblock_fifos(tmp_path: Path) -> Iterator[None]:
    """At the end, open each FIFO's writing end so that a reader stuck on it ends."""
    yield
    for path in tmp_path.iterdir():
        if stat.S_ISFIFO(path.lstat().st_mode):
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # no reader waits on it
                continue
            os.close(fd)


def _within(seconds: float, call: Callable[[], Any]) -> BaseException | None:
    """The exception ``call`` raised, failing the test if it takes over ``seconds``."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:
            outcome.append(exc)
        else:
            outcome.append(None)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"still blocked after {seconds} s"
    return outcome[0]


@pytest.mark.parametrize("bad", BAD_FILES)
@pytest.mark.parametrize(
    ("name", "read", "error"), READERS, ids=["read_tuned", "run.json", "profile"]
)
def test_a_bad_file_is_refused_naming_it(
    tmp_path: Path, bad: str, name: str, read: Callable[[Path], Any], error: type[Exception]
) -> None:
    make, message = BAD_FILES[bad]
    path = tmp_path / name
    make(path)
    caught = _within(5.0, lambda: read(path))
    assert isinstance(caught, error), caught
    assert message in str(caught) and str(path) in str(caught)


def test_the_reader_itself(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"a": "[[[[", "b": [1, 2.5, {"c": null}]}', encoding="utf-8")
    assert read_json(path) == {"a": "[[[[", "b": [1, 2.5, {"c": None}]}
    assert nesting_depth(r'{"a": "[[[[\\", "b": [1]}') == 2  # an escaped backslash
    assert nesting_depth(r'["\"]"]') == 1  # an escaped quote: the string goes on
    for text, message in [
        ("[" * 65 + "]" * 65, "nested more than 64 deep"),
        ("[" * 64 + "]" * 64, None),
        ('{"a": NaN}', "holds NaN, which is not JSON"),
        ('{"a": 1e999}', "holds the number 1e999, too large"),
        ('{"a": -Infinity}', "holds -Infinity"),
        ("{", "is not JSON"),
    ]:
        path.write_text(text, encoding="utf-8")
        if message is None:
            read_json(path)
            continue
        with pytest.raises(DataFormatError, match=message):
            read_json(path, what="cache")
    path.write_bytes(b"\xff{}")
    with pytest.raises(DataFormatError, match="is not UTF-8"):
        read_json(path)
    with pytest.raises(DataFormatError, match="is a folder, not a file"):
        read_json(tmp_path)
    with pytest.raises(FileNotFoundError, match="does not exist; make one"):
        read_json(tmp_path / "nope.json", hint="make one")
    with pytest.raises(FileNotFoundError, match="does not exist"):  # as before the reader
        PositionProfile.load(tmp_path / "nope.json")
    with pytest.raises(DataFormatError, match="a part of its path is a file"):
        read_json(path / "under")


def test_a_gzipped_file_is_read_within_the_same_bounds(tmp_path: Path) -> None:
    """A ``.gz`` file (the packaged distractor rankings) is decompressed to at most
    ``max_bytes``: a small file that unpacks past it is refused, not unpacked whole."""
    import gzip

    path = tmp_path / "x.json.gz"
    path.write_bytes(gzip.compress(b'{"a": [1, 2]}'))
    assert read_json(path) == {"a": [1, 2]}
    path.write_bytes(gzip.compress(b"[" * 100 + b"]" * 100))
    with pytest.raises(DataFormatError, match="nested more than 64 deep"):
        read_json(path, what="packaged rankings")
    path.write_bytes(gzip.compress(b" " * 2_000_000 + b"{}"))  # about 2 KB packed
    assert path.stat().st_size < 10_000
    with pytest.raises(DataFormatError, match="unpacks to more than 1,000,000 bytes"):
        read_json(path, max_bytes=1_000_000)
    assert read_json(path, max_bytes=2_000_002) == {}
    packed = bytearray(gzip.compress(b'{"a": [1, 2, 3]}' * 50))
    packed[10] ^= 0xFF  # the deflate stream's first byte: zlib.error, not an OSError
    path.write_bytes(bytes(packed))
    with pytest.raises(DataFormatError, match="not a gzip file this library reads: Error -3"):
        read_json(path)
    path.write_bytes(b'["not gzip"]')
    with pytest.raises(DataFormatError, match=r"x\.json\.gz' is not a gzip file"):
        read_json(path)
    assert read_json(path, gzipped=False) == ["not gzip"]  # the name alone does not decide


def test_the_reader_does_not_depend_on_the_int_digit_limit(tmp_path: Path) -> None:
    import sys

    if not hasattr(sys, "set_int_max_str_digits"):
        pytest.skip("no int digit limit in this Python")
    path = tmp_path / "x.json"
    path.write_text("[" + "9" * 10_000 + "]", encoding="utf-8")
    before = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)  # no limit: the reader still refuses
    try:
        with pytest.raises(DataFormatError, match="an integer of 10000 digits"):
            read_json(path)
    finally:
        sys.set_int_max_str_digits(before)


# ---------------------------------------------------------------------- written files
def test_a_tuned_file_is_written_only_over_a_regular_file(tmp_path: Path) -> None:
    pipe = tmp_path / "pipe.json"
    os.mkfifo(pipe)
    caught = _within(5.0, lambda: example_choice().write(pipe))
    assert isinstance(caught, ValueError), caught
    assert f"tuned file {pipe} is a FIFO (named pipe), not a regular file" in str(caught)
    assert os.path.exists(pipe) and not pipe.is_file()  # left as it was
    missing = tmp_path / "nope" / "t.json"
    (tmp_path / "link.json").symlink_to("/dev/null")
    for path, says in [
        (tmp_path, f"tuned file {tmp_path} is a folder"),
        (missing, f"tuned file {missing} cannot be written: its folder"),
        ("", "is empty"),
        (tmp_path / "link.json", r"link\.json is a character device"),
    ]:
        with pytest.raises(ValueError, match=says):
            example_choice().write(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "pipe.json"]
    assert check_output_file(tmp_path / "new.json", what="--tuned") == tmp_path / "new.json"
    written = example_choice("edge").write(tmp_path / "ok.json")  # a new name
    assert read_tuned(example_choice().write(written)) == example_choice()  # then replaced


def test_run_tune_checks_the_tuned_file_before_any_work(tmp_path: Path) -> None:
    from test_eval_runner import ScriptedScorer

    from rag_position.eval import run_tune

    folder = tmp_path / "folder.json"
    folder.mkdir()
    model = ScriptedScorer()
    with pytest.raises(EvalConfigError, match=f"--tuned {folder} is a folder"):
        run_tune(model, questions=2, out=tmp_path / "run", tuned=folder, progress=False)
    assert model.prompts == [] and not (tmp_path / "run").exists()
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "tuned.json").mkdir()  # the default file: <out>/tuned.json
    with pytest.raises(EvalConfigError, match=r"tuned\.json is a folder"):
        run_tune(model, questions=2, out=tmp_path / "run", progress=False)
    assert model.prompts == []


# run.json: test_a_bad_file_is_refused_naming_it
@pytest.mark.parametrize("name", ["predictions.jsonl", "report.md", "summary.json"])
def test_a_run_folder_holding_a_fifo_is_refused(tmp_path: Path, name: str) -> None:
    """A FIFO named predictions.jsonl blocked the run forever when it opened the store."""
    os.mkfifo(tmp_path / name)
    caught = _within(5.0, lambda: _check_run_folder(tmp_path))
    assert isinstance(caught, EvalConfigError), caught
    assert str(tmp_path / name) in str(caught) and "FIFO" in str(caught)
