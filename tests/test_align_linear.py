"""Text alignment is linear on untrusted text and matches the old code (copied below), whose
patterns retried a run of punctuation from each position (``"." * 40_000 + "7"`` kept FACT
busy for half a minute)."""

from __future__ import annotations

import re
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from difflib import SequenceMatcher
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_strategies_generation import VOCAB, Scripted, WordEmbedder

from rag_position.models.protocols import Span
from rag_position.passages import Passage
from rag_position.prompts import format_documents
from rag_position.strategies._align import (
    _EDGE,
    _HEADER,
    FUZZY_THRESHOLD,
    _is_terminal,
    _occurrences,
    _sentence_ends,
    locate,
    mask_facts,
    normalize,
    parse_bullets,
    remove_facts,
    sentence_spans,
)
from rag_position.strategies._fact import embedding_retrieve, fact, needle_retrieve

# --- the old patterns and the functions that used them (the reference) ---------------

OLD_SENTENCE_END = re.compile(r"[.!?]+[\"')\]]*(?=\s|$)")
OLD_TERMINAL = re.compile(r"[.!?]+[\"')\]]*$")
_ALNUM = re.compile(r"[^\W_]")
_NUMBER = re.compile(r"\d+")


def old_sentence_spans(text: str) -> list[Span]:
    spans: list[Span] = []
    offset = 0
    for line in text.split("\n"):
        header = _HEADER.match(line)
        start = header.end() if header else 0
        cuts = [m.end() for m in OLD_SENTENCE_END.finditer(line, start)]
        for end in [*cuts, len(line)]:
            piece = line[start:end]
            left = len(piece) - len(piece.lstrip(_EDGE))
            right = len(piece.rstrip(_EDGE))
            if right > left and _ALNUM.search(piece):
                spans.append((offset + start + left, offset + start + right))
            start = end
        offset += len(line) + 1
    return spans


def old_locate(candidate: str, text: str, threshold: float = FUZZY_THRESHOLD) -> Span | None:
    cand = candidate.strip()
    if not _ALNUM.search(cand):
        return None
    sentences = old_sentence_spans(text)
    pattern = (r"(?<!\w)" if cand[0].isalnum() else "") + re.escape(cand)
    pattern += r"(?!\w)" if cand[-1].isalnum() else ""
    fallback: Span | None = None
    for match in re.finditer(pattern, text):
        lo, hi = match.span()
        touched = [s for s in sentences if s[0] < hi and lo < s[1]]
        if touched:  # prefer a match in a sentence to one in a document header
            return min(lo, touched[0][0]), max(hi, touched[-1][1])
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


# --- equivalence ------------------------------------------------------------------------

ALPHABET = ".!?\"')] a7\n"
# plus the rest of the edge set, other whitespace (\s is Unicode whitespace), a word
# character that is not alphanumeric, and what a document header is made of
WIDE_ALPHABET = ALPHABET + "\t\r_\x0b\x1c\u00a0\u2028([D#:-é3"

ORDINARY = [
    "",
    "Paris is the capital of France. It has many museums.",
    "Is it? Yes! It is... (really.) \"Quoted.\" 'Single.' [Bracketed.]",
    'He said "Stop." Then he left.',
    "Version 3.5 is out. e.g. this. U.S.A. is big.",
    "Ends with a question?",
    "No final punctuation",
    "Trailing spaces.   ",
    "Tabs.\tand\rreturns.\x0bvertical tab.\x1cfile sep.\u00a0nbsp.\u2028line sep.",
    "Document [1](Title: A. B.) One here. Two there!\n____ Three.\n_____",
    "Document [12](Title: x) ",
    "...",
    "!?!?",
    ".)",
    ".).)",
    "a.)b. c!) d?'\" e.]]]",
    "'.'",
    "a.\n",
    "a.\n\n",
    "done.)\n",
    "x.\ny!\nz?",
    "- Paris is big.\n- Berlin is big.\n- The Nile is a riv",
    "tricky .. ?! end",
    ". 7",
    "....7",
    "!?x",
]


def _matches_the_old_patterns(text: str, starts: Iterable[int]) -> None:
    for start in starts:
        old = [m.end() for m in OLD_SENTENCE_END.finditer(text, start)]
        assert _sentence_ends(text, start) == old, (text, start)
    assert _is_terminal(text) == bool(OLD_TERMINAL.search(text))
    assert sentence_spans(text) == old_sentence_spans(text)


@pytest.mark.parametrize("text", ORDINARY)
def test_sentence_ends_and_terminal_match_the_old_patterns(text: str) -> None:
    _matches_the_old_patterns(text, range(len(text) + 1))


@settings(max_examples=2000, deadline=None)
@given(
    text=st.one_of(st.text(alphabet=ALPHABET, max_size=40), st.text(WIDE_ALPHABET, max_size=60)),
    data=st.data(),
)
def test_sentence_ends_and_spans_match_on_random_punctuation(text: str, data: Any) -> None:
    _matches_the_old_patterns(text, [data.draw(st.integers(0, len(text)), label="start")])
    for line in text.split("\n"):
        assert _sentence_ends(line) == [m.end() for m in OLD_SENTENCE_END.finditer(line)]


@settings(max_examples=500, deadline=None)
@given(
    titles=st.lists(st.text(alphabet="ab7 .!", max_size=8), min_size=1, max_size=4),
    texts=st.lists(st.text(alphabet='ab7 .!?)"_\n', max_size=30), min_size=1, max_size=4),
    other=st.text(alphabet="ab7 .!?", max_size=20),
    data=st.data(),
)
def test_locate_matches_the_old_code(
    titles: list[str], texts: list[str], other: str, data: Any
) -> None:
    """A candidate cut from the context, or made up, is found where the old code found it."""
    docs = [Passage(t, title=title) for t, title in zip(texts, titles, strict=False)]
    context = format_documents(docs)
    lo = data.draw(st.integers(0, len(context)), label="lo")
    hi = data.draw(st.integers(lo, min(len(context), lo + 25)), label="hi")
    for candidate in (context[lo:hi], other):
        found = locate(candidate, context)
        assert found == old_locate(candidate, context)
        assert remove_facts([candidate], context).spans == [found]


@settings(max_examples=1000, deadline=None)
@given(text=st.text(alphabet="ab_. é", max_size=40), data=st.data())
def test_occurrences_match_the_old_pattern(text: str, data: Any) -> None:
    lo = data.draw(st.integers(0, len(text)), label="lo")
    hi = data.draw(st.integers(lo, len(text)), label="hi")
    cand = text[lo:hi].strip() or "a"
    pattern = (r"(?<!\w)" if cand[0].isalnum() else "") + re.escape(cand)
    pattern += r"(?!\w)" if cand[-1].isalnum() else ""
    assert list(_occurrences(cand, text)) == [m.span() for m in re.finditer(pattern, text)]


# --- adversarial input: 100,000 characters each, linear (not a minute or more) ---------

N = 100_000
LIMIT = 10.0  # s: the old code took minutes, the new well under 1 (which failed under load)
ABORT_AFTER = 30.0  # a quadratic regression fails here instead of running for minutes

ADVERSARIAL = {
    "dots-then-digit": "." * N + "7",
    "bang-question-then-letter": "!?" * (N // 2) + "x",
    "dot-paren-then-letter": ".)" * (N // 2) + "a",
    "dots-then-closers": "." * (N // 2) + ")" * (N // 2) + "a",
    "mixed-then-bracket": "?!." * (N // 3) + "]b",
    "dots-quotes-interleaved": ('."' * 3 + "." * 94) * (N // 100) + "z",
}
SHAPES = pytest.mark.parametrize("adversarial", ADVERSARIAL.values(), ids=ADVERSARIAL.keys())


@contextmanager
def _abort_after(seconds: float) -> Iterator[None]:
    """Raise ``TimeoutError`` in the block after ``seconds`` where SIGALRM exists."""
    if (
        not hasattr(signal, "setitimer")
        or threading.current_thread() is not threading.main_thread()
    ):
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise TimeoutError(f"still running after {seconds:.0f} s: quadratic")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[float, Any]:
    """Seconds ``fn(*args, **kwargs)`` took, and what it returned."""
    with _abort_after(ABORT_AFTER):
        start = time.perf_counter()
        result = fn(*args, **kwargs)
        return time.perf_counter() - start, result


@SHAPES
def test_alignment_functions_are_linear(adversarial: str) -> None:
    context = format_documents([Passage("Paris is big. " + adversarial, title="A")])
    cases: list[tuple[str, Callable[[], Any]]] = [
        ("_sentence_ends", lambda: _sentence_ends(adversarial)),
        ("_is_terminal", lambda: _is_terminal(adversarial)),
        ("sentence_spans", lambda: sentence_spans(adversarial)),
        ("sentence_spans of passages", lambda: sentence_spans(context)),
        ("locate", lambda: locate(adversarial, context)),
        ("locate a fragment", lambda: locate(adversarial[: N // 2] + "!", context)),
        ("locate nothing", lambda: locate("Rome is big.", context)),
        ("remove_facts", lambda: remove_facts(["Paris is big.", adversarial], context)),
        ("mask_facts", lambda: mask_facts(["Paris is big.", adversarial], context)),
        (
            "parse_bullets",
            lambda: parse_bullets(f"- {adversarial}\n- Paris is big.\n- {adversarial}"),
        ),
        ("parse_bullets, no bullets", lambda: parse_bullets(adversarial)),
    ]
    for name, call in cases:
        seconds, _ = timed(call)
        assert seconds < LIMIT, f"{name} took {seconds:.2f} s on {len(adversarial)} characters"
    assert sentence_spans(adversarial) == (
        [(0, len(adversarial))] if _ALNUM.search(adversarial) else []
    )
    found = locate(adversarial, context)
    assert found is not None and context[slice(*found)].endswith(adversarial)


def test_a_candidate_inside_long_words_is_linear() -> None:
    """Occurrences failing the word boundary are skipped past the next non-word character."""
    for text in ("a" * N, "ab" * (N // 2) + " ab"):
        seconds, found = timed(locate, "ab" * 500, text)
        assert seconds < LIMIT and found is None


def test_a_header_repeating_the_candidate_is_linear() -> None:
    """A header match finds the sentences it touches by bisection, not a scan of each."""
    context = format_documents([Passage("y. " * 20_000, title="x " * 20_000)])
    seconds, found = timed(locate, "x", context)
    assert seconds < LIMIT
    assert found is not None and context[slice(*found)] == "x"
    small = format_documents([Passage("y. " * 200, title="x " * 200)])
    assert locate("x", small) == old_locate("x", small) == (20, 21)


# --- the whole of FACT on adversarial passages -------------------------------------------


FACTS = ("Paris is the capital of France.", "Berlin is the capital of Germany.")


def _docs(adversarial: str) -> list[Passage]:
    return [
        Passage(f"{FACTS[0]} {adversarial} It has many museums.", title="Paris"),
        Passage(f"{FACTS[1]} It is large.", title="Berlin"),
    ]


def _retrieval_reply(adversarial: str) -> Callable[[str], str]:
    """Each pass: the facts left, the adversarial text (whole, then cut), a made-up fact."""

    def reply(prompt: str) -> str:
        if not prompt.startswith("Please retrieve"):
            return "Paris and Berlin."
        context = prompt.split("The following are given documents.\n\n")[1]
        found = [f for f in (*FACTS, adversarial) if f in context]
        items = [*found, adversarial[: N // 2], "Rome is the capital of Italy."]
        return "\n".join(f"- {item}" for item in items) if found else "-"

    return reply


@SHAPES
@pytest.mark.parametrize("rewrite", ["remove", "mask"])
def test_fact_is_linear_on_adversarial_passages(adversarial: str, rewrite: str) -> None:
    """FACT's own retrieval: prompt, bullets, alignment, rewrite, loop and answer prompt."""
    gen = Scripted(_retrieval_reply(adversarial))
    seconds, result = timed(
        fact,
        "Which cities are capitals?",
        _docs(adversarial),
        gen,
        max_iterations=4,
        rewrite=rewrite,
    )
    assert seconds < LIMIT, f"fact took {seconds:.2f} s"
    assert result.trace.stopped_because == "nothing_new"
    assert result.facts[0] == FACTS[0] and FACTS[1] in result.facts
    assert any(adversarial in f for f in result.facts)
    assert result.answer == "Paris and Berlin."


@SHAPES
def test_fact_embedding_and_needle_retrieve_are_linear(adversarial: str) -> None:
    docs = _docs(adversarial)
    seconds, result = timed(
        fact,
        "Which cities are capitals?",
        docs,
        Scripted(lambda prompt: "Paris."),
        retrieve=embedding_retrieve(WordEmbedder(VOCAB), top_k=2),
    )
    assert seconds < LIMIT, f"fact with embedding_retrieve took {seconds:.2f} s"
    assert result.facts and result.answer == "Paris."

    replies = iter(["7 and 12", "none", "none"])
    gen = Scripted(lambda prompt: next(replies))
    seconds, result = timed(
        fact, "cat", docs, gen, retrieve=needle_retrieve(gen, "cat"), answer=False
    )
    assert seconds < LIMIT, f"fact with needle_retrieve took {seconds:.2f} s"
    assert result.trace.stopped_because == "nothing_new"
