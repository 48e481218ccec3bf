"""An echoed prompt's log-probabilities, checked token by token by parse_echo (issue 42).

A token dropped or doubled in every array, a log-probability of +5.0 or -1e308 were scored
silently. The same faults through the server double: ``test_vllm_faults``.
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
    parse_prompt_logprobs,
    span_score,
)

URL = "http://127.0.0.1:8000/v1"
PROMPT = "Paris is the capital of France."
TOKENS = ["Paris", " is", " the", " capital", " of", " France", "."]
VALUES: list[float | None] = [None, -1.0, -0.5, -2.0, -0.1, -3.0, -0.2]


def reply(
    tokens: list[str] = TOKENS,
    values: list[Any] = VALUES,
    offsets: list[int] | None = None,
    *,
    text: str = PROMPT,
    usage: tuple[int, int] | None = (len(TOKENS), 0),
) -> dict[str, Any]:
    """An echo reply; ``text_offset`` by default as vLLM's: each token where the last ends."""
    if offsets is None:
        offsets = [0, *itertools.accumulate(len(t) for t in tokens[:-1])]
    top = [None if v is None else {t: v} for t, v in zip(tokens, values, strict=True)]
    logprobs = {"tokens": tokens, "token_logprobs": values, "text_offset": offsets}
    body: dict[str, Any] = {
        "choices": [{"text": text, "logprobs": {**logprobs, "top_logprobs": top}}]
    }
    if usage is not None:
        body["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1]}
    return body


def _cut(body: dict[str, Any], at: int, *, double: bool = False) -> dict[str, Any]:
    """Token ``at`` removed from (or doubled in) every array of the reply."""
    lp = body["choices"][0]["logprobs"]
    for name, values in lp.items():
        lp[name] = values[: at + 1] + values[at:] if double else values[:at] + values[at + 1 :]
    return body


def test_a_right_reply_is_scored() -> None:
    echo = parse_echo(reply(), PROMPT, URL)
    score = span_score(echo, PROMPT, (PROMPT.index("capital"), len(PROMPT)), 0)
    assert score.n_tokens == 4 and score.sum == pytest.approx(-5.3)


@pytest.mark.parametrize(
    ("usage", "double", "says"),
    [
        ((7, 0), False, "6 tokens, but the usage counts 7"),
        ((7, 0), True, "8 tokens, but the usage counts 7"),
        (None, False, r"token 2 \(' the'\) at character 8 is not the text"),
        (None, True, r"text_offset is not strictly increasing at token 4 \(12, then 12"),
    ],
    ids=["usage-dropped", "usage-doubled", "no-usage-dropped", "no-usage-doubled"],
)
def test_a_token_dropped_or_doubled_in_every_array_is_refused(
    usage: tuple[int, int] | None, double: bool, says: str
) -> None:
    """Consistent arrays one token short (or long): 6 tokens, mean -1.03, not 7 and -1.34."""
    with pytest.raises(Malformed, match=says):
        parse_echo(_cut(reply(usage=usage), 3, double=double), PROMPT, URL)


def test_vllms_count_with_max_tokens_0() -> None:
    """vLLM counts one generated token in ``usage`` when asked for none, and echoes the
    prompt's tokens alone: the count is the prompt's."""
    assert len(parse_echo(reply(usage=(7, 1)), PROMPT, URL, max_tokens=0).tokens) == 7
    with pytest.raises(Malformed, match="8 tokens, but the usage counts 7 "):
        parse_echo(_cut(reply(usage=(7, 1)), 3, double=True), PROMPT, URL, max_tokens=0)
    with pytest.raises(Malformed, match="7 tokens, but the usage counts 8 "):
        parse_echo(reply(usage=(7, 1)), PROMPT, URL, max_tokens=1)


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
    with pytest.raises(Malformed, match=re.escape(says)):
        parse_echo(reply(values=[*VALUES[:3], value, *VALUES[4:]]), PROMPT, URL)
    forced = {"choices": [{"logprobs": {"tokens": ["token_id:1", "token_id:2"],
                                        "token_logprobs": [-0.5, value]}}]}  # fmt: skip
    with pytest.raises(Malformed, match=re.escape(says.replace("probability 3", "probability 1"))):
        parse_forced(forced, [1, 2])


def test_float_error_above_zero_reads_as_zero_and_the_floor_sums_finitely() -> None:
    echo = parse_echo(reply(values=[None, LOGPROB_SLACK / 2, *[LOGPROB_FLOOR] * 5]), PROMPT, URL)
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


def test_prompt_logprobs_are_taken_only_where_the_server_computed_them() -> None:
    """Three prompts' ``prompt_logprobs`` in one reply; the first ``read`` tokens came from the
    cache, their entries and the next one's left as serve's plugin leaves them (token 0, 0.0)."""
    own = [None] + [{str(5 + i): {"logprob": -1 / (5 + i)}} for i in range(1, 5)]
    zero = {"0": {"logprob": 0.0}}

    def choice(read: int, k: int) -> dict[str, Any]:
        return {"index": k, "prompt_logprobs": [zero if 0 < i <= read else e
                                                for i, e in enumerate(own)]}  # fmt: skip

    body = {"choices": [choice(3, 1), choice(2, 0), choice(1, 2)], "usage": {"prompt_tokens": 15}}
    ids, zero_id = [5, 6, 7, 8, 9], [5, 0, 7, 8, 9]  # token 0's own entry would look like a read
    values, usage = parse_prompt_logprobs(body, [ids, ids, zero_id], [(3, 5), (3, 5), (1, 5)])
    v = [-1 / 7, -1 / 8, -1 / 9]  # whole; the tail after a cached head, or after token 0
    assert (values, usage.prompt_tokens) == ([v[1:], v[2:], v], 15)
    short = {"index": 0, "prompt_logprobs": own[:4]}
    bare = {"index": 0, "prompt_logprobs": [None, {"6": {}}, *own[2:]]}  # no value: malformed
    other = {"index": 0, "prompt_logprobs": [*own[:3], {"42": {"logprob": -1.0}}, own[4]]}
    for choices, says in [([choice(0, 1)], "index is 1: not one"), ([short], "not 5 entries"),
                          ([bare], "log-probability 0 is None"),
                          ([other], "token 3 is .*neither its own id 8")]:  # fmt: skip
        with pytest.raises(Malformed, match=says):
            parse_prompt_logprobs({"choices": choices}, [ids], [(1, 5)])
