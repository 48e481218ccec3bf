"""Bad CLI input gives one ``error:`` line naming what was wrong, a non-zero exit, no traceback.

Every case here fails before a model loads: ``load_model`` (and vLLM's server) are
replaced by stubs that fail the test if they are reached.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import rag_position.eval.cli as eval_cli
import rag_position.models.loading as loading
import rag_position.serving as serving
from rag_position.cli import main
from rag_position.errors import ModelSpecError
from rag_position.models import load_model

REAL_VLLM_SERVER = serving.VLLMServer


def _never(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError(f"reached with {args} {kwargs}: the input should have been refused first")


@pytest.fixture(autouse=True)
def _nothing_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    """No model, backend class or vLLM server is reached by any test here."""
    monkeypatch.setattr(eval_cli, "load_model", _never)
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
    """The one ``error:`` line of a failed command, naming each of ``names``."""
    assert code != 0, err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1, err
    for name in names:
        assert name in lines[0], lines[0]
    return lines[0]


# ------------------------------------------------------------------ eval: --data and --out
def test_eval_data_folder_is_refused_before_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    code, err = _run(
        ["eval", "kv", "--data", str(tmp_path), "--out", str(out), "--pairs", "8"], capsys
    )
    line = _error_line(code, err, f"--data {tmp_path}", "is a folder")
    assert line.startswith("error:")
    assert not out.exists()  # refused before the run's folder was made


def test_eval_missing_data_file_is_refused_before_the_model_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.jsonl"
    code, err = _run(["eval", "multidoc", "--data", str(missing), "--out", str(tmp_path)], capsys)
    _error_line(code, err, str(missing))


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero here")
def test_eval_data_that_is_a_device_is_refused_before_reading_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--data /dev/zero`` read without end and died with a MemoryError traceback."""
    code, err = _run(["eval", "multidoc", "--data", "/dev/zero", "--out", str(tmp_path)], capsys)
    _error_line(code, err, "--data /dev/zero", "not a regular file")


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero here")
def test_the_loader_refuses_a_device() -> None:
    from rag_position.data import load_qa
    from rag_position.errors import DataFormatError

    with pytest.raises(DataFormatError, match="not a regular file"):
        load_qa("/dev/zero")


def test_eval_out_that_is_a_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    existing = tmp_path / "report.md"
    existing.write_text("not a folder\n")
    code, err = _run(["eval", "kv", "--out", str(existing), "--pairs", "8"], capsys)
    _error_line(code, err, f"--out {existing}", "is a file")
    assert existing.read_text() == "not a folder\n"


def test_eval_out_under_a_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    existing = tmp_path / "a-file"
    existing.write_text("")
    code, err = _run(["eval", "gauge", "--out", str(existing / "run")], capsys)
    _error_line(code, err, str(existing / "run"), f"{existing} is a file")


def test_eval_empty_out_is_refused_and_the_current_folder_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--out ""`` was the current folder: a run there replaced its report.md."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "report.md").write_text("someone else's report\n")
    code, err = _run(["eval", "multidoc", "--out", "", "--questions", "1"], capsys)
    _error_line(code, err, "--out", "is empty")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.md"]
    assert (tmp_path / "report.md").read_text() == "someone else's report\n"


@pytest.mark.parametrize(
    "flag", ["--batch-size", "--questions", "--max-new-tokens", "--concurrency", "--workers"]
)
@pytest.mark.parametrize("value", ["0", "-2", "two"])
def test_eval_counts_below_one_are_refused(
    flag: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--batch-size 0`` was accepted (a run that could never answer)."""
    code, err = _run(["eval", "multidoc", flag, value, "--out", str(tmp_path / "o")], capsys)
    assert code == 2
    _error_line(code, err, flag, ">= 1", repr(value))
    assert not (tmp_path / "o").exists()


def test_run_function_refuses_an_out_file_before_writing(tmp_path: Path) -> None:
    from rag_position.eval import run_kv
    from rag_position.eval.engine.common import EvalConfigError

    existing = tmp_path / "out.txt"
    existing.write_text("")
    with pytest.raises(EvalConfigError, match="is a file, not a folder"):
        run_kv(object(), pairs=8, questions=1, out=existing)


def test_a_model_name_that_is_not_utf8_is_a_clear_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A non-UTF-8 byte in an ``openai:`` model name (a lone surrogate in argv) gave a raw
    ``UnicodeEncodeError``."""
    monkeypatch.setattr(eval_cli, "load_model", load_model)  # the real one: it must refuse
    spec = "openai:http://127.0.0.1:9/v1/m\udcff"
    with pytest.raises(ModelSpecError, match="not valid UTF-8"):
        load_model(spec)
    code, err = _run(["eval", "multidoc", "--model", spec, "--questions", "1"], capsys)
    _error_line(code, err, "not valid UTF-8")


# ------------------------------------------------------------------ --model hf:<path>
def test_missing_model_path_names_it_and_loads_nothing(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(eval_cli, "load_model", load_model)  # real; the backend is stubbed
    code, err = _run(["eval", "kv", "--model", "hf:/nonexistent", "--pairs", "8"], capsys)
    _error_line(code, err, "hf:/nonexistent", "no such folder or file")


@pytest.mark.parametrize("spec", ["hf:/nonexistent", "hf:./no/such/model", "hf:~/no-such.gguf"])
def test_load_model_refuses_a_missing_path_without_the_hub(spec: str) -> None:
    with pytest.raises(ModelSpecError, match=r"no such folder or file|does not exist") as caught:
        load_model(spec)
    assert str(Path(spec[3:]).expanduser()) in str(caught.value)


def test_folder_without_a_model_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(eval_cli, "load_model", load_model)
    empty = tmp_path / "empty"
    empty.mkdir()
    code, err = _run(["eval", "kv", "--model", f"hf:{empty}", "--pairs", "8"], capsys)
    line = _error_line(code, err, str(empty), "holds no transformers model", "config.json")
    assert "tokenizer" not in line


def test_folder_with_config_but_no_weights_says_so(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ModelSpecError, match="no weights") as caught:
        load_model(f"hf:{tmp_path}")
    assert str(tmp_path) in str(caught.value)


def test_folder_holding_a_gguf_file_points_at_it(tmp_path: Path) -> None:
    (tmp_path / "model-q8_0.gguf").write_bytes(b"GGUF")
    with pytest.raises(ModelSpecError, match=r"model-q8_0\.gguf"):
        load_model(f"hf:{tmp_path}")


def test_demo_names_a_missing_model_before_loading_the_embedder(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import rag_position.models as models

    monkeypatch.setattr(models, "load_embedder", _never)
    code, err = _run(["demo", "--model", "hf:/nonexistent"], capsys)
    _error_line(code, err, "hf:/nonexistent", "no such folder or file")


# ------------------------------------------------------------------ serve's numeric options
@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--port", "70000"),
        ("--port", "-1"),
        ("--max-model-len", "0"),
        ("--tensor-parallel-size", "0"),
        ("--startup-timeout", "0"),
    ],
)
def test_serve_refuses_bad_numbers_while_parsing(
    option: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _run(["serve", option, value], capsys)
    assert code == 2
    _error_line(code, err, f"argument {option}", value)


def test_serve_reports_a_model_it_cannot_serve_as_an_error_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    # the real VLLMServer: the spec is refused before vLLM is looked for or started
    monkeypatch.setattr(serving, "VLLMServer", REAL_VLLM_SERVER)
    code, err = _run(
        ["serve", "--model", "hf:/nonexistent", "--vllm-python", sys.executable], capsys
    )
    assert _error_line(code, err, "hf:/nonexistent", "is not a folder").startswith("error:")


# ------------------------------------------------------------------ comma-separated names
@pytest.mark.parametrize("text", ["edge,,sandwich", ",edge", "edge,", "edge, ,sandwich", " ", ""])
def test_empty_strategy_names_are_refused(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(["eval", "compare", "--strategies", text], capsys)
    line = _error_line(code, err, "--strategies")
    assert "empty" in line or "no name" in line
    if text.strip(", "):
        assert repr(text) in line


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["compare", "--gold", "random,"], "--gold"),
        (["length", "--fillers", ",essay"], "--fillers"),
    ],
)
def test_other_name_lists_refuse_empty_names(
    argv: list[str], option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _run(["eval", *argv], capsys)
    _error_line(code, err, option, "empty")


# ------------------------------------------------------------------ text that is not Unicode
class _Echo:
    """A model that must not be asked anything (the data is refused first)."""

    name = "echo"

    def generate(self, prompts: Sequence[str], **options: Any) -> list[str]:
        raise AssertionError("generate was called on data that is not valid Unicode")


def test_data_with_a_lone_surrogate_names_file_line_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(eval_cli, "load_model", lambda spec, **kwargs: _Echo())
    ctxs = [{"title": f"t{i}", "text": f"passage {i}", "isgold": i == 0} for i in range(10)]
    good = {"question": "who?", "answers": ["x"], "ctxs": ctxs}
    bad = {"question": "what is \ud800?", "answers": ["x"], "ctxs": ctxs}
    data = tmp_path / "qa.jsonl"
    data.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")  # "\ud800" escaped
    code, err = _run(
        ["eval", "multidoc", "--data", str(data), "--out", str(tmp_path / "run")], capsys
    )
    _error_line(
        code, err, str(data), "line 2", "field 'question'", "not valid Unicode", "character 8"
    )


# ------------------------------------------------------------------ tune: the tuned file
def _bad_tuned_targets(tmp_path: Path) -> dict[str, tuple[str, str]]:
    """Each bad ``--tuned`` value, with what its error says."""
    folder = tmp_path / "a-folder"
    folder.mkdir()
    fifo = tmp_path / "a-fifo"
    os.mkfifo(fifo)
    return {
        "a folder": (str(folder), "is a folder"),
        "a FIFO": (str(fifo), "is a FIFO (named pipe), not a regular file"),
        "a device": ("/dev/null", "is a character device, not a regular file"),
        "a missing folder": (str(tmp_path / "nope" / "t.json"), f"its folder {tmp_path / 'nope'} "
                             "does not exist"),
        "under a file": (str(tmp_path / "a-file" / "t.json"), "a part of its path is a file"),
    }  # fmt: skip


@pytest.mark.parametrize(
    "case", ["a folder", "a FIFO", "a device", "a missing folder", "under a file", "empty"]
)
def test_tune_checks_the_tuned_file_before_any_work(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--tuned`` was checked after the whole run: /dev/null replaced by a file (as root),
    a folder an IsADirectoryError traceback, '' "has an empty name", a missing folder
    named the temporary file."""
    (tmp_path / "a-file").write_text("")
    targets = _bad_tuned_targets(tmp_path)
    value, says = targets.get(case, ("", "is empty"))
    out = tmp_path / "run"
    code, err = _run(["tune", "--tuned", value, "--out", str(out), "--questions", "2"], capsys)
    _error_line(code, err, "--tuned", says)
    assert not out.exists()  # before the run's folder was made
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert stat.S_ISFIFO(os.stat(tmp_path / "a-fifo").st_mode)


def test_tune_out_naming_a_json_folder_names_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "tuned.json"
    folder.mkdir()
    code, err = _run(["tune", "--out", str(folder), "--questions", "2"], capsys)
    _error_line(code, err, f"--out {folder}", "is a folder")
    assert not (tmp_path / "tuned-run").exists()


def test_tune_profile_that_is_missing_names_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "profile.json"
    code, err = _run(
        ["tune", "--profile", str(missing), "--out", str(tmp_path / "run"), "--questions", "2"],
        capsys,
    )
    _error_line(code, err, f"--profile {missing}", "does not exist")
    assert not (tmp_path / "run").exists()


def test_tune_checks_candidate_options_before_the_model_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    argv = ["tune", "--strategies", "select_and_place:mass=2", "--out", str(out)]
    code, err = _run(argv, capsys)
    _error_line(code, err, "--strategies: select_and_place:mass=2", "option `mass`")
    assert not out.exists()


@pytest.mark.parametrize("variant", ["select_and_place:mass=true", "select_and_place:top_n=0",
                                     "select_and_place:mass=2"])  # fmt: skip
def test_compare_checks_option_values_before_the_model_loads(
    variant: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``compare --strategies select_and_place:mass=true`` ran (issue 42)."""
    out = tmp_path / "run"
    code, err = _run(["eval", "compare", "--strategies", variant, "--out", str(out)], capsys)
    _error_line(code, err, f"--strategies: {variant}", "option `")
    assert not out.exists()
