"""Shared helpers of the generation strategies (FACT, recite-then-solve, medoid voting).

Text alignment: locate what a model copied (or claims to have copied) in the source
text, exactly first, then fuzzily at sentence level (``difflib`` ratio over
whitespace- and case-normalised text; a fuzzy match must carry the same numbers as
the candidate: wording may differ, a number may not, so "founded in 1989" is never
found at "founded in 1998", nor a miscopied value at its neighbour's line). Also the
context resolution, the metered
generate call and :class:`StrategyError`, which all three strategies share.
"""

from __future__ import annotations

import re
import time
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Any, TypeVar

from rag_position.cost import Cost, spent_by, spent_or_sent
from rag_position.errors import BackendError, RagPositionError
from rag_position.models.protocols import Generator, Metered, Span
from rag_position.passages import Passage, as_passages
from rag_position.prompts import format_documents

T = TypeVar("T")

FUZZY_THRESHOLD = 0.8
"""Default ``difflib`` ratio a sentence needs to count as the same text as a candidate."""

_HEADER = re.compile(r"Document \[\d+\]\(Title: [^)\n]*\) ?")
_EDGE = " \t\r_"  # whitespace and mask filler are not part of a sentence
# A sentence ends at a run of [.!?] and the closing quotes and brackets after it, before
# whitespace or the end (:func:`_sentence_ends`). Without a lookahead the run pattern never
# backtracks; r"[.!?]+[\"')\]]*(?=\s|$)" retried a long run of punctuation from each of
# its positions, quadratic on retrieved text such as "." * 40_000 + "7".
_STOP_RUN = re.compile(r"[.!?]+[\"')\]]*")
_CLOSER_CHARS = "\"')]"
_STOP_CHARS = frozenset(".!?")
_SPACE = re.compile(r"\s")
_WORD = re.compile(r"\w")
_NON_WORD = re.compile(r"\W")
_ALNUM = re.compile(r"[^\W_]")
_NUMBER = re.compile(r"\d+")


class StrategyError(RagPositionError, RuntimeError):
    """A model call failed part way through a strategy; ``trace`` holds what was done so far.

    The original exception is chained (``__cause__``).

    Example::

        try:
            result = fact("Who wrote Hamlet?", docs, load_model("embedded"))
        except StrategyError as err:
            err.trace.iterations, err.__cause__  # the passes done so far, the original error
    """

    def __init__(self, message: str, *, trace: Any) -> None:
        super().__init__(message)
        self.trace = trace


def resolve_context(
    passages_or_context: str | Sequence[Passage | str | Mapping[str, Any]],
) -> tuple[str, list[Passage] | None]:
    """The context string and, when passages were given, the passages.

    A plain string is the context as it is; a sequence of passages becomes the
    ``Document [i](Title: t) text`` block of the QA prompt. An empty or blank
    context raises ``ValueError`` (there is nothing to retrieve from).
    """
    if isinstance(passages_or_context, str):
        if not passages_or_context.strip():
            raise ValueError("the context is empty: there is nothing to retrieve from")
        return passages_or_context, None
    docs = as_passages(passages_or_context)
    if not docs or not any(p.text.strip() for p in docs):
        raise ValueError("no passages with text were given: there is nothing to retrieve from")
    return format_documents(docs), docs


class Meter:
    """Counts what a strategy spends on ``generator``.

    When the generator keeps ``usage`` (every backend does), the cost is that of the
    calls made through :meth:`generate` and :meth:`run` (so a custom callable that
    calls the same generator counts too), metered per call
    (:func:`rag_position.cost.spent_by`): another thread's calls on a shared model do
    not count. Otherwise it is the number of prompts sent and the wall time since the
    meter was made (:func:`rag_position.cost.spent_or_sent`).
    """

    def __init__(self, generator: Generator) -> None:
        self.generator = generator
        self._metered = isinstance(generator, Metered)
        self._spent: Cost | None = None
        self._start = time.perf_counter()
        self.calls = 0

    def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)``, with the model calls it makes counted."""
        spend = None
        try:
            with spent_by(self.generator) as spend:
                return fn(*args, **kwargs)
        finally:  # after the block has closed, so that `spend.cost` is known
            if spend is not None and spend.cost is not None:
                self._spent = spend.cost if self._spent is None else self._spent + spend.cost

    def generate(self, prompts: list[str], **kwargs: Any) -> list[str]:
        outputs = self.run(self.generator.generate, prompts, **kwargs)
        self.calls += len(prompts)
        if len(outputs) != len(prompts):
            raise BackendError(
                f"the generator returned {len(outputs)} texts for {len(prompts)} prompts"
            )
        return [str(o) for o in outputs]

    def cost(self) -> Cost:
        spent = (self._spent or Cost()) if self._metered else None
        return spent_or_sent(spent, self.calls, time.perf_counter() - self._start)


def normalize(text: str) -> str:
    """Lower case, whitespace collapsed, surrounding quotes and spaces stripped."""
    return " ".join(text.split()).strip(" \"'`").lower()


def similarity(a: str, b: str) -> float:
    """``difflib`` ratio of the normalised texts (1.0 for equal texts)."""
    na, nb = normalize(a), normalize(b)
    if na == nb:
        return 1.0
    return SequenceMatcher(None, na, nb, autojunk=False).ratio()


def sentence_spans(text: str) -> list[Span]:
    """Half-open spans of the sentences of ``text``.

    Sentences end at ``.``, ``!`` or ``?`` before whitespace, and at line ends. The
    ``Document [i](Title: t)`` header of a formatted passage is not part of a sentence,
    nor are surrounding whitespace and mask filler; spans with no letter or digit are skipped.
    """
    spans: list[Span] = []
    offset = 0
    for line in text.split("\n"):
        header = _HEADER.match(line)
        start = header.end() if header else 0
        cuts = _sentence_ends(line, start)
        for end in [*cuts, len(line)]:
            piece = line[start:end]
            left = len(piece) - len(piece.lstrip(_EDGE))
            right = len(piece.rstrip(_EDGE))
            if right > left and _ALNUM.search(piece):
                spans.append((offset + start + left, offset + start + right))
            start = end
        offset += len(line) + 1
    return spans


def _sentence_ends(line: str, start: int = 0) -> list[int]:
    r"""Where the sentences of ``line[start:]`` end: after a run of ``.``, ``!`` or ``?``
    and the closing quotes and brackets that follow it, before whitespace or the end.

    The match ends of ``re.compile(r"[.!?]+[\"')\]]*(?=\s|$)").finditer(line, start)``,
    in linear time: each run is matched once, whole (a match of that pattern cannot
    start inside a run, nor end before its last character).
    """
    ends: list[int] = []
    for run in _STOP_RUN.finditer(line, start):
        end = run.end()
        if end == len(line) or _SPACE.match(line, end):
            ends.append(end)
    return ends


def locate(candidate: str, text: str, *, threshold: float = FUZZY_THRESHOLD) -> Span | None:
    """Where ``candidate`` is in ``text``, or ``None`` (a hallucination).

    Exact first (the first occurrence on word boundaries, one inside a sentence before
    one in a ``Document [i](Title: t)`` header); an exact fragment of a sentence grows
    to the whole sentence(s) it touches. Else the sentence with the
    highest ``difflib`` ratio, if it reaches ``threshold``, among the sentences that
    hold the candidate's numbers (digit runs, as a multiset) and no others. A candidate
    with no letter or digit is never found.

    Example:
        >>> text = "Acme was founded in 1989. Its logo is a red fox."
        >>> locate("its logo is a red box", text), locate("Acme was founded in 1998.", text)
        ((26, 48), None)
    """
    cand = candidate.strip()
    if not _ALNUM.search(cand):
        return None
    sentences = sentence_spans(text)
    fallback: Span | None = None
    # the spans are disjoint and in order: the ones a match touches are a slice, found
    # by bisection (a scan of every sentence per match was quadratic on a header that
    # repeats the candidate)
    starts = [s[0] for s in sentences]
    ends = [s[1] for s in sentences]
    for lo, hi in _occurrences(cand, text):
        first, stop = bisect_right(ends, lo), bisect_left(starts, hi)
        if first < stop:  # prefer a match in a sentence to one in a document header
            return min(lo, sentences[first][0]), max(hi, sentences[stop - 1][1])
        fallback = fallback or (lo, hi)
    if fallback is not None:
        return fallback
    target = normalize(cand)
    numbers = sorted(_NUMBER.findall(target))
    best: tuple[float, Span] | None = None
    for span in sentences:
        sent = normalize(text[span[0] : span[1]])
        if sorted(_NUMBER.findall(sent)) != numbers:
            continue
        matcher = SequenceMatcher(None, target, sent, autojunk=False)
        if matcher.real_quick_ratio() < threshold or matcher.quick_ratio() < threshold:
            continue
        ratio = matcher.ratio()
        if ratio >= threshold and (best is None or ratio > best[0]):
            best = (ratio, span)
    return None if best is None else best[1]


def _occurrences(cand: str, text: str) -> Iterator[Span]:
    r"""The spans of ``cand`` in ``text``, left to right and not overlapping, on word
    boundaries where ``cand`` starts or ends with a letter or digit.

    What ``re.finditer`` gives for ``(?<!\w)`` + ``re.escape(cand)`` + ``(?!\w)``, by
    ``str.find``: no pattern is compiled from the text a model wrote. After an
    occurrence inside a word the search goes on past the next non-word character (no
    match can start before it), so a long word holding ``cand`` everywhere is one scan.
    """
    check_start, check_end = cand[0].isalnum(), cand[-1].isalnum()
    pos = 0
    while (lo := text.find(cand, pos)) >= 0:
        hi = lo + len(cand)
        if check_start and lo > 0 and _WORD.match(text, lo - 1):
            gap = _NON_WORD.search(text, lo)
            if gap is None:
                return
            pos = gap.end()
        elif check_end and _WORD.match(text, hi):
            pos = lo + 1
        else:
            yield lo, hi
            pos = hi


_BULLET = re.compile(r"^\s*(?:[-*•]+\s*)?(?:\(?\d{1,3}[.)]\s+|\(?\d{1,3}\)\s*)?")
_PREAMBLE = re.compile(
    r"^(?:retrieved sentences|relevant sentences|here are|sentences)\b.*:$", re.I
)


def _is_terminal(item: str) -> bool:
    r"""Whether ``item`` ends with ``.``, ``!`` or ``?``, then any closing quotes and brackets.

    ``re.compile(r"[.!?]+[\"')\]]*$").search(item)`` in linear time (that pattern
    retried a long run of punctuation from each of its positions: quadratic); as with
    ``$``, a final newline is allowed.
    """
    ends = (len(item), len(item) - 1) if item.endswith("\n") else (len(item),)
    for end in ends:
        body = item[:end].rstrip(_CLOSER_CHARS)
        if body and body[-1] in _STOP_CHARS:
            return True
    return False


def parse_bullets(text: str) -> list[str]:
    """The items of a ``-`` bulleted list a model wrote, robust to a small model's output.

    Bullet markers ``-``, ``*``, ``•``, numbering (``1.``, ``2)``) and both together
    (``- 1)``) are stripped; a lone ``-`` (the "no results" answer), blank lines and
    an introducing line ending in ``:`` give nothing; repeated items are kept once.
    Output without bullets gives one item per line. When the last item lacks the final
    punctuation every earlier item has, it was cut off by the token limit and is dropped.

    Example:
        >>> parse_bullets("Relevant sentences:\\n- Paris is in France.\\n- 2) Rome is in Italy.")
        ['Paris is in France.', 'Rome is in Italy.']
        >>> parse_bullets("-")
        []
    """
    items: list[str] = []
    seen: set[str] = set()
    for line in text.splitlines():
        item = _BULLET.sub("", line, count=1).strip().strip("\"'`").strip()
        if not _ALNUM.search(item) or _PREAMBLE.match(item):
            continue
        key = normalize(item)
        if key not in seen:
            seen.add(key)
            items.append(item)
    complete = all(_is_terminal(i) for i in items[:-1])
    cut_off = not _is_terminal(items[-1]) and not text.endswith("\n") if items else False
    if len(items) >= 2 and complete and cut_off:
        items.pop()
    return items


MASK_CHAR = "_"
"""The neutral filler :func:`mask_facts` writes over a located fact (same length)."""


@dataclass(frozen=True, kw_only=True)
class Rewritten:
    """A rewrite step: the new context, and each candidate's span in the old one (``None``
    where the candidate is not in the context).

    Example:
        >>> candidates = ["Rome is in Italy.", "Oslo is in Norway."]
        >>> step = remove_facts(candidates, "Paris. Rome is in Italy.")
        >>> step.context, step.spans
        ('Paris. ', [(7, 24), None])
    """

    context: str
    spans: list[Span | None]


def remove_facts(
    candidates: Sequence[str], context: str, *, threshold: float = FUZZY_THRESHOLD
) -> Rewritten:
    """Locate each candidate (:func:`locate`) and cut exactly the located spans out.

    Example:
        >>> context = "Paris is in France. Rome is in Italy. Oslo is in Norway."
        >>> remove_facts(["Rome is in Italy."], context).context
        'Paris is in France.  Oslo is in Norway.'
    """
    return rewrite_facts(candidates, context, mask=False, threshold=threshold)


def mask_facts(
    candidates: Sequence[str], context: str, *, threshold: float = FUZZY_THRESHOLD
) -> Rewritten:
    """As :func:`remove_facts`, but overwrite each span with :data:`MASK_CHAR` filler of
    the same length, so the context keeps its length and layout.

    Example:
        >>> context = "Paris is in France. Rome is in Italy."
        >>> step = mask_facts(["Rome is in Italy", "Madrid is in Spain."], context)
        >>> step.context, step.spans
        ('Paris is in France. _________________', [(20, 37), None])
    """
    return rewrite_facts(candidates, context, mask=True, threshold=threshold)


def rewrite_facts(
    candidates: Sequence[str], context: str, *, mask: bool, threshold: float = FUZZY_THRESHOLD
) -> Rewritten:
    """Locate each candidate; cut the merged spans out, or mask them (``mask=True``)."""
    spans = [locate(c, context, threshold=threshold) for c in candidates]
    merged: list[list[int]] = []
    for lo, hi in sorted({s for s in spans if s is not None}):
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    out = context
    for lo, hi in reversed(merged):
        out = out[:lo] + (MASK_CHAR * (hi - lo) if mask else "") + out[hi:]
    return Rewritten(context=out, spans=spans)
