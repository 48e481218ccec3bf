"""Reading an OpenAI-compatible server's replies, for :mod:`rag_position.models.openai_backend`.

Every reply is checked before a number is computed from it: a reply that fails raises
:class:`~rag_position.models._http.Malformed` (retried like a 5xx by the client), a
server that cannot do what was asked raises :class:`ScoringUnsupportedError`. Also
here: the span rule (module doc of the backend) on an echoed prompt
(:func:`span_score`) and on token character ranges (:func:`span_tokens`), token
strings mapped to character ranges (:func:`token_char_ranges`), and a refusal read as
the error the caller sees (:func:`context_error`, :func:`status_error`).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from rag_position.errors import BackendError, ContextLengthError, ScoringUnsupportedError
from rag_position.models._http import HTTPStatusError, Malformed
from rag_position.models.protocols import Span, SpanScore

_CONTEXT_HINTS = (
    "context length",
    "maximum model length",
    "context window",
    "max_model_len",
    "maximum input length",
)
_LIMIT_PATTERNS = (
    r"maximum context length is (\d+)",
    r"maximum model length (?:of|is) (\d+)",
    r"max_model_len[^\d]{0,20}(\d+)",
    r"maximum input length of (\d+)",
)
_TOTAL_PATTERNS = (
    r"you requested (\d+) tokens",
    r"resulted in (\d+) tokens",
    r"prompt \(length (\d+)\)",
    r"request has (\d+) input tokens",
    r"prompt contains (?:at least )?(\d+) input tokens",  # vLLM 0.32
    r"(?:your|the) (?:request|prompt|messages?) (?:has|have|contains?) (\d+) tokens",
)


LOGPROB_SLACK = 1e-4
"""How far above 0 a log-probability may be, float error of a near-certain token (read
as 0); anything higher is a probability above 1, refused."""
LOGPROB_FLOOR = -1e4
"""The lowest log-probability a reply may hold (vLLM floors its own at -9999.0): lower is
no probability a model computes, and bounded values sum without overflow."""


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    known: bool = True  # False: the reply carried no usage
    cached_tokens: int | None = None  # prompt tokens read from the server's prefix cache


@dataclass(frozen=True)
class Generated:
    """A generation's checked reply: its text, the usage it carried, why it ended.

    ``finish_reason``: ``"stop"`` (the model ended, or a stop string), ``"length"``
    (``max_tokens`` reached), or ``None`` where the reply does not say.
    """

    text: str
    usage: Usage
    finish_reason: str | None


@dataclass(frozen=True)
class Echo:
    """An echoed prompt's token log-probabilities, checked (:func:`parse_echo`)."""

    tokens: list[str]
    logprobs: list[float | None]  # None for the first token only
    offsets: list[int]
    usage: Usage


def is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _object(data: Any, what: str = "the body") -> dict[str, Any]:
    if not isinstance(data, dict):
        raise Malformed(f"{what} is a JSON {type(data).__name__}, not an object")
    return data


def _first_choice(data: Any) -> dict[str, Any]:
    choices = _object(data).get("choices")
    if not isinstance(choices, list) or not choices:
        raise Malformed(f"'choices' is {_short(choices)}, not a non-empty list")
    return _object(choices[0], "choices[0]")


def parse_usage(data: dict[str, Any]) -> Usage:
    usage = data.get("usage")
    if usage is None:
        return Usage(0, 0, known=False)
    usage = _object(usage, "'usage'")
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens", 0)
    completion = 0 if completion is None else completion
    if not (is_int(prompt) and is_int(completion) and prompt >= 0 and completion >= 0):
        raise Malformed(f"'usage' holds no token counts: {_short(usage)}")
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    cached = cached if is_int(cached) and 0 <= cached <= prompt else None
    return Usage(prompt, completion, cached_tokens=cached)


def _finish_reason(choice: dict[str, Any]) -> str | None:
    reason = choice.get("finish_reason")
    return reason if isinstance(reason, str) else None


def parse_completion(data: Any) -> Generated:
    choice = _first_choice(data)
    text = choice.get("text")
    if not isinstance(text, str):
        raise Malformed(f"choices[0].text is {_short(text)}, not a string")
    return Generated(text, parse_usage(data), _finish_reason(choice))


def parse_chat(data: Any) -> Generated:
    choice = _first_choice(data)
    message = _object(choice.get("message"), "choices[0].message")
    content = message.get("content")
    if not isinstance(content, str):
        raise Malformed(f"choices[0].message.content is {_short(content)}, not a string")
    return Generated(content, parse_usage(data), _finish_reason(choice))


def parse_models(data: Any) -> list[dict[str, Any]]:
    entries = _object(data).get("data")
    if not isinstance(entries, list):
        raise Malformed(f"'data' is {_short(entries)}, not a list of models")
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            raise Malformed(f"a model entry has no string 'id': {_short(entry)}")
    return entries


def parse_tokenize(data: Any) -> dict[str, Any]:
    body = _object(data)
    tokens = body.get("tokens")
    if not isinstance(tokens, list) or not all(is_int(t) for t in tokens):
        raise Malformed(f"'tokens' is {_short(tokens)}, not a list of token ids")
    count = body.get("count")
    if count is not None and (not is_int(count) or count != len(tokens)):
        raise Malformed(f"'count' is {_short(count)} for {len(tokens)} tokens")
    strs = body.get("token_strs")
    if strs is not None and (
        not isinstance(strs, list)
        or len(strs) != len(tokens)
        or not all(isinstance(s, str) for s in strs)
    ):
        raise Malformed(f"'token_strs' is not {len(tokens)} strings, one a token")
    return body


def _logprobs_arrays(choice: dict[str, Any]) -> tuple[list[Any], list[Any], list[Any]] | None:
    lp = choice.get("logprobs")
    if lp is None:
        return None
    lp = _object(lp, "choices[0].logprobs")
    tokens, values, offsets = lp.get("tokens"), lp.get("token_logprobs"), lp.get("text_offset")
    if tokens is None or values is None:
        return None
    for key, value in (("tokens", tokens), ("token_logprobs", values)):
        if not isinstance(value, list):
            raise Malformed(f"logprobs.{key} is {_short(value)}, not a list")
    if len(values) != len(tokens):
        raise Malformed(
            f"{len(values)} log-probabilities for {len(tokens)} tokens (the arrays must match)"
        )
    return tokens, values, offsets if offsets is not None else []


def _finite(values: Sequence[Any], first: int) -> list[float]:
    """``values[first:]`` as log-probabilities: finite, at most 0 (up to
    :data:`LOGPROB_SLACK` of float error, read as 0), at least :data:`LOGPROB_FLOOR`."""
    out = []
    for i, value in enumerate(values[first:], start=first):
        if not _is_number(value) or not math.isfinite(value):
            raise Malformed(f"log-probability {i} is {_short(value)}, not a finite number")
        if value > LOGPROB_SLACK:
            raise Malformed(f"log-probability {i} is {value!r}, above 0 (a probability above 1)")
        if value < LOGPROB_FLOOR:
            raise Malformed(
                f"log-probability {i} is {value!r}, below {LOGPROB_FLOOR:g} (no model "
                "computes one so low; vLLM floors its own at -9999)"
            )
        out.append(min(float(value), 0.0))
    return out


def parse_forced(data: Any, target: list[int]) -> tuple[list[float], Usage] | None:
    """The forced tokens' log-probabilities; None where the tokens were not the forced ones."""
    arrays = _logprobs_arrays(_first_choice(data))
    if arrays is None:
        return None
    tokens, values, _ = arrays
    if tokens != [f"token_id:{t}" for t in target]:
        return None
    return _finite(values, 0), parse_usage(data)


def parse_prompt_logprobs(
    data: Any, prompts: list[list[int]], spans: list[tuple[int, int]]
) -> tuple[list[list[float]], Usage]:
    """Each span's token log-probabilities that the server computed, from one reply of
    ``prompt_logprobs`` for the token-id ``prompts`` (a choice each, by its ``index``),
    and the reply's usage.

    Tokens ``a:b`` of prompt ``k`` for ``spans[k] == (a, b)``, or the longest tail of them
    the server computed: it computes nothing for the tokens it read from its prefix cache
    nor for the first after them, which ``rag-position serve``'s plugin leaves as token 0
    with 0.0; a span token whose entry is not its own id (or whose id is 0) has no value,
    nor has any before it; an entry holding neither is another prompt's: ``Malformed``. A
    list shorter than ``b - a`` leaves its span's head to force."""
    usage = parse_usage(_object(data))
    choices = _object(data).get("choices")
    if not isinstance(choices, list) or len(choices) != len(prompts):
        raise Malformed(f"'choices' is {_short(choices)}, not {len(prompts)} choices")
    by_index: dict[int, Any] = {}
    for choice in choices:
        index = _object(choice, "a choice").get("index")
        if not is_int(index) or not 0 <= index < len(prompts) or index in by_index:
            raise Malformed(f"a choice's index is {_short(index)}: not one per prompt")
        by_index[index] = choice.get("prompt_logprobs")
    out: list[list[float]] = []
    for k, (ids, (a, b)) in enumerate(zip(prompts, spans, strict=True)):
        entries = by_index[k]
        if not isinstance(entries, list) or len(entries) != len(ids):
            raise Malformed(
                f"choice {k}'s 'prompt_logprobs' is {_short(entries)}, not {len(ids)} entries"
            )
        for i in range(1, len(ids)):  # each entry its own token's, or the plugin's cache mark
            entry = entries[i]
            if entry is not None and not (isinstance(entry, dict) and (
                    str(ids[i]) in entry or set(entry) == {"0"})):  # fmt: skip
                raise Malformed(
                    f"choice {k}'s prompt token {i} is {_short(entry)}: neither its own id "
                    f"{ids[i]} nor the cache mark (another prompt's?)"
                )
        owns = [entries[i].get(str(ids[i])) if isinstance(entries[i], dict) and ids[i] != 0
                else None for i in range(a, b)]  # fmt: skip
        # the span's tokens before its computed tail
        head = max((j + 1 for j, own in enumerate(owns) if not isinstance(own, dict)), default=0)
        # a missing or bad value is malformed (_finite), never a KeyError
        out.append(_finite([o.get("logprob") for o in owns[head:] if isinstance(o, dict)], 0))
    return out, usage


def parse_echo(data: Any, prompt: str, url: str, max_tokens: int | None = None) -> Echo:
    """Check an echoed prompt's reply: every array, every offset, every number.

    ``max_tokens``: what the request asked to generate. With 0 the arrays hold the
    prompt's tokens alone (vLLM still counts one generated token in ``usage``); with
    more they hold the generated tokens too. ``None``: either.
    """
    choice = _first_choice(data)
    text = choice.get("text")
    if not isinstance(text, str):
        raise Malformed(f"choices[0].text is {_short(text)}, not a string")
    arrays = _logprobs_arrays(choice)
    if arrays is None:
        raise unsupported(url, "the response has no logprobs")
    tokens, values, offsets = arrays
    if not text.startswith(prompt):
        raise unsupported(url, "the prompt was not echoed")
    n = len(tokens)
    if n == 0:
        raise Malformed("no tokens for a non-empty prompt")
    if not isinstance(offsets, list) or len(offsets) != n:
        raise Malformed(f"logprobs.text_offset is not {n} offsets, one a token")
    if not all(isinstance(t, str) for t in tokens):
        raise Malformed("logprobs.tokens holds something other than strings")
    usage = parse_usage(data)
    if usage.known:
        prompt_only, with_generated = (
            usage.prompt_tokens,
            usage.prompt_tokens + usage.completion_tokens,
        )
        allowed = (
            {prompt_only}
            if max_tokens == 0
            else {with_generated}
            if max_tokens is not None
            else {prompt_only, with_generated}
        )
        if n not in allowed:
            raise Malformed(
                f"logprobs hold {n} tokens, but the usage counts "
                f"{' or '.join(map(str, sorted(allowed)))} ({usage.prompt_tokens} in the prompt, "
                f"{usage.completion_tokens} generated): a token is missing or repeated"
            )
    shifted = _past_lead_special(tokens, offsets, text)
    lead = 1 if shifted is not offsets else 0  # a leading special token the text lacks
    offsets = shifted
    if not all(is_int(o) and 0 <= o <= len(text) for o in offsets) or any(
        b < a for a, b in itertools.pairwise(offsets)
    ):
        raise Malformed(f"logprobs.text_offset is not increasing within the text: {offsets[:8]}")
    first: float | None = None
    if values[0] is not None:
        first = _finite(values, 0)[0]
    rest = _finite(values, 1)
    if offsets[0] != 0:
        raise Malformed(f"the first token starts at character {offsets[0]}, not 0")
    _check_contiguous(tokens, offsets, text, len(prompt), lead)
    # The last token must reach the end of the text (a token is at least as many bytes as
    # characters): arrays cut short all alike would score a span they never reached.
    left = len(text) - offsets[-1]
    if left > len(_token_bytes(tokens[-1:])[0]):
        raise Malformed(
            f"the {n} tokens stop short of the text: the last starts at character "
            f"{offsets[-1]} of {len(text)} and is {tokens[-1]!r}"
        )
    return Echo(list(tokens), [first, *rest], list(offsets), usage)


def _partial(token: str) -> bool:
    """A token that spells no whole character: empty (vLLM, a character's first bytes)
    or holding U+FFFD (a lone byte decoded alone)."""
    return not token or "\ufffd" in token


def _spells(token: str, piece: str) -> bool:
    """Whether ``token`` is the text ``piece`` at its offset: the same, up to the spaces
    around it (a tokenizer's word-initial space), or as byte-level BPE spells it."""
    if token == piece or (token.strip() == piece.strip() and piece.strip()):
        return True
    spelled = _token_bytes([token])[0].decode("utf-8", "replace")
    return spelled == piece or (spelled.strip() == piece.strip() and bool(piece.strip()))


def _check_contiguous(
    tokens: Sequence[str], offsets: Sequence[int], text: str, end: int, lead: int
) -> None:
    """Every prompt token is the text at its offset, and the offsets strictly increase
    (past a token that spells no whole character, which may share its successor's):
    arrays with a token dropped or repeated, all alike, fail here."""
    n = len(tokens)
    for i in range(lead + 1, n):
        before = tokens[i - 1]
        if offsets[i] <= offsets[i - 1] and not _partial(before):
            raise Malformed(
                f"logprobs.text_offset is not strictly increasing at token {i} "
                f"({offsets[i - 1]}, then {offsets[i]}, after {before!r}): {list(offsets[:8])}"
            )
    for i in range(lead, n):
        start = offsets[i]
        if start >= end:  # a generated token (max_tokens=1), not scored
            break
        token = tokens[i]
        if _partial(token) and token:
            continue
        stop = offsets[i + 1] if i + 1 < n else len(text)
        piece = text[start:stop]
        if not _spells(token, piece):
            raise Malformed(
                f"token {i} ({_short(token)}) at character {start} is not the text there "
                f"({_short(piece)}): the arrays do not follow the text"
            )


def _past_lead_special(tokens: list[str], offsets: list[Any], text: str) -> list[Any]:
    """``text_offset`` in the echoed text's characters, past a leading special token.

    vLLM counts every token string's length in ``text_offset``, a BOS token's text
    included, but echoes the prompt without it: every later offset is that many
    characters too far (measured, vLLM 0.32 serving Gemma 3: ``<bos>`` at 0, the
    prompt's first word at 5; unshifted, a span is scored on the wrong tokens, or the
    last offsets fall past the text). Such a token keeps its offset 0 and the others
    move back by its length. A first token the text starts with (SmolLM2 adds no BOS)
    changes nothing.

    Example:
        >>> _past_lead_special(["<bos>", "Hi", " there"], [0, 5, 7], "Hi there")
        [0, 0, 2]
        >>> _past_lead_special(["Hi", " there"], [0, 2], "Hi there")
        [0, 2]
    """
    first = tokens[0]
    if (
        len(offsets) > 1
        and len(first) > 2
        and first.startswith("<")
        and first.endswith(">")
        and not text.startswith(first)
        and offsets[0] == 0
        and offsets[1] == len(first)
    ):
        return [0, *(o - len(first) if is_int(o) else o for o in offsets[1:])]
    return offsets


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def context_error(message: str, what: str) -> BackendError | ContextLengthError | None:
    """ContextLengthError when a 400 names the window and the numbers parse, else a BackendError."""
    lower = message.lower()
    if not any(h in lower for h in _CONTEXT_HINTS):
        return None
    limit = _first_int(_LIMIT_PATTERNS, message)
    total = _first_int(_TOTAL_PATTERNS, message)
    extra = _first_int((r"too large: (\d+)",), message)
    if limit is not None and total is not None:
        if extra is not None and total + extra > limit >= total:
            total += extra
        at_least = bool(re.search(r"at least \d+ input tokens", message, re.I))
        return ContextLengthError(total, limit, what, at_least=at_least)
    return BackendError(f"{what} does not fit the server's context window: {message}")


def status_error(exc: HTTPStatusError, model: str) -> BackendError:
    """A refusal that is not retried, as the error the caller sees (naming URL and model)."""
    hint = ""
    if exc.status in (401, 403):
        hint = " (the server wants an API key: pass api_key= or set OPENAI_API_KEY)"
    return BackendError(
        f"{exc.url} answered HTTP {exc.status} for model {model!r}: {exc.message}{hint}"
    )


def _first_int(patterns: Sequence[str], text: str) -> int | None:
    for pattern in patterns:
        found = re.search(pattern, text, re.I)
        if found:
            return int(found.group(1))
    return None


def unsupported(base_url: str, detail: str) -> ScoringUnsupportedError:
    return ScoringUnsupportedError(
        f"the server at {base_url} cannot return prompt log-probabilities ({detail}), so it "
        "cannot score spans; vLLM can (/v1/completions with echo and logprobs), OpenAI's hosted "
        "chat models cannot. Use a vLLM server or a local model for scoring"
    )


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level BPE alphabet, inverted: token-string character -> byte."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    chars = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


_BYTE_DECODER = _byte_decoder()
_SP_BYTE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def _token_bytes(tokens: Sequence[str]) -> list[bytes]:
    """Token strings' bytes: byte-level BPE (GPT-2, Llama 3, SmolLM) where every character
    is in its alphabet, else SentencePiece (``\u2581`` a space, ``<0xNN>`` a byte)."""
    if all(c in _BYTE_DECODER for t in tokens for c in t):
        return [bytes(_BYTE_DECODER[c] for c in t) for t in tokens]
    out = []
    for token in tokens:
        byte = _SP_BYTE.fullmatch(token)
        out.append(
            bytes([int(byte.group(1), 16)]) if byte else token.replace("\u2581", " ").encode()
        )
    return out


def token_char_ranges(tokens: Sequence[str], text: str) -> tuple[list[int], list[int]] | None:
    """Each token's ``[start, end)`` character range in ``text``, from its token strings.

    None unless the tokens spell ``text`` exactly, allowing a leading special token the
    text does not hold (a BOS: an empty range at 0) and SentencePiece's space before the
    first word (not counted). The caller then uses another way. A token that ends inside
    a multi-byte character reaches to that character's end; one that starts inside it
    starts at its start.

    Example:
        >>> token_char_ranges(["Hello", "\u0120world"], "Hello world")
        ([0, 5], [5, 11])
        >>> token_char_ranges(["<s>", "\u2581Hello", "\u2581world"], "Hello world")
        ([0, 0, 5], [0, 5, 11])
    """
    data = text.encode("utf-8")
    first = tokens[0] if tokens else ""
    special = first.startswith("<") and first.endswith(">") and len(first) > 2
    skip, lead = -1, 0
    for k in (0, 1) if special else (0,):
        pieces = _token_bytes(tokens[k:])
        joined = b"".join(pieces)
        if joined == data:
            skip = k
            break
        if joined == b" " + data and pieces and pieces[0].startswith(b" "):  # SentencePiece
            skip, lead = k, 1
            break
    if skip < 0:
        return None
    char_of_byte = [0] * (len(data) + 1)
    position = 0
    for index, char in enumerate(text):
        width = len(char.encode("utf-8"))
        for j in range(width):
            char_of_byte[position + j] = index
        position += width
    char_of_byte[len(data)] = len(text)
    starts: list[int] = [0] * skip
    ends: list[int] = [0] * skip
    offset = -lead  # the dummy space sits before the text
    for piece in pieces:
        start, end = max(offset, 0), max(offset + len(piece), 0)
        starts.append(char_of_byte[start] if start < len(data) else len(text))
        ends.append(char_of_byte[end - 1] + 1 if end > start else starts[-1])
        offset += len(piece)
    return starts, ends


def span_tokens(
    starts: Sequence[int], ends: Sequence[int], span: Span, index: int
) -> tuple[int, int]:
    """The span rule on token character ranges: the ``[a, b)`` token indices to score."""
    lo, hi = span
    scored = [i for i in range(1, len(starts)) if starts[i] < hi and ends[i] > lo]
    if not scored:
        raise ValueError(
            f"span {span} of prompt {index} covers no scorable token (the first token of a "
            "sequence has no prediction)"
        )
    return scored[0], scored[-1] + 1


def span_score(reply: Echo, prompt: str, span: Span, index: int) -> SpanScore:
    """Apply the span rule (module doc) to an echoed prompt's checked log-probabilities."""
    offsets = reply.offsets  # in the prompt's characters, past a BOS (parse_echo)
    end_of_prompt = len(prompt)
    n_prompt = sum(1 for o in offsets if o < end_of_prompt)
    lo, hi = span
    values: list[float] = []
    for i in range(1, n_prompt):
        a = offsets[i]
        b = next((o for o in offsets[i + 1 : n_prompt] if o > a), end_of_prompt)
        if a < hi and b > lo:
            value = reply.logprobs[i]
            assert value is not None  # parse_echo: only the first may be None
            values.append(value)
    if not values:
        raise ValueError(
            f"span {span} of prompt {index} covers no scorable token (the first token of a "
            "sequence has no prediction)"
        )
    total = math.fsum(values)  # bounded values (parse_echo): finite
    return SpanScore(total / len(values), total, len(values))


__all__ = [
    "LOGPROB_FLOOR",
    "LOGPROB_SLACK",
    "Echo",
    "Generated",
    "Usage",
    "context_error",
    "is_int",
    "parse_chat",
    "parse_completion",
    "parse_echo",
    "parse_forced",
    "parse_models",
    "parse_prompt_logprobs",
    "parse_tokenize",
    "span_score",
    "span_tokens",
    "status_error",
    "token_char_ranges",
    "unsupported",
]
