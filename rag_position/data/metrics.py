"""The "Lost in the Middle" accuracy metric: best-subspan exact match.

Same as the release's ``lost_in_the_middle/metrics.py``: SQuAD normalisation
(lower-case, drop punctuation, drop the articles a/an/the, collapse whitespace),
then correct when any normalised gold answer is a substring of the normalised output.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(s: str) -> str:
    """SQuAD normalisation: lower, remove punctuation, remove articles, fix whitespace.

    Example:
        >>> normalize_answer("The  Eiffel Tower!")
        'eiffel tower'
    """
    text = s.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def best_subspan_em(prediction: str, answers: Sequence[str]) -> float:
    """1.0 when any normalised answer is a substring of the normalised prediction, else 0.0.

    As in the release, an answer that normalises to the empty string matches anything.

    Example:
        >>> best_subspan_em("It was the Eiffel tower.", ["Eiffel Tower", "La tour Eiffel"])
        1.0
        >>> best_subspan_em("Paris", ["London"]), best_subspan_em("anything", ["the"])
        (0.0, 1.0)
    """
    _check_answers(answers)
    normalized_prediction = normalize_answer(prediction)
    for answer in answers:
        if normalize_answer(answer) in normalized_prediction:
            return 1.0
    return 0.0


def contains_answer(text: str, answers: Sequence[str]) -> bool:
    """Whether ``text`` holds any answer, by the metric's normalised substring match.

    Unlike :func:`best_subspan_em`, answers that normalise to the empty string are
    skipped (they would match every text). Used to reject distractors.

    Example:
        >>> contains_answer("Paris is the capital of France.", ["paris"])
        True
        >>> contains_answer("anything", ["the"])  # unlike best_subspan_em
        False
    """
    _check_answers(answers)
    normalized_text = normalize_answer(text)
    for answer in answers:
        normalized = normalize_answer(answer)
        if normalized and normalized in normalized_text:
            return True
    return False


def _check_answers(answers: Sequence[str]) -> None:
    if isinstance(answers, str):
        raise TypeError("`answers` must be a sequence of strings, not a single string; wrap it")
