"""An output folder holds one run (``run.json``): another is refused before it works, saying why."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_eval_runner import Scripted, write_gold_at_file

import rag_position.eval.cli as eval_cli
from rag_position.cli import main
from rag_position.eval import EvalConfigError, run_compare, run_kv, run_multidoc
from rag_position.eval.engine.common import Decoding
from rag_position.eval.engine.marker import RUN_FILE, RunMarker, write_marker
from rag_position.eval.engine.session import open_context

KV = {"pairs": 8, "questions": 1, "progress": False}


class Other(Scripted):
    """The same answers under another model label."""

    name = "other-model"


def _never(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the model was loaded: the folder should have been refused first")


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.fixture()
def data(tmp_path: Path) -> Path:
    return write_gold_at_file(tmp_path / "nq-open-10_total_documents_gold_at_3.jsonl", n=4)


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    return main(argv), capsys.readouterr().err


def test_a_run_marks_its_folder_and_refuses_another_model(tmp_path: Path) -> None:
    out = tmp_path / "kv"
    run_kv(Scripted(), out=out, **KV)
    marker = json.loads((out / RUN_FILE).read_text())
    assert marker["task"] == "kv" and marker["model"] == "scripted"
    assert marker["decoding"] == {"max_new_tokens": 100, "temperature": 0.0, "seed": 0}
    assert marker["command"].startswith("rag_position.eval.run_kv(<scripted>, pairs=8")
    before = _files(out)
    other = Other()
    with pytest.raises(EvalConfigError) as info:
        run_kv(other, out=out, **KV)
    message = str(info.value)
    assert f"--out {out} holds another run: kv with model 'scripted'" in message
    assert "its model is 'scripted', this run's 'other-model'" in message
    assert "made by: rag_position.eval.run_kv(<scripted>" in message
    assert "a new --out" in message and "rerun that run's command to resume it" in message
    assert other.prompts == [] and _files(out) == before  # nothing generated, nothing replaced
    # with neither marker nor predictions, the report still names the command that made it
    (out / RUN_FILE).unlink()
    (out / "predictions.jsonl").unlink()
    with pytest.raises(EvalConfigError, match=r"made by: rag_position\.eval\.run_kv\(<scripted>"):
        run_kv(Scripted(), out=out, **KV)
    (out / RUN_FILE).write_text("{not json")
    with pytest.raises(EvalConfigError, match="is not a run marker of rag-position eval"):
        run_kv(Scripted(), out=out, **KV)


def test_another_task_or_decoding_is_refused_before_the_model_loads(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    md, kv = tmp_path / "md", tmp_path / "kv"
    monkeypatch.setattr(eval_cli, "load_model", lambda spec: Scripted())
    kv_argv = ["eval", "kv", "--pairs", "8", "--questions", "1", "--out", str(kv), "--no-progress"]
    assert main(["eval", "multidoc", "--data", str(data), "--out", str(md), "--no-progress"]) == 0
    assert main(kv_argv) == 0
    capsys.readouterr()
    before = _files(md), _files(kv)
    monkeypatch.setattr(eval_cli, "load_model", _never)
    argv = ["eval", "compare", "--data", str(data), "--out", str(md), "--worst-position", "4"]
    code, err = _cli(argv, capsys)
    assert code == 2 and "Traceback" not in err
    assert f"--out {md} holds another run: multidoc with model 'scripted'" in err
    assert f"made by: rag-position eval multidoc --data {data}" in err
    assert "its task is multidoc, this run's compare" in err
    for option, differs in [
        (["--max-new-tokens", "5"], "its max_new_tokens is 100, this run's 5"),
        (["--seed", "1"], "its seed is 0, this run's 1"),
    ]:
        code, err = _cli([*kv_argv, *option], capsys)
        assert code == 2 and differs in err and f"--out {kv} holds another run" in err
    assert (_files(md), _files(kv)) == before


@pytest.mark.parametrize("name", ["report.md", "summary.json", "summary.csv"])
def test_a_report_without_predictions_is_refused(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder some run wrote (its report kept, its predictions gone): nothing to resume."""
    out = tmp_path / "old"
    out.mkdir()
    (out / name).write_text("someone else's numbers\n")
    with pytest.raises(EvalConfigError, match=f"--out {out} holds the report of another run"):
        run_kv(Scripted(), out=out, **KV)
    monkeypatch.setattr(eval_cli, "load_model", _never)
    code, err = _cli(["eval", "kv", "--pairs", "8", "--out", str(out)], capsys)
    assert code == 2 and f"({name})" in err and "predictions.jsonl" in err and "new --out" in err
    assert _files(out) == {name: b"someone else's numbers\n"}


def test_the_same_run_resumes_and_extends(data: Path, tmp_path: Path) -> None:
    """More questions, more strategies: the same run, extended in its own folder."""
    out = tmp_path / "cmp"
    options: dict[str, Any] = {"data": data, "worst_position": 4, "progress": False}
    first = Scripted()
    run_compare(first, out=out, questions=2, strategies=["retriever"], **options)
    more = Scripted()
    result = run_compare(more, out=out, questions=4, strategies=["retriever", "edge"], **options)
    assert more.prompts and not set(more.prompts) & set(first.prompts)  # only the new ones
    assert {r["strategy"] for r in result.rows} >= {"retriever", "edge"}
    marker = json.loads((out / RUN_FILE).read_text())
    assert "questions=4" in marker["command"] and "'edge'" in marker["command"]  # the latest
    idle = Scripted()
    run_compare(idle, out=out, questions=4, strategies=["retriever", "edge"], **options)
    assert idle.prompts == []
    before = (out / RUN_FILE).read_text()
    with pytest.raises(EvalConfigError, match="holds no questions"):  # and keeps the command
        run_compare(idle, out=out, questions=4, strategies=["retriever"], shard=(5, 5), **options)
    assert (out / RUN_FILE).read_text() == before


class Completion(Scripted):
    """A completion model: no chat template, so its answers end at the first line."""

    use_chat_template = False


@pytest.mark.parametrize("make", [Scripted, Completion])
def test_a_markerless_folder_resumes(make: type[Scripted], data: Path, tmp_path: Path) -> None:
    """An older or merged folder resumes (a completion model's ``stop`` was once refused)."""
    out = tmp_path / "md"
    run_multidoc(make(), data=data, out=out, progress=False)
    records = [json.loads(line) for line in (out / "predictions.jsonl").open()]
    if make is Completion:
        assert records[0]["decoding"]["stop"] == ["\n"]
    (out / RUN_FILE).unlink()  # as an older version, or concatenated shares, left it
    before = _files(out)
    other = Other()
    with pytest.raises(EvalConfigError) as info:
        run_multidoc(other, data=data, out=out, progress=False)
    message = str(info.value)
    assert f"--out {out} holds another run" in message and "model 'scripted'" in message
    assert "no prediction of this run's model 'other-model'" in message
    assert "made by: rag_position.eval.run_multidoc(<scripted>" in message  # from summary.json
    assert other.prompts == [] and _files(out) == before
    idle = make()
    run_multidoc(idle, data=data, out=out, progress=False)
    assert idle.prompts == []
    assert json.loads((out / RUN_FILE).read_text())["task"] == "multidoc"


def test_an_unrelated_or_an_unsaved_runs_folder_is_taken(data: Path, tmp_path: Path) -> None:
    """The data file's own folder takes the run; another task reuses its predictions.jsonl."""
    run_multidoc(Scripted(), data=data, questions=1, out=tmp_path, progress=False)
    assert (tmp_path / RUN_FILE).is_file() and (tmp_path / "report.md").is_file()
    cmp = tmp_path / "cmp"
    cmp.mkdir()
    (cmp / "predictions.jsonl").write_bytes((tmp_path / "predictions.jsonl").read_bytes())
    run_compare(Scripted(), data=data, out=cmp, worst_position=4, strategies=["retriever"])
    assert json.loads((cmp / RUN_FILE).read_text())["task"] == "compare"
    # a run stopped before its first prediction leaves only its marker: how to take the folder
    out = tmp_path / "md"
    out.mkdir()
    write_marker(out, RunMarker("multidoc", "scripted", Decoding(max_new_tokens=5).as_dict()))
    with pytest.raises(EvalConfigError, match="that run has saved nothing yet") as info:
        run_multidoc(Scripted(), data=data, positions=[0, 9], out=out, progress=False)
    assert f"remove {out / RUN_FILE} to give the folder to this run" in str(info.value)
    run_multidoc(Scripted(), data=data, positions=[0, 9], out=out, max_new_tokens=5)  # the same


HOLDER = """
import sys
sys.path.insert(0, {tests!r})
from test_eval_runner import Scripted
from rag_position.eval.engine.session import open_context
ctx = open_context(Scripted(), {out!r})
print("open", flush=True)
sys.stdin.read()  # until the test closes its input
"""


@contextlib.contextmanager
def _held(out: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding a run open in ``out``, as long as the block lasts."""
    script = HOLDER.format(tests=str(Path(__file__).parent), out=str(out))
    holder = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "open\n", holder.communicate()
        yield holder
    finally:
        holder.kill()
        holder.communicate()


def test_a_second_run_into_a_folder_in_use_is_refused_at_once_and_the_lock_released(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two runs writing into one folder left 24 lines with 9 duplicate keys."""
    out = tmp_path / "md"
    with _held(out) as holder:
        model = Scripted()
        start = time.monotonic()
        with pytest.raises(EvalConfigError) as info:
            run_multidoc(model, data=data, out=out, progress=False)
        assert time.monotonic() - start < 5
        assert f"--out {out} is in use by another run (process {holder.pid} " in str(info.value)
        assert model.prompts == [] and not (out / "predictions.jsonl").exists()
        # the CLI: refused before the model loads
        monkeypatch.setattr(eval_cli, "load_model", _never)
        argv = ["eval", "multidoc", "--data", str(data), "--out", str(out), "--no-progress"]
        code, err = _cli(argv, capsys)
        assert code == 2 and "Traceback" not in err
        assert f"is in use by another run (process {holder.pid} " in err
    # the holder gone (killed: the system let go of its lock), the folder is free
    run_multidoc(Scripted(), data=data, out=out, progress=False, workers=2)  # forks workers
    assert (out / "report.md").is_file()
    with _held(out):  # another process can hold it: the run let go, its workers too
        pass
    # one process may open its own folder again (a rerun after a failure it still holds)
    first = open_context(Scripted(), out)
    second = open_context(Scripted(), out)
    assert first.store.path == second.store.path


@pytest.mark.parametrize("kind", ["fifo", "link"])
def test_a_lock_file_that_is_not_a_file_is_refused_before_the_model_loads(
    kind: str, data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """A FIFO at ``.run.lock`` was refused only after the model had loaded (17 s)."""
    out = tmp_path / "md"
    out.mkdir()
    lock = out / ".run.lock"
    os.mkfifo(lock) if kind == "fifo" else lock.symlink_to(tmp_path / "elsewhere")
    monkeypatch.setattr(eval_cli, "load_model", _never)
    argv = ["eval", "multidoc", "--data", str(data), "--out", str(out), "--no-progress"]
    code, err = _cli(argv, capsys)
    assert code == 2 and "Traceback" not in err
    assert f"{lock} is not a regular file; remove it" in err
    assert not (tmp_path / "elsewhere").exists() and sorted(os.listdir(out)) == [".run.lock"]
