"""Which run an output folder holds: ``run.json``, written when a run starts.

A task run writes ``run.json`` into its output folder when it opens the run, before
its first prediction: the task, the model's label (:func:`model_label`), the decoding
settings and the command. A later run into that folder must be the same run (same
task, model and decoding): it resumes it, or extends it (more questions, more
strategies). Any other run is refused (:func:`check_run_folder`) before it generates
anything (before the model loads, from the CLI, except for the model's own check),
so that it cannot replace that run's report and summaries with its own.

Folders written before ``run.json`` existed: one holding ``predictions.jsonl`` is
resumed, and gets its marker, when the file holds predictions of this model with
these decoding settings (or none at all); one holding only a report (``report.md``,
``summary.json`` or ``summary.csv``) is refused, since nothing there would resume.
An empty folder, or one holding none of these files, is fine.

Example:
    >>> import shutil, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> greedy = Decoding(max_new_tokens=32)
    >>> write_marker(folder, RunMarker("kv", "scripted", greedy.as_dict(), "run_kv(...)"))
    >>> check_run_folder(folder, task="kv", model="scripted", decoding=greedy)  # resumes
    >>> check_run_folder(folder, task="gauge", decoding=greedy)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rag_position.eval.engine.common.EvalConfigError: --out ... holds another run: kv with model 'scripted', max_new_tokens=32, seed=0, temperature=0.0; made by: run_kv(...); its task is kv, this run's gauge. Give this run a new --out, or rerun that run's command to resume it (that run has saved nothing yet: ...)
    >>> shutil.rmtree(folder)
"""  # noqa: E501

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_position import __version__
from rag_position._jsonfile import file_kind, read_json, write_atomic
from rag_position.errors import DataFormatError
from rag_position.eval.engine.common import Decoding, EvalConfigError
from rag_position.eval.engine.folder_lock import check_folder_free
from rag_position.eval.engine.report import REPORT_MD, SUMMARY_CSV, SUMMARY_JSON
from rag_position.eval.engine.store import KEY_FIELDS, PREDICTIONS_FILE

RUN_FILE = "run.json"
RUN_FORMAT = 1
REPORT_FILES = (REPORT_MD, SUMMARY_JSON, SUMMARY_CSV)
DECODING_FIELDS = ("max_new_tokens", "seed", "temperature")

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class RunMarker:
    """What ``run.json`` records: the run's task, model label, decoding and command.

    Example:
        >>> RunMarker("kv", "scripted", Decoding(max_new_tokens=32).as_dict()).describe()
        "kv with model 'scripted', max_new_tokens=32, seed=0, temperature=0.0"
    """

    task: str
    model: str
    decoding: Mapping[str, Any]
    command: str | None = None

    def describe(self) -> str:
        settings = ", ".join(f"{k}={self.decoding.get(k)}" for k in DECODING_FIELDS)
        return f"{self.task} with model {self.model!r}, {settings}"

    def as_json(self) -> str:
        payload = {
            "format": RUN_FORMAT,
            "task": self.task,
            "model": self.model,
            "decoding": dict(self.decoding),
            "command": self.command,
            "rag-position": __version__,
        }
        return json.dumps(payload, indent=2) + "\n"  # ASCII: any command can be written


def read_marker(folder: PathLike) -> RunMarker | None:
    """The folder's ``run.json`` (``None``: it has none); one that is not a marker is refused."""
    path = Path(folder) / RUN_FILE
    if not os.path.lexists(path):
        return None
    try:
        data = read_json(path, what="run marker")
    except (DataFormatError, OSError) as exc:
        raise EvalConfigError(
            f"--out {Path(folder)}: {path} is not a run marker of rag-position eval ({exc}); "
            "give the run a new --out, or remove that file if the folder is yours to reuse"
        ) from None
    fields = data if isinstance(data, dict) else {}
    task, model, decoding = fields.get("task"), fields.get("model"), fields.get("decoding")
    if not (isinstance(task, str) and isinstance(model, str) and isinstance(decoding, dict)):
        raise EvalConfigError(
            f"--out {Path(folder)}: {path} is not a run marker of rag-position eval (it needs "
            "'task', 'model' and 'decoding'); give the run a new --out, or remove that file "
            "if the folder is yours to reuse"
        )
    command = fields.get("command")
    return RunMarker(task, model, decoding, command if isinstance(command, str) else None)


def write_marker(folder: PathLike, marker: RunMarker) -> None:
    """Write ``marker`` as the folder's ``run.json`` (replacing it whole)."""
    write_atomic(Path(folder) / RUN_FILE, marker.as_json())


def check_run_folder(
    out: PathLike | None, *, task: str, decoding: Decoding, model: str | None = None
) -> None:
    """Refuse an output folder that holds another run (module doc); ``model=None``: the
    model is not known yet (the CLI, before it loads), its check comes later."""
    if out is None or not Path(out).is_dir():
        return
    folder = Path(out)
    check_folder_free(folder)  # another process's run holds it: refused at once
    _check_file_kinds(folder)
    wanted = decoding.as_dict()
    marker = read_marker(folder)
    if marker is not None:
        differs = []
        if marker.task != task:
            differs.append(f"its task is {marker.task}, this run's {task}")
        if model is not None and marker.model != model:
            differs.append(f"its model is {marker.model!r}, this run's {model!r}")
        for name in DECODING_FIELDS:
            if marker.decoding.get(name) != wanted[name]:
                differs.append(
                    f"its {name} is {marker.decoding.get(name)}, this run's {wanted[name]}"
                )
        if differs:
            error = _taken(folder, marker.describe(), marker.command, "; ".join(differs))
            if not _saved_anything(folder):
                error = EvalConfigError(
                    f"{error} (that run has saved nothing yet: if it is not running, remove "
                    f"{folder / RUN_FILE} to give the folder to this run)"
                )
            raise error
        return
    predictions = folder / PREDICTIONS_FILE
    if predictions.is_file():
        if model is not None:
            _check_unmarked_predictions(folder, predictions, model, wanted)
        return
    written = [name for name in REPORT_FILES if (folder / name).exists()]
    if written:
        raise EvalConfigError(
            f"--out {folder} holds the report of another run ({', '.join(written)}"
            f"{_made_by(_summary_command(folder))}) and no {PREDICTIONS_FILE} to resume it "
            "from; this run would replace that report with its own. Give this run a new "
            "--out (or move that report away)"
        )


def _check_file_kinds(folder: Path) -> None:
    """Every file a run writes in ``folder`` is a regular file or absent: a FIFO there
    would block the run when it opens it, and a device would take its records."""
    for name in (RUN_FILE, PREDICTIONS_FILE, *REPORT_FILES):
        path = folder / name
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise EvalConfigError(
                f"--out {folder}: {path} cannot be checked ({exc.strerror or exc})"
            ) from None
        if not stat.S_ISREG(mode):
            raise EvalConfigError(
                f"--out {folder}: {path} is {file_kind(mode)}, not a regular file; the run "
                "writes that file: give the run a new --out, or move it away"
            )


def _check_unmarked_predictions(
    folder: Path, predictions: Path, model: str, decoding: Mapping[str, Any]
) -> None:
    """A folder from before ``run.json``: resumed when its predictions include this
    model's with these decoding settings (or it holds none)."""
    seen: dict[tuple[str, str], int] = {}
    with open(predictions, encoding="utf-8", errors="replace") as fin:
        for line in fin:
            try:
                row = json.loads(line)
            except (ValueError, RecursionError):  # a huge integer, deep nesting
                continue  # the store reports a broken line when it loads the file
            if not isinstance(row, dict) or not all(
                isinstance(row.get(f), str) for f in KEY_FIELDS
            ):
                continue
            if row["model"] == model and row.get("decoding") == dict(decoding):
                return
            found = (row["model"], json.dumps(row.get("decoding"), sort_keys=True))
            seen[found] = seen.get(found, 0) + 1
    if not seen:
        return
    (other, settings), count = max(seen.items(), key=lambda item: item[1])
    this = ", ".join(f"{k}={decoding[k]}" for k in DECODING_FIELDS)
    raise _taken(
        folder,
        f"{count} predictions of model {other!r} with decoding {settings}",
        _summary_command(folder),
        f"it holds no prediction of this run's model {model!r} with {this}",
    )


def _saved_anything(folder: Path) -> bool:
    """Whether the folder holds a prediction or a report (beside its ``run.json``)."""
    predictions = folder / PREDICTIONS_FILE
    if predictions.exists() and predictions.stat().st_size > 0:
        return True
    return any((folder / name).exists() for name in REPORT_FILES)


def _taken(folder: Path, what: str, command: str | None, differs: str) -> EvalConfigError:
    return EvalConfigError(
        f"--out {folder} holds another run: {what}{_made_by(command)}; {differs}. Give this run "
        "a new --out, or rerun that run's command to resume it"
    )


def _made_by(command: str | None) -> str:
    return f"; made by: {command}" if command else ""


def _summary_command(folder: Path) -> str | None:
    """The command a report of the folder records (``summary.json``), if it can be read."""
    try:
        data = read_json(folder / SUMMARY_JSON, what="report summary")
    except (DataFormatError, OSError):
        return None
    command = data.get("command") if isinstance(data, dict) else None
    return command if isinstance(command, str) else None
