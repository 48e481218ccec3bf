"""The files the library trusts (issue 42): one bounded JSON reader, and output paths
checked before any work.

Every JSON file the library reads back (tuned files, ``run.json``, position profiles,
caches) goes through :func:`rag_position._jsonfile.read_json`: a FIFO, a device or a
huge file is refused before it is read (a FIFO would block forever, ``/dev/zero`` would
fill the memory), deep nesting before it is parsed (a ``RecursionError``), and a
100,000-digit integer with an error naming the file.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rag_position import DataFormatError, PositionProfile, load_tuned, read_tuned
from rag_position._jsonfile import MAX_BYTES, check_output_file, nesting_depth, read_json
from rag_position.eval.engine.common import Decoding, EvalConfigError
from rag_position.eval.engine.marker import RUN_FILE, check_run_folder

DEEP = "[" * 200_000 + "]" * 200_000
HUGE_INT = '{"format": ' + "1" * 100_000 + "}"


def _run_folder_check(path: Path) -> None:
    check_run_folder(path.parent, task="kv", decoding=Decoding())


def _profile_load(path: Path) -> Any:
    return PositionProfile.load(path)


READERS: list[tuple[str, str, Callable[[Path], Any], type[Exception]]] = [
    ("read_tuned", "tuned.json", read_tuned, DataFormatError),
    ("load_tuned", "tuned.json", load_tuned, DataFormatError),
    ("run.json", RUN_FILE, _run_folder_check, EvalConfigError),
    ("profile", "profile.json", _profile_load, ValueError),
]
IDS = [r[0] for r in READERS]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    made = tmp_path / "run"
    made.mkdir()
    return made


@pytest.mark.parametrize(("reader", "name", "read", "error"), READERS, ids=IDS)
def test_deep_nesting_is_refused_before_parsing(
    folder: Path, reader: str, name: str, read: Callable[[Path], Any], error: type[Exception]
) -> None:
    path = folder / name
    path.write_text(DEEP, encoding="utf-8")
    with pytest.raises(error, match="nested more than 64 deep") as caught:
        read(path)
    assert str(path) in str(caught.value)


@pytest.mark.parametrize(("reader", "name", "read", "error"), READERS, ids=IDS)
def test_a_huge_integer_names_the_file(
    folder: Path, reader: str, name: str, read: Callable[[Path], Any], error: type[Exception]
) -> None:
    path = folder / name
    path.write_text(HUGE_INT, encoding="utf-8")
    with pytest.raises(error, match="an integer of 100000 digits") as caught:
        read(path)
    assert str(path) in str(caught.value)


@pytest.mark.parametrize(("reader", "name", "read", "error"), READERS, ids=IDS)
def test_a_device_is_refused_without_reading_it(
    folder: Path, reader: str, name: str, read: Callable[[Path], Any], error: type[Exception]
) -> None:
    path = folder / name
    path.symlink_to("/dev/zero")  # read whole, it fills the memory
    with pytest.raises(error, match="is a character device, not a regular file") as caught:
        read(path)
    assert str(path) in str(caught.value)


@pytest.mark.parametrize(("reader", "name", "read", "error"), READERS, ids=IDS)
def test_a_large_file_is_refused_by_its_size(
    folder: Path, reader: str, name: str, read: Callable[[Path], Any], error: type[Exception]
) -> None:
    path = folder / name
    with open(path, "wb") as f:
        f.truncate(2**30)  # sparse: 1 GiB of zeros that takes no disk
    with pytest.raises(error, match=f"over the {MAX_BYTES:,}") as caught:
        read(path)
    assert str(path) in str(caught.value)


@pytest.fixture
def fifo(folder: Path) -> Iterator[Callable[[str], Path]]:
    """Make a FIFO; at the end, open its writing end so that a reader stuck on it ends."""
    made: list[Path] = []

    def make(name: str) -> Path:
        path = folder / name
        os.mkfifo(path)
        made.append(path)
        return path

    yield make
    for path in made:
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


@pytest.mark.parametrize(("reader", "name", "read", "error"), READERS, ids=IDS)
def test_a_fifo_is_refused_without_blocking(
    fifo: Callable[[str], Path],
    reader: str,
    name: str,
    read: Callable[[Path], Any],
    error: type[Exception],
) -> None:
    path = fifo(name)
    start = time.monotonic()
    caught = _within(5.0, lambda: read(path))
    assert isinstance(caught, error), caught
    assert "is a FIFO (named pipe), not a regular file" in str(caught)
    assert str(path) in str(caught) and time.monotonic() - start < 5


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


def test_the_reader_does_not_depend_on_the_int_digit_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
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
def _choice() -> Any:
    from rag_position import TunedChoice

    return TunedChoice(
        model="m", spec="embedded", dtype=None, strategy="edge", options={}, profile=None,
        evidence=(), questions={"data": "x", "first": 0, "n": 1}, command="",
        created="2026-05-09T07:35:25+00:00",
    )  # fmt: skip


def test_a_tuned_file_is_written_only_over_a_regular_file(
    tmp_path: Path, fifo: Callable[[str], Path]
) -> None:
    pipe = fifo("pipe.json")
    caught = _within(5.0, lambda: _choice().write(pipe))
    assert isinstance(caught, ValueError), caught
    assert f"tuned file {pipe} is a FIFO (named pipe), not a regular file" in str(caught)
    assert os.path.exists(pipe) and not pipe.is_file()  # left as it was
    with pytest.raises(ValueError, match=f"tuned file {tmp_path} is a folder"):
        _choice().write(tmp_path)
    missing = tmp_path / "nope" / "t.json"
    with pytest.raises(ValueError, match=f"tuned file {missing} cannot be written: its folder"):
        _choice().write(missing)
    with pytest.raises(ValueError, match="is empty"):
        _choice().write("")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # no temporary file left
    written = _choice().write(tmp_path / "ok.json")
    assert read_tuned(written) == _choice()


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


@pytest.mark.parametrize("name", ["predictions.jsonl", "run.json", "report.md", "summary.json"])
def test_a_run_folder_holding_a_fifo_is_refused(
    folder: Path, fifo: Callable[[str], Path], name: str
) -> None:
    """A FIFO named predictions.jsonl blocked the run forever when it opened the store."""
    pipe = fifo(name)
    caught = _within(5.0, lambda: check_run_folder(folder, task="kv", decoding=Decoding()))
    assert isinstance(caught, EvalConfigError), caught
    assert str(pipe) in str(caught) and "FIFO" in str(caught)


def test_check_output_file_accepts_a_new_name_or_a_regular_file(tmp_path: Path) -> None:
    assert check_output_file(tmp_path / "new.json", what="--tuned") == tmp_path / "new.json"
    (tmp_path / "old.json").write_text("{}")
    check_output_file(tmp_path / "old.json", what="--tuned")
    (tmp_path / "link.json").symlink_to("/dev/null")
    with pytest.raises(ValueError, match=r"link\.json is a character device"):
        check_output_file(tmp_path / "link.json", what="--tuned")
