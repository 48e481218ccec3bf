"""What the OpenAI-compatible double sends: replies, errors, faults and broken replies.

The server itself is :mod:`rag_position.testing.openai_double`; this module holds what
it puts on the wire: reply bodies in vLLM's layout (``usage``, completion ``logprobs``),
OpenAI-style error bodies and vLLM's wording for a prompt over the window, and the
faults (:class:`Fault`) and broken replies (:class:`Break`, every name in
:data:`BREAKS`) a test asks for.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from rag_position.models.transformers_backend import TransformersModel

DEFAULT_MAX_TOKENS = 16
JSON = dict[str, Any]


class HTTPError(Exception):
    """Raised inside a route to answer with an OpenAI-style error body."""

    def __init__(self, status: int, message: str, type_: str = "BadRequestError") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type_


@dataclass(frozen=True)
class Fault:
    """An HTTP error to answer with instead of serving (``ModelServer.fail_next``)."""

    status: int
    retry_after: float | None
    message: str


@dataclass(frozen=True)
class Break:
    """A broken reply to send instead of the right one (``ModelServer.break_next``)."""

    kind: str
    seconds: float


def _logprobs_of(body: JSON) -> JSON:
    lp = body["choices"][0].get("logprobs")
    if not isinstance(lp, dict):
        raise ValueError("this break needs a reply with logprobs (a scoring request)")
    return lp


def _set_null_text(body: JSON) -> None:
    body["choices"][0]["text"] = None


def _set_null_content(body: JSON) -> None:
    body["choices"][0]["message"]["content"] = None


def _set_nan_logprob(body: JSON) -> None:
    values = _logprobs_of(body)["token_logprobs"]
    values[len(values) // 2] = float("nan")


def _set_null_logprob(body: JSON) -> None:
    values = _logprobs_of(body)["token_logprobs"]
    values[len(values) // 2] = None


def _set_short_logprobs(body: JSON) -> None:
    lp = _logprobs_of(body)
    lp["token_logprobs"] = lp["token_logprobs"][: max(1, len(lp["token_logprobs"]) // 2)]


def _set_short_offsets(body: JSON) -> None:
    lp = _logprobs_of(body)
    lp["text_offset"] = lp["text_offset"][:1]


def _set_short_arrays(body: JSON) -> None:
    """Every array cut to the same shorter length: consistent, but short of the text."""
    lp = _logprobs_of(body)
    n = max(1, len(lp["tokens"]) // 2)
    for name in ("tokens", "token_logprobs", "text_offset", "top_logprobs"):
        if isinstance(lp.get(name), list):
            lp[name] = lp[name][:n]


def _drop_choices(body: JSON) -> None:
    body["choices"] = []


def _drop_usage(body: JSON) -> None:
    """A reply without ``usage``: well formed (the field is optional), but the client
    must then count the prompt's tokens itself."""
    body.pop("usage", None)


BODY_BREAKS: dict[str, Callable[[JSON], None]] = {
    "null-text": _set_null_text,
    "null-content": _set_null_content,
    "nan-logprob": _set_nan_logprob,
    "null-logprob": _set_null_logprob,
    "short-logprobs": _set_short_logprobs,
    "short-offsets": _set_short_offsets,
    "short-arrays": _set_short_arrays,
    "no-choices": _drop_choices,
    "no-usage": _drop_usage,
}
BREAKS = ("truncated-json", "html", "not-an-object", *BODY_BREAKS, "trickle", "hang")


def error_body(status: int, message: str, type_: str) -> JSON:
    return {"error": {"message": message, "type": type_, "param": None, "code": status}}


def context_message(n_prompt: int, n_new: int, limit: int) -> str:
    """vLLM's wording for a request over the window (the client parses these numbers)."""
    return (
        f"This model's maximum context length is {limit} tokens. However, you requested "
        f"{n_prompt + n_new} tokens ({n_prompt} in the messages, {n_new} in the completion). "
        "Please reduce the length of the messages or completion."
    )


def prompt_ids(model: TransformersModel, prompt: str) -> list[int]:
    """The token ids the model reads for ``prompt`` (template included), as its ``_encode``."""
    text, _ = model.render(prompt)
    return list(model.tokenizer(text, add_special_tokens=not model.use_chat_template)["input_ids"])


def n_tokens(model: TransformersModel, prompt: str) -> int:
    """Tokens the model reads for ``prompt`` (template included), as its ``_encode`` counts."""
    return len(prompt_ids(model, prompt))


def check_window(model: TransformersModel, n_prompt: int, n_new: int, clip: bool) -> int:
    """``n_new``, or what fits the window with ``clip`` (vLLM's way); 400 if nothing fits."""
    if n_prompt + n_new <= model.max_context:
        return n_new
    if clip and n_new > 0 and n_prompt < model.max_context:
        return model.max_context - n_prompt
    raise HTTPError(400, context_message(n_prompt, n_new, model.max_context))


def send_broken(handler: BaseHTTPRequestHandler, broken: Break, body: JSON) -> None:
    """Answer 200 with the reply broken as ``broken.kind`` says (``BREAKS``)."""
    kind = broken.kind
    data = json.dumps(body).encode()
    content_type = "application/json"
    if kind == "hang":  # headers never come: the client must give up by itself
        time.sleep(broken.seconds)
        handler.close_connection = True
        return
    if kind == "truncated-json":
        data = data[: len(data) // 2]
    elif kind == "html":
        data, content_type = b"<html><body>502 Bad Gateway</body></html>", "text/html"
    elif kind == "not-an-object":
        data = b"[]"
    elif kind in BODY_BREAKS:
        BODY_BREAKS[kind](body)
        data = json.dumps(body).encode()  # NaN is written as the literal NaN
    elif kind != "trickle":
        raise ValueError(f"unknown break {kind!r}")
    handler.send_response(200)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    if kind != "trickle":
        handler.wfile.write(data)
        return
    handler.close_connection = True
    for i in range(len(data)):  # one byte every broken.seconds, to the end
        try:
            handler.wfile.write(data[i : i + 1])
            handler.wfile.flush()
        except OSError:  # the client gave up
            return
        time.sleep(broken.seconds)


def message_content(message: JSON) -> str:
    content = message.get("content")
    if isinstance(content, list):  # OpenAI's content parts: keep the text ones
        content = "".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and p.get("type") == "text"
        )
    if not isinstance(content, str):
        raise HTTPError(400, f"message content must be a string, got {content!r}")
    return content


def usage_body(n_prompt: int, n_new: int) -> JSON:
    return {"prompt_tokens": n_prompt, "completion_tokens": n_new, "total_tokens": n_prompt + n_new}


def _starts(offsets: Sequence[tuple[int, int]]) -> list[int]:
    """Start character of each token, counting leading whitespace a tokenizer may trim."""
    starts, end = [], 0
    for a, b in offsets:
        starts.append(min(a, end))
        end = max(end, b)
    return starts


def logprobs_reply(model: TransformersModel, prompt: str, completion: str, echo: bool) -> JSON:
    """vLLM's completion ``logprobs`` object for the prompt (if ``echo``) and the completion."""
    tokens: list[str] = []
    values: list[float | None] = []
    offsets: list[int] = []
    if echo:
        scored = model.token_logprobs(prompt)
        tokens += scored.tokens
        values += scored.logprobs
        offsets += _starts(scored.offsets)
    if completion:
        full = model.token_logprobs(prompt + completion)
        shift = 0 if echo else len(prompt)
        for tok, value, start in zip(
            full.tokens, full.logprobs, _starts(full.offsets), strict=True
        ):
            if start >= len(prompt):
                tokens.append(tok)
                values.append(value)
                offsets.append(start - shift)
    top = [None if v is None else {t: v} for t, v in zip(tokens, values, strict=True)]
    return {"tokens": tokens, "token_logprobs": values, "text_offset": offsets, "top_logprobs": top}


__all__ = [
    "BODY_BREAKS",
    "BREAKS",
    "DEFAULT_MAX_TOKENS",
    "JSON",
    "Break",
    "Fault",
    "HTTPError",
    "check_window",
    "context_message",
    "error_body",
    "logprobs_reply",
    "message_content",
    "n_tokens",
    "prompt_ids",
    "send_broken",
    "usage_body",
]
