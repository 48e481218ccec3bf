"""Synthetic long-context instances: RULER-style multi-value needles and VarSum.

Both are built from a seed alone plus filler text (essay-like passages, e.g. the
Wikipedia passages of the packaged NQ file: :func:`essay_filler`; or whitespace), so
any model can be measured on them offline and two runs with the same seed see the same inputs.
Lengths are in the model's own tokens when a ``count_tokens`` callable is given,
else estimated at four characters a token.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rag_position.data.loaders import ORACLE_FILE, default_data_dir, load_qa

TokenCount = Callable[[str], int]

NEEDLE_TEMPLATE = "One of the special magic numbers for {key} is: {value}."
"""RULER's multi-value needle sentence."""

KEY_WORDS = (
    "amber", "basil", "cobalt", "dune", "ember", "fjord", "garnet", "harbor", "indigo",
    "juniper", "kestrel", "lagoon", "marble", "nectar", "orchid", "pepper", "quartz",
    "raven", "saffron", "tundra", "umber", "velvet", "willow", "yarrow", "zephyr",
)  # fmt: skip
"""Needle keys are pairs of these words (``"cobalt-raven"``)."""

VARSUM_QUESTION = "What is the sum of {names}? Answer with a single number."
VARSUM_LOOKUP_QUESTION = "What is the value of {name}? Answer with a single number."
"""VarSum with one variable "summed": a plain lookup."""


@dataclass(frozen=True)
class SyntheticInstance:
    """One synthetic example: the full ``context``, the ``question`` (or needle ``query``),
    the gold ``answers`` (every value to recall, or the one sum), the ``evidence``
    sentences the answer needs, and the context's length in tokens."""

    id: str
    context: str
    question: str
    query: str
    answers: tuple[str, ...]
    evidence: tuple[str, ...]
    tokens: int


FILLER_PASSAGES = 2000
"""How many gold passages of the packaged NQ file feed the essay-like filler."""


def essay_filler(
    path: str | os.PathLike[str] | None = None, *, limit: int = FILLER_PASSAGES
) -> list[str]:
    """Essay-like filler: the Wikipedia passages of the packaged NQ oracle file (or ``path``)."""
    records = load_qa(path or default_data_dir() / ORACLE_FILE, limit=limit)
    return [p.text for r in records for p in r.passages]


def estimate_tokens(text: str) -> int:
    """About four characters a token: the fallback when no tokenizer is at hand."""
    return (len(text) + 3) // 4


def filler_sentences(texts: Sequence[str]) -> list[str]:
    """Sentences (ending ``.``, ``!`` or ``?``) of ``texts``, in order; the filler stock."""
    out: list[str] = []
    for text in texts:
        start = 0
        for i, ch in enumerate(text):
            if ch in ".!?" and (i + 1 == len(text) or text[i + 1] == " "):
                sentence = text[start : i + 1].strip()
                if len(sentence.split()) >= 4:
                    out.append(sentence)
                start = i + 1
    if not out:
        raise ValueError("the filler texts hold no sentence of four words or more")
    return out


def _fill(
    sentences: Sequence[str], tokens: int, rng: random.Random, count: TokenCount
) -> list[str]:
    """Consecutive filler sentences from a random start until ``tokens`` are reached."""
    if tokens <= 0:
        return []
    start = rng.randrange(len(sentences))
    chosen: list[str] = []
    used = 0
    i = start
    while used < tokens:
        sentence = sentences[i % len(sentences)]
        chosen.append(sentence)
        used += count(sentence + " ")
        i += 1
        if i - start > 100_000:
            raise ValueError("filler sentences count no tokens")
    return chosen


def make_multivalue(
    n: int,
    *,
    filler: Sequence[str],
    tokens: int,
    keys: int = 1,
    values: int = 10,
    seed: int = 0,
    count_tokens: TokenCount | None = None,
) -> list[SyntheticInstance]:
    """``n`` RULER-style multi-value needle haystacks (``keys=1, values=10`` is K1V10Q1).

    Each has ``keys`` keys with ``values`` distinct 7-digit numbers each, every needle
    sentence (:data:`NEEDLE_TEMPLATE`) at a random place among filler sentences filling
    about ``tokens`` tokens in all. The first key is queried; the others are
    distractors. ``answers`` are the queried key's values in context order.
    """
    if n < 1 or keys < 1 or values < 1:
        raise ValueError(f"n, keys and values must be >= 1, got {n}, {keys}, {values}")
    if keys > len(KEY_WORDS) ** 2:
        raise ValueError(f"at most {len(KEY_WORDS) ** 2} keys")
    count = count_tokens or estimate_tokens
    stock = filler_sentences(filler)
    out = []
    for index in range(n):
        rng = random.Random(f"multivalue:{seed}:{keys}:{values}:{tokens}:{index}")
        names: list[str] = []
        while len(names) < keys:
            name = f"{rng.choice(KEY_WORDS)}-{rng.choice(KEY_WORDS)}"
            if name not in names:
                names.append(name)
        numbers = rng.sample(range(1_000_000, 10_000_000), keys * values)
        needles = [
            (names[i // values], str(v), NEEDLE_TEMPLATE.format(key=names[i // values], value=v))
            for i, v in enumerate(numbers)
        ]
        budget = tokens - sum(count(s + " ") for _, _, s in needles)
        body = _fill(stock, budget, rng, count)
        slots = sorted(rng.randrange(len(body) + 1) for _ in needles)
        rng.shuffle(needles)
        parts: list[str] = []
        order: list[tuple[str, str, str]] = []
        j = 0
        for i in range(len(body) + 1):
            while j < len(needles) and slots[j] == i:
                parts.append(needles[j][2])
                order.append(needles[j])
                j += 1
            if i < len(body):
                parts.append(body[i])
        context = " ".join(parts)
        wanted = [(v, s) for k, v, s in order if k == names[0]]
        out.append(
            SyntheticInstance(
                id=f"multivalue-K{keys}V{values}-{tokens}-seed{seed}:{index + 1}",
                context=context,
                question=f"What are all the special magic numbers for {names[0]}?",
                query=names[0],
                answers=tuple(v for v, _ in wanted),
                evidence=tuple(s for _, s in wanted),
                tokens=count(context),
            )
        )
    return out


def make_varsum(
    n: int,
    *,
    filler_tokens: int,
    filler: Sequence[str] | None = None,
    variables: int = 50,
    summed: int = 3,
    seed: int = 0,
    count_tokens: TokenCount | None = None,
) -> list[SyntheticInstance]:
    """``n`` VarSum examples: ``variables`` integer assignments, then about
    ``filler_tokens`` tokens of filler (``filler`` texts; whitespace when ``None``),
    then the question: the sum of ``summed`` of the variables.

    The context ends where the question starts, so ``context + "\\n\\n" + question``
    is the direct prompt. ``evidence`` are the assignment lines the sum needs. Example
    ``i`` has the same variables and question at every ``filler_tokens``.
    """
    if n < 1 or summed < 1 or variables < summed:
        raise ValueError(
            f"need n >= 1 and 1 <= summed <= variables, got {n}, {summed}, {variables}"
        )
    if filler_tokens < 0:
        raise ValueError(f"filler_tokens must be >= 0, got {filler_tokens}")
    count = count_tokens or estimate_tokens
    stock = filler_sentences(filler) if filler is not None else None
    out = []
    for index in range(n):
        # The variables and the question depend on the seed and index alone, so every
        # filler size asks the same question of the same evidence (paired comparison).
        rng = random.Random(f"varsum:{seed}:{variables}:{summed}:{index}")
        names: list[str] = []
        while len(names) < variables:
            name = "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ") for _ in range(4))
            if name not in names:
                names.append(name)
        values = [rng.randrange(1, 100) for _ in names]
        lines = [f"{name} = {value}." for name, value in zip(names, values, strict=True)]
        picked = sorted(rng.sample(range(variables), summed))
        evidence = "\n".join(lines)
        if filler_tokens == 0:
            padding = ""
        elif stock is None:
            padding = _whitespace(filler_tokens, count)
        else:
            filler_rng = random.Random(f"varsum-filler:{seed}:{filler_tokens}:{index}")
            padding = " ".join(_fill(stock, filler_tokens, filler_rng, count))
        context = evidence + ("\n\n" + padding if padding else "")
        listed = [names[i] for i in picked]
        if summed == 1:
            question = VARSUM_LOOKUP_QUESTION.format(name=listed[0])
        else:
            names_text = ", ".join(listed[:-1]) + " and " + listed[-1]
            question = VARSUM_QUESTION.format(names=names_text)
        kind = "whitespace" if stock is None else "essay"
        out.append(
            SyntheticInstance(
                id=f"varsum-{kind}-{filler_tokens}-seed{seed}:{index + 1}",
                context=context,
                question=question,
                query=", ".join(listed),
                answers=(str(sum(values[i] for i in picked)),),
                evidence=tuple(lines[i] for i in picked),
                tokens=count(context),
            )
        )
    return out


def _whitespace(tokens: int, count: TokenCount) -> str:
    """Spaces and newlines worth about ``tokens`` tokens (counted, not assumed)."""
    unit = " " * 15 + "\n"
    per = max(count(unit * 64) / 64, 1e-3)
    text = unit * max(int(tokens / per), 1)
    while count(text) > tokens and len(text) > len(unit):
        text = text[: -len(unit)]
    return text
