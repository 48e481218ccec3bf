"""Passages: the unit every strategy reorders, one retrieved document with its title.

:class:`Passage` is immutable; :func:`as_passage` accepts what users already hold (a
plain string, or a dict in the "Lost in the Middle" ``ctxs`` format) and never
mutates it.
"""

from __future__ import annotations

import re
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

EMBEDDING_TEXT = "{title}\n{text}"
"""How a passage is embedded (just ``{text}`` when the title is empty); questions are
embedded as they are."""

_KNOWN_KEYS = frozenset({"text", "title", "id", "score"})
_SURROGATE = re.compile("[\ud800-\udfff]")


def _empty_metadata() -> Mapping[str, Any]:
    return types.MappingProxyType({})


def check_text(text: str, what: str) -> str:
    """``text`` itself when it is a valid Unicode string, else a ``ValueError`` naming it.

    A Python ``str`` can hold a lone surrogate (``"\\ud800"``, e.g. from a JSON
    ``"\\ud800"`` escape or ``surrogateescape`` decoding), which no tokenizer, UTF-8
    encoder or server accepts; this names ``what`` held it and where, before a model
    fails on it with an unrelated message. A non-string is a ``TypeError``.

    Example:
        >>> check_text("Who wrote Hamlet?", "`question`")
        'Who wrote Hamlet?'
        >>> check_text("what is \\ud800?", "`question`")
        Traceback (most recent call last):
        ...
        ValueError: `question` is not valid Unicode: it holds a lone surrogate '\\ud800' at character 8 ('what is \\ud800?'); a str must hold only encodable characters (fix how the text was decoded)
    """  # noqa: E501
    if not isinstance(text, str):
        raise TypeError(f"{what} must be a str, got {type(text).__name__}")
    if text.isascii():
        return text
    found = _SURROGATE.search(text)
    if found is None:
        return text
    at = found.start()
    near = text[max(0, at - 30) : at + 30]
    raise ValueError(
        f"{what} is not valid Unicode: it holds a lone surrogate {found.group()!r} at "
        f"character {at} ({near!r}); a str must hold only encodable characters (fix how "
        "the text was decoded)"
    )


def check_passage_texts(passages: Iterable[Passage]) -> None:
    """Every passage's text and title must be valid Unicode (:func:`check_text`)."""
    for i, passage in enumerate(passages):
        check_text(passage.text, f"passage {i}'s text")
        check_text(passage.title, f"passage {i}'s title")


@dataclass(frozen=True)
class Passage:
    """One retrieved passage.

    ``metadata`` holds everything else a record carried (``hasanswer``, ``isgold``,
    ``original_retrieval_index``, ...) as a read-only mapping; it takes part in
    equality but not in the hash, so passages can live in sets.

    Example:
        >>> Passage("Paris is the capital of France.", title="Paris").title
        'Paris'
    """

    text: str
    title: str = ""
    id: str | None = None
    score: float | None = None
    metadata: Mapping[str, Any] = field(default_factory=_empty_metadata, hash=False)

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError(f"Passage.text must be a str, got {type(self.text).__name__}")
        if not isinstance(self.title, str):
            raise TypeError(f"Passage.title must be a str, got {type(self.title).__name__}")
        # A private copy behind a read-only view: later edits to the caller's dict
        # cannot reach the passage, and the passage cannot be edited through it.
        object.__setattr__(self, "metadata", types.MappingProxyType(dict(self.metadata)))

    def __reduce__(self) -> tuple[Any, ...]:
        # mappingproxy cannot be pickled: rebuild from a plain dict (pickle, deepcopy).
        return (Passage, (self.text, self.title, self.id, self.score, dict(self.metadata)))

    def to_dict(self) -> dict[str, Any]:
        """The passage as a ``ctxs`` record (the inverse of :func:`as_passage`)."""
        record: dict[str, Any] = {"title": self.title, "text": self.text}
        record.update(self.metadata)
        if self.id is not None:
            record["id"] = self.id
        if self.score is not None:
            record["score"] = self.score
        return record


def as_passage(x: Passage | str | Mapping[str, Any]) -> Passage:
    """Convert ``x`` to a :class:`Passage`.

    A string becomes ``Passage(text=x)``. A mapping needs ``"text"``; ``"title"``
    (default ``""``), ``"id"`` (made a string) and ``"score"`` (made a float, as the
    original release does) become fields, every other key goes to ``metadata``.
    The input is not modified.
    """
    if isinstance(x, Passage):
        return x
    if isinstance(x, str):
        return Passage(text=x)
    if isinstance(x, Mapping):
        if "text" not in x:
            raise ValueError(
                f"a passage mapping needs a 'text' key; got keys {sorted(map(str, x))}"
            )
        text = x["text"]
        title = x.get("title") or ""
        if not isinstance(text, str) or not isinstance(title, str):
            raise TypeError(
                "a passage mapping's 'text' and 'title' must be strings, got "
                f"{type(text).__name__} and {type(title).__name__}"
            )
        raw_id = x.get("id")
        raw_score = x.get("score")
        try:
            score = None if raw_score is None else float(raw_score)
        except (TypeError, ValueError):
            raise ValueError(f"a passage's 'score' must be a number, got {raw_score!r}") from None
        metadata = {k: v for k, v in x.items() if k not in _KNOWN_KEYS}
        return Passage(
            text=text,
            title=title,
            id=None if raw_id is None else str(raw_id),
            score=score,
            metadata=metadata,
        )
    raise TypeError(f"cannot make a Passage from {type(x).__name__}; pass a Passage, str or dict")


def as_passages(seq: Iterable[Passage | str | Mapping[str, Any]]) -> list[Passage]:
    """:func:`as_passage` over a sequence (a bare string is refused, not split into letters)."""
    if isinstance(seq, (str, bytes, Mapping)):
        raise TypeError(
            f"expected a sequence of passages, got a single {type(seq).__name__}; wrap it in a list"
        )
    passages = [as_passage(x) for x in seq]
    check_passage_texts(passages)
    return passages


def embedding_text(passage: Passage) -> str:
    """What is embedded for a passage: :data:`EMBEDDING_TEXT`, or its text when untitled.

    Example:
        >>> embedding_text(Passage("Paris is in France.", title="Paris"))
        'Paris\\nParis is in France.'
        >>> embedding_text(Passage("x"))
        'x'
    """
    return (
        EMBEDDING_TEXT.format(title=passage.title, text=passage.text)
        if passage.title
        else passage.text
    )
