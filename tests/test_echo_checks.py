"""An echoed prompt's log-probabilities, checked token by token (issue 42).

One middle token removed from every array of an echo reply (or doubled) was scored
silently, on the wrong tokens; a log-probability of +5.0 was accepted, and -1e308 came
back as a score of -inf. :func:`parse_echo` now checks the token count against the
reply's usage, every token against the text at its offset (offsets strictly
increasing, contiguous), and every log-probability: finite, at most 0 (1e-4 of float
error allowed, read as 0) and at least -1e4 (vLLM floors its own at -9999), so that
no sum can overflow. The same faults through the server double: ``test_openai_faults``.
"""

from __future__ import annotations

import itertools
import math
import re
from typing import Any

import pytest

from rag_position.models._http import Malformed
from rag_position.models._openai_replies import (
    LOGPROB_FLOOR,
    LOGPROB_SLACK,
    parse_echo,
    parse_forced,
    span_score,
)

URL = "http://127.0.0.1:8000/v1"
PROMPT = "Paris is the capital of France."
TOKENS = ["Paris", " is", " the", " capital", " of", " France", "."]
VALUES: list[float | None] = [None, -1.0, -0.5, -2.0, -0.1, -3.0, -0.2]


def _offsets(tokens: list[str]) -> list[int]:
    """vLLM's ``text_offset``: each token starts where the one before it ends."""
    return [0, *itertools.accumulate(len(t) for t in tokens[:-1])]


def reply(
    tokens: list[str] | None = None,
    values: list[Any] | None = None,
    offsets: list[int] | None = None,
    *,
    text: str = PROMPT,
    usage: tuple[int, int] | None = (len(TOKENS), 0),
) -> dict[str, Any]:
    tokens = list(TOKENS if tokens is None else tokens)
    values = list(VALUES if values is None else values)
    body: dict[str, Any] = {
        "choices": [
            {
                "text": text,
                "logprobs": {
                    "tokens": tokens,
                    "token_logprobs": values,
                    "text_offset": _offsets(tokens) if offsets is None else offsets,
                    "top_logprobs": [
                        None if v is None else {t: v} for t, v in zip(tokens, values, strict=True)
                    ],
                },
            }
        ]
    }
    if usage is not None:
        body["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1]}
    return body


def _cut(body: dict[str, Any], at: int, *, double: bool = False) -> dict[str, Any]:
    """Token ``at`` removed from (or doubled in) every array of the reply."""
    lp = body["choices"][0]["logprobs"]
    for name in ("tokens", "token_logprobs", "text_offset", "top_logprobs"):
        values = lp[name]
        lp[name] = values[: at + 1] + values[at:] if double else values[:at] + values[at + 1 :]
    return body


SPAN = (PROMPT.index("capital"), len(PROMPT))


def test_a_right_reply_is_scored() -> None:
    echo = parse_echo(reply(), PROMPT, URL)
    score = span_score(echo, PROMPT, SPAN, 0)
    assert score.n_tokens == 4 and score.sum == pytest.approx(-5.3)


@pytest.mark.parametrize("usage", [(len(TOKENS), 0), None], ids=["usage", "no-usage"])
@pytest.mark.parametrize("double", [False, True], ids=["dropped", "doubled"])
def test_a_token_dropped_or_doubled_in_every_array_is_refused(
    usage: tuple[int, int] | None, double: bool
) -> None:
    """Consistent arrays, one token short (or long): 6 tokens and mean -1.03 instead of
    7 and -1.34, silently."""
    body = _cut(reply(usage=usage), 3, double=double)
    with pytest.raises(Malformed) as caught:
        parse_echo(body, PROMPT, URL)
    message = str(caught.value)
    if usage is not None:
        n = len(TOKENS) + (1 if double else -1)
        assert f"{n} tokens, but the usage counts {len(TOKENS)}" in message
    else:
        assert "token" in message and ("offset" in message or "text" in message)


def test_vllms_count_with_max_tokens_0() -> None:
    """vLLM counts one generated token in ``usage`` when asked for none, and echoes the
    prompt's tokens alone: the count is the prompt's."""
    assert len(parse_echo(reply(usage=(7, 1)), PROMPT, URL, max_tokens=0).tokens) == 7
    with pytest.raises(Malformed, match="8 tokens, but the usage counts 7 "):
        parse_echo(_cut(reply(usage=(7, 1)), 3, double=True), PROMPT, URL, max_tokens=0)
    with pytest.raises(Malformed, match="7 tokens, but the usage counts 8 "):
        parse_echo(reply(usage=(7, 1)), PROMPT, URL, max_tokens=1)


def test_without_usage_the_text_catches_a_dropped_token() -> None:
    body = _cut(reply(usage=None), 3)
    with pytest.raises(Malformed, match=r"token 2 \(' the'\) at character 8 is not the text"):
        parse_echo(body, PROMPT, URL)


def test_offsets_must_increase_strictly() -> None:
    offsets = _offsets(TOKENS)
    offsets[4] = offsets[3]
    with pytest.raises(Malformed, match="text_offset"):
        parse_echo(reply(offsets=offsets, usage=None), PROMPT, URL)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (5.0, "log-probability 3 is 5.0, above 0"),
        (1e-3, "log-probability 3 is 0.001, above 0"),
        (-1e308, "log-probability 3 is -1e+308, below -10000"),
        (float("-inf"), "not a finite number"),
        (float("nan"), "not a finite number"),
        (True, "not a finite number"),
    ],
)
def test_a_log_probability_that_cannot_be_is_refused(value: Any, says: str) -> None:
    values = list(VALUES)
    values[3] = value
    with pytest.raises(Malformed, match=re.escape(says)):
        parse_echo(reply(values=values), PROMPT, URL)
    forced = {"choices": [{"logprobs": {"tokens": ["token_id:1", "token_id:2"],
                                        "token_logprobs": [-0.5, value]}}]}  # fmt: skip
    with pytest.raises(Malformed, match=re.escape(says.replace("probability 3", "probability 1"))):
        parse_forced(forced, [1, 2])


def test_float_error_above_zero_reads_as_zero_and_the_floor_sums_finitely() -> None:
    values: list[float | None] = [None, LOGPROB_SLACK / 2, *([LOGPROB_FLOOR] * 5)]
    echo = parse_echo(reply(values=values), PROMPT, URL)
    assert echo.logprobs[1] == 0.0
    score = span_score(echo, PROMPT, (0, len(PROMPT)), 0)
    assert math.isfinite(score.sum) and score.sum == 5 * LOGPROB_FLOOR


def test_what_real_servers_send_still_parses() -> None:
    # a leading BOS the echoed text does not hold (vLLM counts its characters)
    bos = reply(["<bos>", "Hi", " there"], [None, -1.0, -2.0], [0, 5, 7], text="Hi there",
                usage=(3, 0))  # fmt: skip
    assert parse_echo(bos, "Hi there", URL).offsets == [0, 0, 2]
    # a character split over tokens: vLLM's empty piece, the double's replacement characters
    split = reply(["caf", "", "é"], [None, -1.0, -2.0], text="café", usage=(3, 0))
    assert parse_echo(split, "café", URL).offsets == [0, 3, 3]
    double = reply(["caf", "\ufffd", "\ufffd"], [None, -1.0, -2.0], [0, 3, 3], text="café",
                   usage=(3, 0))  # fmt: skip
    assert parse_echo(double, "café", URL).offsets == [0, 3, 3]
    # max_tokens=1 (a server refusing 0): one generated token after the prompt
    more = reply([*TOKENS, " It"], [*VALUES, -0.7], text=PROMPT + " It", usage=(7, 1))
    assert len(parse_echo(more, PROMPT, URL).tokens) == 8
