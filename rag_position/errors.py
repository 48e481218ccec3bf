"""Exceptions raised by rag-position. Each names what was wrong and what to do."""

from __future__ import annotations


class RagPositionError(Exception):
    """Base class of every error this library raises on purpose."""


class ContextLengthError(RagPositionError, ValueError):
    """A prompt (plus the tokens to generate) does not fit in the model's window."""

    def __init__(
        self, n_tokens: int, limit: int, what: str = "prompt", *, at_least: bool = False
    ) -> None:
        self.n_tokens = n_tokens
        self.limit = limit
        self.at_least = at_least  # the server stopped counting at n_tokens
        size = f"at least {n_tokens}" if at_least else str(n_tokens)
        super().__init__(
            f"{what} is {size} tokens, over the model's context window of {limit} tokens; "
            "shorten the context or use fewer passages (nothing is truncated silently)"
        )


class ModelSpecError(RagPositionError, ValueError):
    """A model spec string that load_model does not understand."""


class BackendError(RagPositionError, RuntimeError):
    """A model backend failed (a server error after retries, a malformed response)."""


class BackendUnavailableError(BackendError):
    """A model server could not be reached within the configured timeout and retries."""


class ScoringUnsupportedError(BackendError):
    """The backend cannot return prompt log-probabilities, so it cannot act as a Scorer."""


class DataFormatError(RagPositionError, ValueError):
    """A data file in an unknown format or with a missing field; names file, line and field."""
