"""Read the "Lost in the Middle" data files: multi-document QA and key-value retrieval.

:func:`load_qa` reads the oracle file and the original multi-document files
(``nq-open-{k}_total_documents_gold_at_{i}.jsonl.gz``), which share one record
format; :func:`load_kv` reads ``kv-retrieval-*_keys.jsonl.gz``. Files may be gzipped.
A malformed line raises :class:`~rag_position.errors.DataFormatError` naming the
file, the line and the field.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import types
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from rag_position.errors import DataFormatError
from rag_position.passages import Passage, as_passage, check_text

DATA_ENV = "RAG_POSITION_DATA"
ORACLE_FILE = "nq-open-oracle-dev.jsonl.gz"
KV_75_FILE = "kv-retrieval-75_keys.jsonl.gz"
KV_140_FILE = "kv-retrieval-140_keys.jsonl.gz"

PathLike = str | os.PathLike[str]


def _empty_metadata() -> Mapping[str, Any]:
    return types.MappingProxyType({})


@dataclass(frozen=True)
class QAInstance:
    """One multi-document QA question with its passages, in prompt order.

    ``gold_index`` is the position of the gold passage (``isgold``), or ``None``
    when the record marks none. ``source`` and ``line`` (1-based) say where it was
    read; ``metadata`` holds the record's other keys (e.g. ``nq_annotated_gold``).

    Example:
        >>> docs = (Passage("Rome is in Italy.", title="Rome"), Passage("Paris is in France."))
        >>> inst = QAInstance("Where is Paris?", ("France",), docs, gold_index=1)
        >>> inst.gold.text, inst.k, inst.answers
        ('Paris is in France.', 2, ('France',))
    """

    question: str
    answers: tuple[str, ...]
    passages: tuple[Passage, ...]
    gold_index: int | None = None
    id: str | None = None
    source: str | None = None
    line: int | None = None
    metadata: Mapping[str, Any] = field(default_factory=_empty_metadata, hash=False)

    def __post_init__(self) -> None:
        if isinstance(self.answers, str):
            raise TypeError("`answers` must be a sequence of strings, not a single string")
        object.__setattr__(self, "answers", tuple(self.answers))
        object.__setattr__(self, "passages", tuple(self.passages))
        object.__setattr__(self, "metadata", types.MappingProxyType(dict(self.metadata)))
        if self.gold_index is not None and not 0 <= self.gold_index < len(self.passages):
            raise ValueError(
                f"gold_index {self.gold_index} is outside the {len(self.passages)} passages"
            )

    @property
    def gold(self) -> Passage | None:
        """The gold passage, if there is one."""
        return None if self.gold_index is None else self.passages[self.gold_index]

    @property
    def k(self) -> int:
        """Number of passages."""
        return len(self.passages)


@dataclass(frozen=True)
class KVInstance:
    """One key-value retrieval example: ``records[gold_index] == (key, value)``.

    Example:
        >>> kv = KVInstance((("k1", "v1"), ("k2", "v2")), key="k2", value="v2", gold_index=1)
        >>> kv.records[kv.gold_index]
        ('k2', 'v2')
    """

    records: tuple[tuple[str, str], ...]
    key: str
    value: str
    gold_index: int
    id: str | None = None
    source: str | None = None
    line: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "records", tuple((k, v) for k, v in self.records))
        if not 0 <= self.gold_index < len(self.records) or self.records[self.gold_index] != (
            self.key,
            self.value,
        ):
            raise ValueError(
                f"records[{self.gold_index}] is not the queried pair ({self.key!r}, {self.value!r})"
            )


def iter_jsonl(path: PathLike) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)`` for each non-blank line (1-based; gzip detected).

    Example::

        for line, record in iter_jsonl(default_data_dir() / ORACLE_FILE):
            line, record["question"], record["answers"]
    """
    name = str(path)
    with _open_text(path) as fin:
        line_number = 0
        while True:
            try:
                line = fin.readline()
            except (OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
                raise DataFormatError(
                    f"{name}: line {line_number + 1}: cannot read the file ({exc}); "
                    "is it a complete UTF-8 JSON-lines file (optionally gzipped)?"
                ) from exc
            if not line:
                return
            line_number += 1
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataFormatError(
                    f"{name}: line {line_number}: not valid JSON ({exc.msg} at column {exc.colno})"
                ) from exc
            except (ValueError, RecursionError) as exc:  # a huge integer, deep nesting
                raise DataFormatError(
                    f"{name}: line {line_number}: not JSON this library reads ({exc})"
                ) from None
            if not isinstance(obj, dict):
                raise DataFormatError(
                    f"{name}: line {line_number}: expected a JSON object, got {type(obj).__name__}"
                )
            yield line_number, obj


def read_jsonl(path: PathLike) -> list[dict[str, Any]]:
    """All objects of a JSON-lines file (``.gz`` or plain), blank lines skipped.

    Example::

        records = read_jsonl(default_data_dir() / KV_75_FILE)
        records[0]["key"], records[0]["value"], len(records[0]["ordered_kv_records"])
    """
    return [obj for _, obj in iter_jsonl(path)]


def load_qa(path: PathLike, *, limit: int | None = None) -> list[QAInstance]:
    """Read a multi-document QA file (oracle or ``gold_at_i``), at most ``limit`` records.

    Each record needs ``question`` (str), ``answers`` (non-empty list of str) and
    ``ctxs`` (non-empty list of objects with ``title`` and ``text``). The gold
    passage is the ``ctxs`` entry with ``isgold`` true (at most one).

    Example::

        instances = load_qa(default_data_dir() / ORACLE_FILE, limit=100)
        first = instances[0]
        first.question, first.answers, first.gold.title, first.k  # the oracle: k == 1
    """
    name = str(path)
    _check_limit(limit)
    instances: list[QAInstance] = []
    for line_number, record in iter_jsonl(path):
        if not instances:
            _check_format(record, name, line_number, expect="qa")
        if limit is not None and len(instances) >= limit:
            break
        instances.append(_qa_from_record(record, name, line_number))
    if not instances:
        raise DataFormatError(f"{name}: the file holds no records")
    return instances


def load_kv(path: PathLike, *, limit: int | None = None) -> list[KVInstance]:
    """Read a key-value retrieval file: ``ordered_kv_records``, ``key``, ``value`` a line.

    Example::

        examples = load_kv(default_data_dir() / KV_75_FILE, limit=20)
        first = examples[0]
        first.key, first.value, first.gold_index, len(first.records)  # 75 pairs
    """
    name = str(path)
    _check_limit(limit)
    instances: list[KVInstance] = []
    for line_number, record in iter_jsonl(path):
        if not instances:
            _check_format(record, name, line_number, expect="kv")
        if limit is not None and len(instances) >= limit:
            break
        instances.append(_kv_from_record(record, name, line_number))
    if not instances:
        raise DataFormatError(f"{name}: the file holds no records")
    return instances


def packaged_data_dir() -> Path:
    """The data files that ship inside the package (origin and licences in its README.md).

    Example:
        >>> [(packaged_data_dir() / name).is_file() for name in (ORACLE_FILE, KV_75_FILE)]
        [True, True]
    """
    return Path(__file__).resolve().parent / "files"


def default_data_dir() -> Path:
    """The folder the eval suite reads its data files from.

    ``$RAG_POSITION_DATA`` when set (a folder of your own files with the release's
    names); else :func:`packaged_data_dir`, the files shipped with the package.

    Example::

        folder = default_data_dir()  # or: RAG_POSITION_DATA=/data/litm python ...
        load_qa(folder / ORACLE_FILE)
    """
    env = os.environ.get(DATA_ENV)
    if env:
        path = Path(env).expanduser()
        if not path.is_dir():
            raise FileNotFoundError(f"${DATA_ENV} is {env!r}, which is not a folder")
        return path
    folder = packaged_data_dir()
    if not (folder / ORACLE_FILE).is_file():
        raise FileNotFoundError(
            f"the packaged data file {folder / ORACLE_FILE} is missing (a broken install?); "
            f"reinstall rag-position, or set ${DATA_ENV} to a folder that holds {ORACLE_FILE}"
        )
    return folder


# --- helpers -------------------------------------------------------------------------


def _check_limit(limit: int | None) -> None:
    if limit is not None and limit < 1:
        raise ValueError(f"`limit` must be at least 1 (or None for all records), got {limit}")


def _open_text(path: PathLike) -> IO[str]:
    if os.path.exists(path) and not os.path.isdir(path) and not os.path.isfile(path):
        raise DataFormatError(
            f"{path} is not a regular file (a device or a pipe): a data file is a JSON-lines "
            "file, optionally gzipped"
        )
    try:
        with open(path, "rb") as probe:
            magic = probe.read(2)
    except FileNotFoundError:
        raise FileNotFoundError(f"no data file at {path}") from None
    except IsADirectoryError:
        raise DataFormatError(
            f"{path} is a folder, not a data file (a JSON-lines file, optionally gzipped)"
        ) from None
    if magic == b"\x1f\x8b":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
    return open(path, encoding="utf-8")  # the caller closes it


def _check_format(record: Mapping[str, Any], name: str, line: int, *, expect: str) -> None:
    is_qa = "question" in record or "ctxs" in record
    is_kv = "ordered_kv_records" in record
    if expect == "qa" and not is_qa:
        hint = "it looks like a key-value retrieval file; use load_kv" if is_kv else ""
        raise DataFormatError(
            f"{name}: line {line}: not a multi-document QA file (expected the fields "
            f"'question', 'answers', 'ctxs'; found {sorted(record)}){'; ' + hint if hint else ''}"
        )
    if expect == "kv" and not is_kv:
        hint = "it looks like a QA file; use load_qa" if is_qa else ""
        raise DataFormatError(
            f"{name}: line {line}: not a key-value retrieval file (expected the fields "
            f"'ordered_kv_records', 'key', 'value'; found {sorted(record)})"
            f"{'; ' + hint if hint else ''}"
        )


def _field(
    record: Mapping[str, Any], key: str, kind: type, name: str, line: int, label: str
) -> Any:
    if key not in record:
        raise DataFormatError(f"{name}: line {line}: missing field '{label}'")
    value = record[key]
    if not isinstance(value, kind):
        raise DataFormatError(
            f"{name}: line {line}: field '{label}' must be {kind.__name__}, "
            f"got {type(value).__name__}"
        )
    if isinstance(value, str):
        _check_unicode(value, name, line, label)
    return value


def _check_unicode(value: str, name: str, line: int, label: str) -> None:
    """A text field must be valid Unicode (a JSON ``\\ud800`` escape decodes to a lone
    surrogate, which no model or file can encode)."""
    try:
        check_text(value, f"field '{label}'")
    except ValueError as exc:
        raise DataFormatError(f"{name}: line {line}: {exc}") from None


def _qa_from_record(record: Mapping[str, Any], name: str, line: int) -> QAInstance:
    question = _field(record, "question", str, name, line, "question")
    if not question.strip():
        raise DataFormatError(f"{name}: line {line}: field 'question' is empty")
    answers = _field(record, "answers", list, name, line, "answers")
    if not answers:
        raise DataFormatError(f"{name}: line {line}: field 'answers' is empty")
    for i, answer in enumerate(answers):
        if not isinstance(answer, str):
            raise DataFormatError(
                f"{name}: line {line}: field 'answers[{i}]' must be str, "
                f"got {type(answer).__name__}"
            )
        _check_unicode(answer, name, line, f"answers[{i}]")
    ctxs = _field(record, "ctxs", list, name, line, "ctxs")
    if not ctxs:
        raise DataFormatError(f"{name}: line {line}: field 'ctxs' is empty")
    passages: list[Passage] = []
    gold: list[int] = []
    for i, ctx in enumerate(ctxs):
        if not isinstance(ctx, dict):
            raise DataFormatError(
                f"{name}: line {line}: field 'ctxs[{i}]' must be an object, "
                f"got {type(ctx).__name__}"
            )
        _field(ctx, "title", str, name, line, f"ctxs[{i}].title")
        _field(ctx, "text", str, name, line, f"ctxs[{i}].text")
        try:
            passages.append(as_passage(ctx))
        except (TypeError, ValueError) as exc:
            raise DataFormatError(f"{name}: line {line}: field 'ctxs[{i}]': {exc}") from exc
        if ctx.get("isgold") is True:
            gold.append(i)
            if not ctx["text"].strip():
                raise DataFormatError(
                    f"{name}: line {line}: field 'ctxs[{i}].text' is empty, and it is the gold "
                    "passage (isgold): no answer can be read from it"
                )
    if len(gold) > 1:
        raise DataFormatError(
            f"{name}: line {line}: field 'ctxs[].isgold' is true for several passages {gold}"
        )
    raw_id = record.get("id")
    extra = {k: v for k, v in record.items() if k not in {"question", "answers", "ctxs", "id"}}
    return QAInstance(
        question=question,
        answers=tuple(answers),
        passages=tuple(passages),
        gold_index=gold[0] if gold else None,
        id=str(raw_id) if raw_id is not None else f"{Path(name).name}:{line}",
        source=name,
        line=line,
        metadata=extra,
    )


def _kv_from_record(record: Mapping[str, Any], name: str, line: int) -> KVInstance:
    raw = _field(record, "ordered_kv_records", list, name, line, "ordered_kv_records")
    key = _field(record, "key", str, name, line, "key")
    value = _field(record, "value", str, name, line, "value")
    if len(raw) < 2:
        raise DataFormatError(
            f"{name}: line {line}: field 'ordered_kv_records' needs at least 2 records"
        )
    records: list[tuple[str, str]] = []
    for i, pair in enumerate(raw):
        if not (
            isinstance(pair, list) and len(pair) == 2 and all(isinstance(s, str) for s in pair)
        ):
            raise DataFormatError(
                f"{name}: line {line}: field 'ordered_kv_records[{i}]' must be a [key, value] "
                f"pair of strings, got {pair!r}"
            )
        _check_unicode(pair[0], name, line, f"ordered_kv_records[{i}][0]")
        _check_unicode(pair[1], name, line, f"ordered_kv_records[{i}][1]")
        records.append((pair[0], pair[1]))
    try:
        gold_index = records.index((key, value))
    except ValueError:
        raise DataFormatError(
            f"{name}: line {line}: field 'key'/'value': the pair ({key!r}, {value!r}) is not "
            "among 'ordered_kv_records'"
        ) from None
    return KVInstance(
        records=tuple(records),
        key=key,
        value=value,
        gold_index=gold_index,
        id=f"{Path(name).name}:{line}",
        source=name,
        line=line,
    )
