"""The output folder a person reads: ``report.md``, ``summary.json``, ``summary.csv``, PNGs."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_position._jsonfile import write_atomic
from rag_position.eval.engine.store import PREDICTIONS_FILE

SUMMARY_JSON = "summary.json"
SUMMARY_CSV = "summary.csv"
REPORT_MD = "report.md"


@dataclass
class Table:
    """A Markdown table: ``headers`` and already formatted ``cells``.

    Example:
        >>> table = Table("Accuracy (%)", ["setting", "accuracy"], [["gold at 0", "50.0"]])
        >>> table.headers, table.cells[0]
        (['setting', 'accuracy'], ['gold at 0', '50.0'])
    """

    title: str
    headers: Sequence[str]
    cells: Sequence[Sequence[str]]


@dataclass(frozen=True)
class Column:
    """A column a caller adds to a section's table: its header, a summary row's cell,
    and the header it follows (:func:`with_columns`).

    Example:
        >>> column = Column("reference", lambda row: "13.5")
        >>> column.header, column.cell({}), column.after
        ('reference', '13.5', 'accuracy')
    """

    header: str
    cell: Callable[[Mapping[str, Any]], str]
    after: str = "accuracy"


def with_columns(
    headers: Sequence[str],
    cells: Sequence[Sequence[str]],
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[Column],
) -> tuple[list[str], list[list[str]]]:
    """``headers`` and ``cells`` (one line per row of ``rows``) with ``columns`` added,
    each after the header it names (at the end when there is none).

    Example:
        >>> rows = [{"accuracy": 0.5}]
        >>> with_columns(["setting", "accuracy", "n"], [["x", "50.0", "2"]], rows,
        ...              [Column("ref", lambda row: "40.0")])
        (['setting', 'accuracy', 'ref', 'n'], [['x', '50.0', '40.0', '2']])
    """
    if len(cells) != len(rows):
        raise ValueError(f"{len(cells)} table lines for {len(rows)} rows")
    head = list(headers)
    lines = [list(line) for line in cells]
    for column in columns:
        at = head.index(column.after) + 1 if column.after in head else len(head)
        head.insert(at, column.header)
        for line, row in zip(lines, rows, strict=True):
            line.insert(at, column.cell(row))
    return head, lines


@dataclass
class Section:
    """What one task contributes to a report: its summary rows, tables, plots and notes.

    Example:
        >>> rows = [{"strategy": "baseline", "setting": "gold=0", "accuracy": 0.5}]
        >>> section = Section(title="Demo", task="demo", rows=rows, notes=["20 questions"])
        >>> section.rows[0]["accuracy"], section.tables, section.notes
        (0.5, [], ['20 questions'])
    """

    title: str
    task: str
    rows: list[dict[str, Any]]
    tables: list[Table] = field(default_factory=list)
    figures: list[tuple[str, str]] = field(default_factory=list)  # (file name, caption)
    notes: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EvalResult:
    """What a task run returns: its summary rows and where everything was written.

    Example::

        result = run_multidoc(load_model("embedded"), docs=10, questions=20, out="runs/md")
        result.row(setting="closedbook")["accuracy"], len(result.rows)
        result.report, result.summary_csv, result.predictions  # paths in result.out
    """

    out: Path
    sections: list[Section]
    report: Path
    summary_json: Path
    summary_csv: Path
    predictions: Path

    @property
    def rows(self) -> list[dict[str, Any]]:
        """Every summary row of every section."""
        return [row for section in self.sections for row in section.rows]

    def row(self, **match: Any) -> dict[str, Any]:
        """The one row whose fields equal ``match`` (e.g. ``setting="closedbook"``)."""
        found = [r for r in self.rows if all(r.get(k) == v for k, v in match.items())]
        if len(found) != 1:
            raise KeyError(f"{len(found)} rows match {match}")
        return found[0]


def write_report(
    out: Path,
    sections: Sequence[Section],
    *,
    title: str,
    command: str,
    settings: Mapping[str, Any],
) -> EvalResult:
    """Write ``summary.json``, ``summary.csv`` and ``report.md`` into ``out`` (beside the plots).

    Example:
        >>> import tempfile
        >>> section = Section("Demo", "demo", rows=[{"setting": "x", "accuracy": 0.5}])
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     result = write_report(Path(tmp), [section], title="Demo", command="x", settings={})
        ...     print(result.report.read_text().splitlines()[0], result.row(setting="x"))
        # Demo {'setting': 'x', 'accuracy': 0.5}
    """
    out.mkdir(parents=True, exist_ok=True)
    payload = {
        "title": title,
        "command": command,
        "settings": dict(settings),
        "sections": [
            {
                "title": s.title,
                "task": s.task,
                "settings": s.settings,
                "notes": s.notes,
                "figures": [name for name, _ in s.figures],
                "rows": s.rows,
            }
            for s in sections
        ],
    }
    summary_json = out / SUMMARY_JSON
    write_atomic(summary_json, json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    summary_csv = out / SUMMARY_CSV
    write_atomic(summary_csv, _csv([row for s in sections for row in s.rows]))
    report = out / REPORT_MD
    write_atomic(report, _markdown(sections, title=title, command=command, settings=settings))
    return EvalResult(
        out, list(sections), report, summary_json, summary_csv, out / PREDICTIONS_FILE
    )


def pct(value: float | None) -> str:
    """``0.1734`` -> ``"17.3"``; ``None`` -> ``"-"``."""
    return "-" if value is None else f"{100 * value:.1f}"


def acc_cell(row: Mapping[str, Any]) -> str:
    """Accuracy with its 95% interval, in percent: ``"17.3 [10.0, 25.0]"``."""
    return f"{pct(row['accuracy'])} [{pct(row['ci_low'])}, {pct(row['ci_high'])}]"


def row_cells(row: Mapping[str, Any], *fields: str) -> list[str]:
    """A row's ``fields`` as table cells; ``"accuracy"`` with its interval (:func:`acc_cell`).

    Example:
        >>> row_cells({"k": 5, "n": 2, "accuracy": 0.5, "ci_low": 0.0, "ci_high": 1.0},
        ...           "k", "n", "accuracy")
        ['5', '2', '50.0 [0.0, 100.0]']
    """
    return [acc_cell(row) if f == "accuracy" else str(row[f]) for f in fields]


def versus_cell(row: Mapping[str, Any]) -> str:
    """A row's questions won and lost against the row it is paired with, and the sign
    test's p-value (``--`` when unpaired).

    Example:
        >>> versus_cell({"wins": 3, "losses": 0, "sign_p": 0.25}), versus_cell({})
        ('3/0 (0.250)', '--')
    """
    if "wins" not in row:
        return "--"
    p = row["sign_p"]
    return f"{row['wins']}/{row['losses']} ({'<0.001' if p < 0.001 else f'{p:.3f}'})"


def num(value: Any, digits: int = 1) -> str:
    """A number for a table cell (``-`` when unknown)."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def point(row: Mapping[str, Any], x: float = 0.0) -> tuple[float, float, float, float]:
    """A row's accuracy as a plot point ``(x, y, low, high)``."""
    return (x, float(row["accuracy"]), float(row["ci_low"]), float(row["ci_high"]))


def _markdown(
    sections: Sequence[Section], *, title: str, command: str, settings: Mapping[str, Any]
) -> str:
    lines = [f"# {title}", "", "Made by:", "", "```", command, "```", ""]
    lines += ["Accuracy is the paper's best-subspan match, in percent, with a 95% bootstrap"]
    lines += ["interval in brackets (seeded: the same predictions always give the same interval)."]
    lines += ["", "## Settings", "", "| setting | value |", "| --- | --- |"]
    lines += [f"| {k} | {_cell(v)} |" for k, v in settings.items()]
    for section in sections:
        lines += ["", f"## {section.title}", ""]
        for name, caption in section.figures:
            lines += [f"![{caption}]({name})", "", f"*{caption}*", ""]
        for table in section.tables:
            lines += [f"**{table.title}**", "", "| " + " | ".join(table.headers) + " |"]
            lines += ["| " + " | ".join("---" for _ in table.headers) + " |"]
            lines += ["| " + " | ".join(row) + " |" for row in table.cells]
            lines += [""]
        lines += [f"- {note}" for note in section.notes]
        if section.settings:
            details = ", ".join(f"{k}: {_cell(v)}" for k, v in section.settings.items())
            lines += [f"- settings: {details}"]
    lines += ["", f"Every prediction is in `{PREDICTIONS_FILE}`; the numbers are in "]
    lines += [f"`{SUMMARY_JSON}` and `{SUMMARY_CSV}`.", ""]
    return "\n".join(lines)


def _csv(rows: Sequence[Mapping[str, Any]]) -> str:
    columns = list(dict.fromkeys(name for row in rows for name in row))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _csv_value(v) for k, v in row.items()})
    return buffer.getvalue()


def _csv_value(value: Any) -> Any:
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return value


def _cell(value: Any) -> str:
    text = json.dumps(value) if isinstance(value, (list, dict)) else str(value)
    return text.replace("|", "\\|")
