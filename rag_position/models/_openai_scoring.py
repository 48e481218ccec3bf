"""Span scoring on an OpenAI-compatible server, for :mod:`rag_position.models.openai_backend`.

:class:`SpanScoring` scores one prompt's span as the backend's module doc says ("Two
ways to score"): by forced generation (``/tokenize`` with token strings, then
``/v1/completions`` forcing the span's tokens) where the server forces, else by echo
(``/v1/completions`` with ``echo``); against ``rag-position serve``, the prompts of a
call are first sent together for their prompt log-probabilities, vLLM's prefix cache
read (:meth:`SpanScoring.read`). It keeps what it has learned of the server: whether it
forces (under ``scoring="auto"``, first tried by one thread alone, then off for good once
it cannot), whether it reports its cached tokens (then it reads), and whether it refuses
``max_tokens=0`` for an echo (then 1).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from functools import partial

from rag_position.errors import BackendError, ContextLengthError, ScoringUnsupportedError
from rag_position.models._http import HTTPStatusError, JSONClient
from rag_position.models._openai_calls import call, map_threads, server_root
from rag_position.models._openai_replies import (
    Echo,
    Usage,
    parse_echo,
    parse_forced,
    parse_prompt_logprobs,
    parse_tokenize,
    span_score,
    span_tokens,
    status_error,
    token_char_ranges,
    unsupported,
)
from rag_position.models.protocols import Span, SpanScore

__all__ = ["FORCE_KEY", "SCORING_MODES", "Left", "SpanScoring", "Window"]

SCORING_MODES = ("auto", "forced", "echo")
FORCE_KEY = "rag_position_force"  # the vllm_xargs key of rag_position_vllm.ForceTokens
READ_KEY = "rag_position_read_prefix"  # the vllm_xargs key of rag_position_vllm.register
READ_BATCH = 64  # prompts in one request of SpanScoring.read
READ_MIN_SHARE = 0.025
"""A span read from prompt log-probabilities is at least this share of the tokens sent
(those up to its end); a shorter one is forced. A read computes the head and returns a
value at every position, forcing one decoding step a span token: measured through
``serve`` on a 2-core CPU (docs/models.md), reading was the faster on one-passage prompts
(about 15 span tokens of 190), cached or not, and forcing on ten-passage ones (of 1,300)
that the cache did not hold."""

Window = Callable[[], int | None]
"""The server's context window when asked (``None``: not reported)."""
Placed = tuple[list[int], int, int]
"""A prompt's token ids (the server's) and its span's tokens ``a:b``."""
Left = tuple[Placed, list[float]]
"""A prompt :meth:`SpanScoring.read` left: where to force (its span's head, or all of it)
and the values it read of the span's tail (none: all forced)."""


class SpanScoring:
    """Span scores from one server, by forced generation or echo (``scoring``: one of
    :data:`SCORING_MODES`, checked by the caller; the backend's module doc). Requests go
    through ``http`` (the backend's client: its model name, deadline and retries) to
    ``base_url``; the usage each score returns is metered by the caller."""

    def __init__(self, http: JSONClient, base_url: str, scoring: str) -> None:
        self._http = http
        self.base_url = base_url
        self.scoring = scoring
        self._echo_tokens = 0  # max_tokens for scoring requests; 1 once a server refuses 0
        # whether forced scoring works here: None until tried, then True or False
        self._forcing: bool | None = {"auto": None, "forced": True, "echo": False}[scoring]
        self._probe = threading.Lock()
        # whether the forcing server reports its cached tokens (serve's does: then the
        # prompts go first through read()): None until a forced reply has shown it
        self._reads: bool | None = None

    @property
    def name(self) -> str:
        """The served model's name (the client's, sent with every request)."""
        return self._http.model

    def score(
        self, prompt: str, span: Span, index: int, window: Window, left: Left | None = None
    ) -> tuple[SpanScore, Usage]:
        """The span's score on prompt ``index`` (checked by the caller), and its usage;
        ``window()`` gives the server's context window where forcing needs it; ``left``:
        what :meth:`read` left of this prompt (the tokens to force, the tail it read)."""
        placed, tail = left or (None, [])
        forced = self._try_forced(prompt, span, index, window, placed)
        if forced is not None and tail:  # the head forced, the tail read (the same prompt)
            head, usage = forced
            total = head.sum + math.fsum(tail)
            n = head.n_tokens + len(tail)
            return SpanScore(total / n, total, n), Usage(usage.prompt_tokens + len(tail), 0)
        if forced is not None:
            return forced
        reply = self._echo(prompt, index)
        # metered as scoring: the prompt read, nothing generated (a server may count
        # the one token it decodes for an echo)
        return span_score(reply, prompt, span, index), Usage(reply.usage.prompt_tokens, 0)

    def _try_forced(
        self, prompt: str, span: Span, index: int, window: Window, placed: Placed | None
    ) -> tuple[SpanScore, Usage] | None:
        """Forced scoring where this server forces; the first try is made by one thread alone.

        Until a reply has shown whether the server forces, concurrent prompts wait for
        that one try instead of all probing at once.
        """
        if self._forcing is False:
            return None
        if self._forcing is None:
            with self._probe:
                if self._forcing is None:
                    result = self._forced(prompt, span, index, window, placed)
                    if result is not None:
                        self._forcing = True
                    return result
            if self._forcing is False:
                return None
        return self._forced(prompt, span, index, window, placed)

    def _forced(
        self, prompt: str, span: Span, index: int, window: Window, placed: Placed | None
    ) -> tuple[SpanScore, Usage] | None:
        """Score by forced generation (the backend's module doc); None: score this prompt by echo.

        A server that cannot force (no token strings from /tokenize, a refused request,
        output that is not the forced tokens) turns forcing off for this model under
        ``scoring="auto"``; a prompt whose token strings do not spell it is scored by
        echo alone. An unreachable or failing server is an error either way.
        """
        placed = placed or self._place((index, (prompt, span)), window)
        if placed is None:
            return None
        ids, a, b = placed
        target = ids[a:b]
        body = {
            "model": self.name,
            "prompt": ids[:a],
            "max_tokens": b - a,
            "temperature": 0.0,
            "logprobs": 0,
            "vllm_xargs": {FORCE_KEY: target},
            # generation_config's end-of-sequence ids must not end the forced output
            # early (no min_tokens: vLLM would mask those ids, forced ones included)
            "ignore_eos": True,
            "return_tokens_as_token_ids": True,
            "skip_special_tokens": False,
        }
        try:
            reply = call(
                self._http,
                self.base_url,
                "POST",
                "/completions",
                body,
                lambda data: parse_forced(data, target),
                what=f"prompt {index}",
                raw_bad_request=True,
            )
        except HTTPStatusError as exc:  # a 400 not about the window: cannot force here
            self._no_forcing(exc.message)
            return None
        if reply is None:
            self._no_forcing("the generated tokens were not the forced ones")
            return None
        values, usage = reply
        if self._reads is None:
            self._reads = usage.cached_tokens is not None
        # metered as what it is, scoring: the forced tokens count as prompt tokens read
        return _score(values), Usage(usage.prompt_tokens + usage.completion_tokens, 0)

    @property
    def reads(self) -> bool:
        """Whether prompts go first through :meth:`read`: the server forces and reports
        its cached tokens (``rag-position serve``, whose plugin lets them be read)."""
        return bool(self._forcing and self._reads)

    def read(
        self, jobs: Sequence[tuple[int, tuple[str, Span]]], window: Window, concurrency: int
    ) -> tuple[dict[int, tuple[SpanScore, Usage]], dict[int, Left]]:
        """Spans scored from their prompts' log-probabilities, vLLM's prefix cache read:
        the prompts tokenized (``concurrency`` at a time), then sent as token ids up to
        the span's end, :data:`READ_BATCH` to a request. By prompt index, the scores and
        what is left for :meth:`score` to force: a span under :data:`READ_MIN_SHARE` of its
        tokens, whole; a span whose head the cache held (its tokens up to a cached block's
        end and the one after), that head, beside the tail's values. A prompt not placed is
        left out of both."""
        tokenized = map_threads(
            partial(self._place, window=window), list(jobs), concurrency=concurrency
        )
        left: dict[int, Left] = {}
        for (i, _), t in zip(jobs, tokenized, strict=True):
            if t is not None:
                ids, a, b = t
                left[i] = (ids[:b], a, b), []  # nothing after the span is sent (nor forced)
        sent = [(i, p) for i, (p, _) in left.items() if p[2] - p[1] >= READ_MIN_SHARE * p[2]]
        batches = [sent[k : k + READ_BATCH] for k in range(0, len(sent), READ_BATCH)]
        read = map_threads(self._read_batch, batches, concurrency=concurrency)
        out: dict[int, tuple[SpanScore, Usage]] = {}
        for batch, values in zip(batches, read, strict=True):
            for (i, (ids, a, b)), got in zip(batch, values, strict=True):
                if len(got) == b - a:
                    out[i] = _score(got), Usage(len(ids), 0)
                    del left[i]
                elif got:  # force the head alone: its prompt ends where the tail starts
                    end = b - len(got)
                    left[i] = (ids[:end], a, end), got
        return out, left

    def _read_batch(self, batch: list[tuple[int, Placed]]) -> list[list[float]]:
        prompts = [ids for _, (ids, _, _) in batch]
        body = {
            "model": self.name,
            "prompt": prompts,
            "max_tokens": 1,
            "temperature": 0.0,
            "prompt_logprobs": 0,
            "vllm_xargs": {READ_KEY: 1},
        }
        spans = [(a, b) for _, (_, a, b) in batch]
        values, _ = call(
            self._http,
            self.base_url,
            "POST",
            "/completions",
            body,
            lambda data: parse_prompt_logprobs(data, prompts, spans),
            what=f"prompts {batch[0][0]} to {batch[-1][0]}",
        )
        return values

    def _place(self, job: tuple[int, tuple[str, Span]], window: Window) -> Placed | None:
        """Prompt ``i``'s token ids (the server's) and its span's tokens ``a:b``; None
        where the server's token strings cannot place it (:meth:`_tokenize_with_offsets`)."""
        i, (prompt, span) = job
        tokenized = self._tokenize_with_offsets(prompt, i)
        if tokenized is None:
            return None
        ids, starts, ends = tokenized
        limit = window()
        if limit is not None and len(ids) > limit:
            raise ContextLengthError(len(ids), limit, f"prompt {i}")
        return (ids, *span_tokens(starts, ends, span, i))

    def _no_forcing(self, why: str) -> None:
        if self.scoring == "forced":
            raise ScoringUnsupportedError(
                f"the server at {self.base_url} cannot score by forced generation ({why}); "
                "start it with `rag-position serve` (which loads the forcing logits processor) "
                "or use scoring='echo'"
            )
        self._forcing = False  # auto: echo from now on (a bool write; every reply is checked)

    def _tokenize_with_offsets(
        self, prompt: str, index: int
    ) -> tuple[list[int], list[int], list[int]] | None:
        """The server's token ids of ``prompt`` and each token's character range, or None."""
        body = {
            "model": self.name,
            "prompt": prompt,
            "add_special_tokens": True,
            "return_token_strs": True,
        }
        try:
            reply = call(
                self._http,
                self.base_url,
                "POST",
                "/tokenize",
                body,
                parse_tokenize,
                what=f"prompt {index}",
                raw_bad_request=True,
            )
        except HTTPStatusError as exc:  # no such option here: a capability
            self._no_forcing(f"/tokenize refused token strings: {exc.message}")
            return None
        except BackendError as exc:
            cause = exc.__cause__
            if isinstance(cause, HTTPStatusError) and cause.status in (404, 405):
                self._no_forcing("it has no /tokenize endpoint")
                return None
            raise  # unreachable, failing: not a reason to score differently
        ids, strs = reply["tokens"], reply.get("token_strs")
        if strs is None:
            self._no_forcing("its /tokenize returns no token strings")
            return None
        ranges = token_char_ranges(strs, prompt)
        if ranges is None:  # this prompt's token strings do not spell it: echo scores it
            if self.scoring == "forced":
                root = server_root(self.base_url)
                raise ScoringUnsupportedError(
                    f"the token strings {root}/tokenize returns for {self.name!r} do not "
                    "spell the prompt, so spans cannot be placed on them; use scoring='echo' "
                    "or 'auto'"
                )
            return None
        return list(ids), ranges[0], ranges[1]

    def _echo(self, prompt: str, index: int) -> Echo:
        """The prompt echoed with its token log-probabilities (max_tokens 0, else 1)."""
        while True:
            n = self._echo_tokens
            body = {
                "model": self.name,
                "prompt": prompt,
                "echo": True,
                "logprobs": 0,  # the prompt token's own log-probability; no alternatives
                "max_tokens": n,
                "temperature": 0.0,
            }
            try:
                return call(
                    self._http,
                    self.base_url,
                    "POST",
                    "/completions",
                    body,
                    partial(parse_echo, prompt=prompt, url=self.base_url, max_tokens=n),
                    what=f"prompt {index}",
                    raw_bad_request=True,
                )
            except HTTPStatusError as exc:  # a 400 not about the context window
                if any(w in exc.message.lower() for w in ("logprob", "echo")):
                    raise unsupported(self.base_url, exc.message) from exc
                if n > 0:
                    raise status_error(exc, self.name) from exc
                self._echo_tokens = 1  # the server refuses max_tokens=0: ask for 1, ignore it


def _score(values: list[float]) -> SpanScore:
    total = math.fsum(values)  # bounded (the parsers): finite
    return SpanScore(total / len(values), total, len(values))
