"""What the OpenAI-compatible double sends: replies, errors and vLLM's wording.

The server itself is :mod:`rag_position.testing.openai_double`; this module holds what
it puts on the wire: reply bodies in vLLM's layout (``usage``, completion ``logprobs``)
and vLLM's wording for a prompt over the window. The faults and broken replies a test
asks for, and the error bodies, are in :mod:`rag_position.testing._faults`.
"""

from __future__ import annotations

from collections.abc import Sequence

from rag_position.models.transformers_backend import TransformersModel
from rag_position.testing._faults import JSON

DEFAULT_MAX_TOKENS = 16


class HTTPError(Exception):
    """Raised inside a route to answer with an OpenAI-style error body."""

    def __init__(self, status: int, message: str, type_: str = "BadRequestError") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type_


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
    "DEFAULT_MAX_TOKENS",
    "JSON",
    "HTTPError",
    "check_window",
    "context_message",
    "logprobs_reply",
    "message_content",
    "n_tokens",
    "prompt_ids",
    "usage_body",
]
