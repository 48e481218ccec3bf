"""The embedded model's 200-question figures, shown beside a short run (``eval quick``).

A 10-question run gives 95% intervals 30 to 60 points wide: it cannot say which
position or strategy is best. The packaged ``reference-embedded-200.json`` holds the
same rows measured on the first 200 dev questions (``results/ucurve200``,
``results/compare200``, ``results/compare200-alone``, ``results/select200``, made by
``scripts/make_reference.py``), so ``eval quick`` on the embedded model prints them in a
column of their own: its first report is conclusive where its own run cannot be.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_position._jsonfile import read_json
from rag_position.eval.engine.report import Column, acc_cell, versus_cell

REFERENCE_FILE = "reference-embedded-200.json"
REFERENCE_MODEL = "embedded:SmolLM2-135M-Instruct"
"""The model the reference is for, whatever its dtype (its label adds ``@float32``...)."""
REFERENCE_HEADER = "reference, 200 questions"
REFERENCE_SEED = 0
REFERENCE_MAX_NEW_TOKENS = 100


@dataclass(frozen=True)
class Reference:
    """The reference's rows by ``(task, strategy, setting)``, as a run's summary rows are keyed.

    Example:
        >>> ref = Reference("m@float32", 200, {"results/x": {"command": "rag-position eval x"}},
        ...                 {("t", "s", "g"): {"accuracy": 0.1, "ci_low": 0.05, "ci_high": 0.15,
        ...                                    "source": "results/x", "label": "s"}})
        >>> ref.accuracy_cell({"task": "t", "strategy": "s", "setting": "g"})
        '10.0 [5.0, 15.0]'
        >>> ref.accuracy_cell({"task": "t", "strategy": "other", "setting": "g"})
        '-'
    """

    model: str
    questions: int
    sources: Mapping[str, Mapping[str, Any]]
    rows: Mapping[tuple[str, str, str], Mapping[str, Any]]

    def get(self, row: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The reference's row for a run's summary row, or ``None``."""
        return self.rows.get((str(row["task"]), str(row["strategy"]), str(row["setting"])))

    def accuracy_cell(self, row: Mapping[str, Any]) -> str:
        """The reference's accuracy with its interval (``-`` where it has none)."""
        found = self.get(row)
        return "-" if found is None else acc_cell(found)

    def versus_cell(self, row: Mapping[str, Any]) -> str:
        """The reference's questions won and lost against its paired row (``-``: none)."""
        found = self.get(row)
        return "-" if found is None else versus_cell(found)

    def columns(self, versus: str | None = None) -> list[Column]:
        """The table columns: accuracy after the run's, and with ``versus`` (the row the
        reference is paired with, the retriever) its wins and losses after the run's."""
        out = [Column(REFERENCE_HEADER, self.accuracy_cell)]
        if versus is not None:
            out.append(
                Column(
                    f"reference vs {versus}: won/lost (p)",
                    self.versus_cell,
                    after=f"vs {versus}: won/lost (p)",
                )
            )
        return out

    def note(self, rows: Sequence[Mapping[str, Any]], label: str, questions: int) -> list[str]:
        """What a section shows of the reference: its sources, its rows' own notes, and
        the width of the run's intervals against the reference's (none: no row has one)."""
        found = [(r, ref) for r in rows if (ref := self.get(r)) is not None]
        if not found:
            return []
        by_source: dict[str, list[str]] = {}
        for _, ref in found:
            by_source.setdefault(str(ref["source"]), []).append(str(ref["label"]))
        by_command: dict[str, list[str]] = {}
        for source, labels in by_source.items():
            shown = f"`{source}/`" + (f" ({', '.join(labels)})" if len(by_source) > 1 else "")
            by_command.setdefault(short_command(self.sources[source]["command"]), []).append(shown)
        made = "; ".join(
            f"{', '.join(shown)}: `{command}`" for command, shown in by_command.items()
        )
        cut = any(" ... " in c or c.endswith(" ...") for c in by_command)
        folders = "each folder's" if len(by_source) > 1 else "the folder's"
        dtype = label.partition("@")[2]
        text = (
            f"{REFERENCE_HEADER}: the embedded model in float32 (`{self.model}`) on the first "
            f"{self.questions} dev questions (this run: the first {questions}), from {made}"
            + (f" (in full in {folders} report.md)" if cut else "")
            + f"; shipped as `{REFERENCE_FILE}`"
            + ("" if dtype in ("", "float32") else f"; this run is in {dtype}, which answers a few")
            + ("" if dtype in ("", "float32") else " questions differently from float32")
        )
        notes = [text]
        by_note: dict[str, list[str]] = {}
        for _, ref in found:
            if "note" in ref:
                by_note.setdefault(str(ref["note"]), []).append(str(ref["label"]))
        notes += [f"{', '.join(labels)} (reference): {note}" for note, labels in by_note.items()]
        notes.append(
            f"this run's 95% intervals ({questions} questions) are up to {widest(rows)} points "
            f"wide, the reference's at most {widest([ref for _, ref in found])}"
            + (
                ": a difference this run shows is conclusive only where the reference shows it too"
                if questions < self.questions
                else ""
            )
        )
        return notes


def load_reference(path: str | Path | None = None) -> Reference:
    """The reference file (default: the packaged ``reference-embedded-200.json``).

    Example::

        ref = load_reference()
        ref.model, ref.questions  # 'embedded:SmolLM2-135M-Instruct@float32', 200
        ref.get({"task": "compare", "strategy": "select_and_place",
                 "setting": "docs=10 gold=random(seed=0)"})["accuracy"]
    """
    from rag_position.data import packaged_data_dir

    file = Path(path) if path is not None else packaged_data_dir() / REFERENCE_FILE
    payload = read_json(file, what="reference file")
    rows = {(r["task"], r["strategy"], r["setting"]): r for r in payload["rows"]}
    return Reference(payload["model"], int(payload["questions"]), payload["sources"], rows)


def reference_problem(
    label: str,
    *,
    data_name: str | None,
    default_embedder: bool,
    seed: int,
    max_new_tokens: int,
) -> str | None:
    """Why the reference does not fit a run (``None``: it does).

    It fits the embedded model (any dtype) on the packaged dev file's instances
    (``data_name``: the run's file name, ``None`` for another kind of data), built with
    the default embedder, with seed 0 and 100 new tokens.

    Example:
        >>> fits = dict(data_name="nq-open-oracle-dev.jsonl.gz", default_embedder=True,
        ...             seed=0, max_new_tokens=100)
        >>> reference_problem("embedded:SmolLM2-135M-Instruct@bfloat16", **fits) is None
        True
        >>> reference_problem("openai:http://x/v1/m", **fits)
        "it is the embedded model's, not `openai:http://x/v1/m`'s"
        >>> reference_problem("embedded:SmolLM2-135M-Instruct@float32", **{**fits, "seed": 1})
        'it was measured with seed 0; this run: --seed 1'
    """
    from rag_position.data import ORACLE_FILE

    if not label.startswith(REFERENCE_MODEL):
        return f"it is the embedded model's, not `{label}`'s"
    if data_name != ORACLE_FILE or not default_embedder:
        return (
            f"it was measured on `{ORACLE_FILE}` with the default embedder's distractors; "
            "this run has other data or another embedder"
        )
    if seed != REFERENCE_SEED:
        return f"it was measured with seed {REFERENCE_SEED}; this run: --seed {seed}"
    if max_new_tokens != REFERENCE_MAX_NEW_TOKENS:
        return (
            f"it was measured with {REFERENCE_MAX_NEW_TOKENS} new tokens; this run: "
            f"--max-new-tokens {max_new_tokens}"
        )
    return None


def absent_note(problem: str, rows: Sequence[Mapping[str, Any]], questions: int) -> str:
    """The note of a run the reference does not fit: why, and how wide its intervals are."""
    return (
        f"no `{REFERENCE_HEADER}` column: the packaged reference (`{REFERENCE_FILE}`, "
        f"`{REFERENCE_MODEL}` in float32) does not fit this run: {problem}. This run's 95% "
        f"intervals ({questions} questions) are up to {widest(rows)} points wide: for conclusive "
        "figures, run `eval multidoc` and `eval compare --gold random` with `--questions 200`"
    )


def short_command(command: str) -> str:
    """A recorded command with its strategy list cut and ``--versus`` dropped (the
    reference pairs every row with the retriever itself).

    Example:
        >>> short_command("rag-position eval compare --strategies a,b --versus a --questions 2")
        'rag-position eval compare --strategies ... --questions 2'
    """
    words = shlex.split(command)
    kept: list[str] = []
    i = 0
    while i < len(words):
        if words[i] == "--versus":
            i += 2
            continue
        kept.append(words[i])
        if words[i] == "--strategies" and i + 1 < len(words):
            kept.append("...")
            i += 1
        i += 1
    return " ".join(kept)


def widest(rows: Sequence[Mapping[str, Any]]) -> int:
    """The widest of the rows' 95% intervals, in points.

    Example:
        >>> widest([{"ci_low": 0.0, "ci_high": 0.3}, {"ci_low": 0.2, "ci_high": 0.8}])
        60
    """
    return max((round(100 * (r["ci_high"] - r["ci_low"])) for r in rows), default=0)
