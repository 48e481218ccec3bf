"""Bad CLI input gives one ``error:`` line naming what was wrong, exit 2, no traceback, before
a model loads (``load_model`` and vLLM's server are stubs that fail the test if reached)."""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import sys
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import rag_position.eval.cli as eval_cli
import rag_position.models as models
import rag_position.models.loading as loading
import rag_position.serving as serving
from rag_position.cli import main
from rag_position.data import load_qa
from rag_position.errors import DataFormatError, ModelSpecError
from rag_position.eval import run_kv
from rag_position.eval.engine.common import EvalConfigError
from rag_position.models import load_model

REAL_VLLM_SERVER = serving.VLLMServer
NO_DEV_ZERO = pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero here")


def _never(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError(f"reached with {args} {kwargs}: the input should have been refused first")


@pytest.fixture(autouse=True)
def _nothing_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    """No model, embedder, backend class or vLLM server is reached by any test here."""
    monkeypatch.setattr(eval_cli, "load_model", _never)
    monkeypatch.setattr(models, "load_embedder", _never)
    monkeypatch.setattr(loading, "_transformers_model", _never)
    monkeypatch.setattr(serving, "VLLMServer", _never)


def _run(argv: Sequence[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``rag-position <argv>`` in-process: its exit code and stderr."""
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's own errors
        code = exc.code if isinstance(exc.code, int) else 1
    return code, capsys.readouterr().err


def _error_line(code: int, err: str, *names: str) -> str:
    """The one ``error:`` line of a failed command (exit 2), naming each of ``names``."""
    assert code == 2, err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1, err
    for name in names:
        assert name in lines[0], lines[0]
    return lines[0]


S = "rag-position serve: error: argument"
M = "rag-position eval multidoc: error: argument"
COUNTS = ("--batch-size", "--questions", "--max-new-tokens", "--concurrency", "--workers")


@pytest.mark.parametrize(
    "case",
    [
        # eval: --data and --out
        ("eval kv --data {t} --out {t}/run --pairs 8", "error: --data {t} is a folder"),
        ("eval multidoc --data {t}/no.jsonl --out {t}", "error: no data file at {t}/no.jsonl"),
        pytest.param(  # read without end, it died with a MemoryError traceback
            ("eval multidoc --data /dev/zero", "error: --data /dev/zero is not a regular file"),
            marks=NO_DEV_ZERO,
        ),
        ("eval kv --out {t}/report.md --pairs 8", "error: --out {t}/report.md is a file"),
        (
            "eval gauge --out {t}/report.md/o",
            "error: --out {t}/report.md/o",
            "{t}/report.md is a file",
        ),
        # --out "" was the current folder: a run there replaced its report.md
        ("eval multidoc --out '' --questions 1", "rag-position eval", "--out", "is empty"),
        # --out runs/<0xff> ran the whole task, then failed to write its report (a codec
        # error, a summary.json.tmp left behind): the command line is recorded as text
        ("eval kv --out runs/\udcff", "error: --out 'runs/\\udcff' is not valid UTF-8 (byte 0xff"),
        # serve's numeric options, while parsing
        ("serve --port 70000", f"{S} --port", "70000"),
        ("serve --port -1", f"{S} --port", "-1"),
        ("serve --max-model-len 0", f"{S} --max-model-len", "0"),
        ("serve --tensor-parallel-size 0", f"{S} --tensor-parallel-size", "0"),
        ("serve --startup-timeout 0", f"{S} --startup-timeout", "0"),
        # comma-separated names
        ("eval compare --gold random,", "error: --gold:", "empty"),
        ("eval length --fillers ,essay", "error: --fillers:", "empty"),
        ("eval compare --strategies edge,,s", "error: --strategies: name 2 of 'edge,,s' is empty"),
        ("eval compare --strategies ,edge", "error: --strategies: name 1 of ',edge' is empty"),
        ("eval compare --strategies edge,", "error: --strategies: name 2 of 'edge,' is empty"),
        ("eval compare --strategies 'edge, ,s'", "error: --strategies: name 2 of 'edge, ,s' is"),
        ("eval compare --strategies ' '", "error: --strategies: no name given"),
        ("eval compare --strategies ''", "error: --strategies: no name given"),
        # counts below one: --batch-size 0 was accepted (a run that could never answer)
        *(
            (
                f"eval multidoc {flag} {value} --out {{t}}/o",
                f"{M} {flag}: must be an integer >= 1, got {value!r}",
            )
            for flag in COUNTS
            for value in ("0", "-2", "two")
        ),
        # tune: the tuned file was checked after the whole run (/dev/null replaced as root,
        # a folder an IsADirectoryError traceback, '' "has an empty name")
        ("tune --tuned {t}/tuned.json --out {t}/run", "error: --tuned {t}/tuned.json is a folder"),
        ("tune --tuned {t}/a-fifo", "error: --tuned", "is a FIFO (named pipe), not a regular file"),
        ("tune --tuned /dev/null", "error: --tuned", "is a character device, not a regular file"),
        ("tune --tuned {t}/no/t.json", "error: --tuned", "its folder {t}/no does not exist"),
        ("tune --tuned {t}/report.md/t.json", "error: --tuned", "a part of its path is a file"),
        ("tune --tuned '' --out {t}/run", "rag-position tune: error: argument --tuned: is empty"),
        ("tune --out {t}/tuned.json --questions 2", "error: --out {t}/tuned.json is a folder"),
        ("tune --profile {t}/p.json", "error: --profile {t}/p.json", "does not exist"),
        # candidate options are checked before the model loads (compare ran them: issue 42)
        ("tune --strategies {v}mass=2", "error: --strategies: {v}mass=2", "option `mass`"),
        ("eval compare --strategies {v}mass=true", "error: --strategies: {v}mass=true", "option `"),
        ("eval compare --strategies {v}top_n=0", "error: --strategies: {v}top_n=0", "option `"),
        ("eval compare --strategies {v}mass=2", "error: --strategies: {v}mass=2", "option `"),
        ("eval compare --strategies convex_score:edge_weight=nan", "error: --strategies: convex"),
        ("eval compare --versus nosuch", "error: --versus: unknown ['nosuch']"),  # ran, unpaired
        ("eval kv --pairs 0", "rag-position eval kv: error: argument --pairs: must be an integer"),
        # a scorer's spec was refused only once the reader had loaded (10 s)
        ("tune --scorer bogus:x", "error: unknown model spec 'bogus:x' for `--scorer`"),
        ("eval compare --scorer hf:", "error: unknown model spec 'hf:' for `--scorer`"),
        ("eval multidoc --model bogus:x", "error: unknown model spec 'bogus:x' for `--model`"),
        ("tune --scorer hf:{t}/none", "error: model spec 'hf:{t}/none': no such folder or file"),
    ],
    ids=lambda case: case[0],
)
def test_bad_input_is_refused_before_anything_is_made(
    case: tuple[str, ...],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Run in a folder holding a report, a folder and a FIFO: none is made, replaced or changed."""
    argv, start, *names = (text.format(t=tmp_path, v="select_and_place:") for text in case)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "report.md").write_text("someone else's report\n")
    (tmp_path / "tuned.json").mkdir()
    os.mkfifo(tmp_path / "a-fifo")
    line = _error_line(*_run(shlex.split(argv), capsys), *names)
    assert line.startswith(start), line
    assert sorted(os.listdir(tmp_path)) == ["a-fifo", "report.md", "tuned.json"]
    assert (tmp_path / "report.md").read_text() == "someone else's report\n"
    assert not os.listdir(tmp_path / "tuned.json")
    assert stat.S_ISFIFO(os.stat(tmp_path / "a-fifo").st_mode)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_the_python_api_refuses_an_out_file_and_a_device(tmp_path: Path) -> None:
    existing = tmp_path / "out.txt"
    existing.write_text("")
    with pytest.raises(EvalConfigError, match="is a file, not a folder"):
        run_kv(object(), pairs=8, questions=1, out=existing)
    if Path("/dev/zero").exists():
        with pytest.raises(DataFormatError, match="not a regular file"):
            load_qa("/dev/zero")


@pytest.mark.parametrize(
    ("spec", "files", "says"),
    [
        ("hf:/nonexistent", {}, "no such folder or file"),
        ("hf:./no/such/model", {}, "no such folder or file"),
        ("hf:~/no-such.gguf", {}, "does not exist"),
        ("hf:{t}", {"config.json": "{}"}, r"holds no transformers model \(a config.json but no w"),
        ("hf:{t}", {"model-q8_0.gguf": "GGUF"}, r"model-q8_0\.gguf"),
        # a lone surrogate (a non-UTF-8 byte in argv) gave a raw UnicodeEncodeError
        ("openai:http://127.0.0.1:9/v1/m\udcff", {}, "not valid UTF-8"),
    ],
)
def test_a_model_that_cannot_load_is_named_without_the_hub(
    spec: str,
    files: dict[str, str],
    says: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``load_model`` names what is wrong; ``eval`` prints it as its one error line."""
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    spec = spec.format(t=tmp_path)
    with pytest.raises(ModelSpecError, match=says) as caught:
        load_model(spec)
    monkeypatch.setattr(eval_cli, "load_model", load_model)  # the real one; the backend stubbed
    argv = ["eval", "kv", "--pairs", "8", "--model", spec, "--out", str(tmp_path / "run")]
    line = _error_line(*_run(argv, capsys))
    assert re.search(says, line) and "tokenizer" not in line, line
    if spec.startswith("hf:"):
        assert str(Path(spec[3:]).expanduser()) in str(caught.value)
        assert line == f"error: {caught.value}"


PY = sys.executable


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        # demo names a missing model before loading the embedder
        ("demo --model hf:/nonexistent", ["hf:/nonexistent", "no such folder or file"]),
        # the real VLLMServer: the spec is refused before vLLM is looked for or started
        (f"serve --model hf:/nonexistent --vllm-python {sys.executable}", ["is not a folder"]),
        # a host that cannot be bound with --port 0 gave a traceback
        (f"serve --host nosuch.invalid --port 0 --allow-open --vllm-python {PY}", ["port on"]),
    ],
)
def test_demo_and_serve_name_a_model_they_cannot_load(
    argv: str, names: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(serving, "VLLMServer", REAL_VLLM_SERVER)
    line = _error_line(*_run(argv.split(), capsys), *names)
    assert line.startswith("error:") and "tokenizer" not in line


def test_data_with_a_lone_surrogate_names_file_line_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    echo = types.SimpleNamespace(name="echo", generate=_never)  # the data is refused first
    monkeypatch.setattr(eval_cli, "load_model", lambda spec, **kwargs: echo)
    ctxs = [{"title": f"t{i}", "text": f"passage {i}", "isgold": i == 0} for i in range(10)]
    good = {"question": "who?", "answers": ["x"], "ctxs": ctxs}
    bad = {"question": "what is \ud800?", "answers": ["x"], "ctxs": ctxs}
    data = tmp_path / "qa.jsonl"
    data.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")  # "\ud800" escaped
    argv = ["eval", "multidoc", "--data", str(data), "--out", str(tmp_path / "run")]
    names = (str(data), "line 2", "field 'question'", "not valid Unicode", "character 8")
    _error_line(*_run(argv, capsys), *names)
