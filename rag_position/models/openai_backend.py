"""Any OpenAI-compatible server (vLLM, OpenAI...) as a Generator, and vLLM as a Scorer.

``rag-position serve`` starts vLLM for a local model (:mod:`rag_position.serving`).

What a caller can rely on (:mod:`rag_position.models._http`):

- **A deadline per request.** ``timeout`` seconds bound each prompt's request as a
  whole: connecting, every byte of the reply, the retries and the waits between them.
  A server that answers slowly, trickles its reply or never answers ends the call at
  the deadline with :class:`BackendUnavailableError` naming the URL, the model and the
  deadline.
- **Retries inside it**, with exponential backoff (or the server's ``retry-after``):
  connection failures, HTTP 408, 409, 429 and 5xx, and malformed replies, at most
  ``max_retries`` times.
- **Every reply validated before use**: JSON of the endpoint's shape, a choice with
  a text, token, log-probability and offset arrays of equal length that cover the
  prompt, finite log-probabilities, integer token counts. A reply that fails is
  retried like a 5xx, then reported with the URL and what was wrong: no number is
  computed from a broken reply, and no null text becomes ``""``.
- **The context window, as the local backend enforces it**: a prompt plus
  ``max_new_tokens`` over the server's window (read from ``/v1/models``, vLLM's
  ``max_model_len``, or from the server's own refusal) raises
  :class:`ContextLengthError` with both numbers, never a generation a server clipped
  silently to fit. The prompt's tokens are those the reply's ``usage`` reports; where
  a reply carries no ``usage``, the server's ``/tokenize`` counts them (the same
  request: the raw prompt, or the chat messages with the template). A server that can
  do neither gets no guess: an answer that ran to its token limit (``finish_reason``
  other than ``"stop"``) raises :class:`BackendError` saying so, since it may have
  been cut to fit; one that ended by itself is whole and is returned.

Prompts of a batch are sent concurrently, at most ``concurrency`` at a time; results
keep the input order.

Span rule for scoring, the same as the local backend's: a span ``(start, end)`` is a
half-open character range of the prompt; the scored tokens are those whose character
range intersects it, except the first token of the sequence, which has no
prediction. A token's character range is read from the server's ``text_offset``:
token ``i`` covers ``[text_offset[i], text_offset[j])`` where ``j`` is the next token
with a larger offset (the end of the prompt for the last one). This equals the local
rule except at a multi-byte character split over several tokens: a span starting on
such a character may leave out the token holding its first bytes, because start
offsets alone cannot say that token reaches into the character.

Two ways to score (``scoring=``):

- ``"echo"``: ``/v1/completions`` with ``echo``, ``logprobs=0`` and ``max_tokens=0``
  (1 where a server refuses 0): the server returns a log-probability for every prompt
  token. Any vLLM server can do it; vLLM computes the language-model head and a
  full-vocabulary log-softmax at every prompt position for it, and skips its prefix
  cache.
- ``"forced"``: the prompt is tokenized by the server (``/tokenize``), sent as token
  ids up to the span, and the server generates exactly the span's tokens (a logits
  processor forces them; ``rag-position serve`` loads it), reporting each one's
  log-probability from the raw logits. The same numbers (the same tokens, the same
  rule), with the head run only at the span and the prefix cache in use; the tokens
  after the span are not sent. Every reply is checked: the generated token ids must be
  the span's, else the request falls back to echo. Against ``rag-position serve``
  (its vLLM plugin lets a request with ``prompt_logprobs`` read the prefix cache; it
  reports each reply's cached tokens), once a forced reply has shown both, the prompts
  of a call are tokenized, then sent together as token ids up to each span's end in one
  request for their ``prompt_logprobs``, the cache read. A span takes these values
  where the server computed each of its tokens; one it read from its cache, or the
  first after those, has none (the plugin leaves token 0 with 0.0 there), and where a
  span's head has none, the head alone is scored by forced generation.
- ``"auto"`` (default): forced while the server forces, else echo from then on.

Beside this module: the scoring requests (:mod:`._openai_scoring`), one request and a
batch of them (:mod:`._openai_calls`), the replies read and checked
(:mod:`._openai_replies`), the HTTP client (:mod:`._http`).
"""

from __future__ import annotations

import logging
import math
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from rag_position.cost import Cost, UsageMeter
from rag_position.errors import BackendError, ContextLengthError, ModelSpecError
from rag_position.models._http import HTTPStatusError, JSONClient, split_base_url
from rag_position.models._openai_calls import call, map_metered, server_root
from rag_position.models._openai_replies import (
    Generated,
    Usage,
    is_int,
    parse_chat,
    parse_completion,
    parse_models,
    parse_tokenize,
    token_char_ranges,
)
from rag_position.models._openai_scoring import FORCE_KEY as FORCE_KEY
from rag_position.models._openai_scoring import SCORING_MODES as SCORING_MODES
from rag_position.models._openai_scoring import Left, SpanScoring
from rag_position.models.protocols import Span, SpanScore, check_generation, check_span
from rag_position.passages import check_text

T = TypeVar("T")
U = TypeVar("U")

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 300.0  # seconds for one request, retries included

_OPENAI_MODEL = re.compile(
    r"^(gpt-|chatgpt-|o\d|text-davinci|text-embedding|davinci|babbage|ft:gpt-)", re.I
)


class OpenAICompatibleModel:
    """A model behind an OpenAI-compatible HTTP API: generation, span scoring, token counts.

    ``generate`` uses ``/v1/chat/completions`` (the server applies the chat template)
    when ``chat_template`` is true, else ``/v1/completions`` with the raw prompt.
    ``chat_template=None`` (the default) asks the server once, on the first generation
    or the first read of :attr:`use_chat_template`, without generating: a chat request
    to vLLM's ``/tokenize`` that it refuses for want of a chat template (a base model,
    such as Gemma 3 270M served by ``rag-position serve``) means raw prompts; one it
    counts, or a server without ``/tokenize`` (OpenAI's), means chat.

    ``score_spans`` always uses ``/v1/completions``, by forced generation or echo
    (``scoring=``, module doc), so the **raw prompt is scored without a chat
    template**: completions endpoints apply none. Scores therefore equal a local
    model's with ``chat_template=False``. It needs a server that forces tokens or
    returns prompt log-probabilities (vLLM does; OpenAI's hosted chat models do not,
    which raises :class:`ScoringUnsupportedError`).

    ``count_tokens`` uses tiktoken for OpenAI model names (``gpt-*``, ``o1``...), else
    the server's ``/tokenize`` endpoint (vLLM has one; one request per call).

    ``timeout`` is the deadline of one request, retries included (module doc);
    ``max_retries`` the retries inside it.

    Example:
        >>> model = load_model("openai:http://localhost:8000/v1", model="Qwen2.5-7B-Instruct")
        >>> model.generate(["What is the capital of France?"], max_new_tokens=8)
        ['The capital of France is Paris.']
        >>> prompt = "Paris is the capital of France.\\nQuestion: What is the capital?"
        >>> model.score_spans([prompt], [(prompt.index("Question"), len(prompt))])[0].n_tokens
        8
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = 4,
        chat_template: bool | None = None,
        concurrency: int = 8,
        scoring: str = "auto",
    ) -> None:
        if scoring not in SCORING_MODES:
            raise ValueError(f"scoring must be one of {', '.join(SCORING_MODES)}, got {scoring!r}")
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        if not timeout > 0 or math.isinf(timeout):
            raise ValueError(f"timeout must be a finite number of seconds > 0, got {timeout}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        if chat_template is not None and not isinstance(chat_template, bool):
            raise TypeError(f"chat_template must be True, False or None, got {chat_template!r}")
        self.base_url = base_url.rstrip("/")
        self._chat_template: bool | None = chat_template  # None: ask the server (once)
        self._chat_lock = threading.Lock()
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.concurrency = concurrency
        self._http = JSONClient(
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY",
            model=model,
            timeout=self.timeout,
            max_retries=max_retries,
        )
        self._meter = UsageMeter()
        # forced or echo scoring, and what it learns of the server (_openai_scoring)
        self._scoring = SpanScoring(self._http, self.base_url, scoring)
        self._lock = threading.Lock()
        self._encoding: Any = None
        self._max_context: int | None = None
        self._max_context_read = False
        self._no_tokenize: str | None = None  # why /tokenize cannot count prompts here

    @property
    def name(self) -> str:
        """The served model's name, sent with every request."""
        return self._http.model

    @name.setter
    def name(self, value: str) -> None:
        self._http.model = value

    @property
    def scoring(self) -> str:
        """How spans are scored: ``"auto"``, ``"forced"`` or ``"echo"`` (module doc)."""
        return self._scoring.scoring

    @scoring.setter
    def scoring(self, value: str) -> None:
        self._scoring.scoring = value

    def close(self) -> None:
        """Close the connections (they are reopened on the next request)."""
        self._http.close()

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_spec(
        cls,
        rest: str,
        *,
        model: str | None = None,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = 4,
        chat_template: bool | None = None,
        concurrency: int = 8,
        scoring: str = "auto",
    ) -> OpenAICompatibleModel:
        """Build from what follows ``openai:`` in a spec: a base URL, maybe with the model.

        ``http://host:8000/v1/Qwen2.5-7B-Instruct`` names the model after ``/v1/``; a
        URL with no path gets ``/v1``. Without a model name, the server's
        ``/v1/models`` must list exactly one.
        """
        base, in_url = split_base_url(rest)
        if model and in_url and model != in_url:
            raise ModelSpecError(
                f"the URL names model {in_url!r} but model={model!r} was given; give one"
            )
        kwargs: dict[str, Any] = dict(
            api_key=api_key,
            timeout=timeout,
            max_retries=max_retries,
            chat_template=chat_template,
            concurrency=concurrency,
            scoring=scoring,
        )
        name = model or in_url
        if name:
            return cls(base, name, **kwargs)
        probe = cls(base, "", **kwargs)
        ids = [m["id"] for m in probe._list_models()]
        if len(ids) != 1:
            found = ", ".join(repr(i) for i in ids) if ids else "none"
            raise ModelSpecError(
                f"{base}/models lists {len(ids)} models ({found}); name one with model=<name> "
                f"or 'openai:{base}/<name>'"
            )
        probe.name = ids[0]
        return probe

    def _list_models(self) -> list[dict[str, Any]]:
        return self._request("GET", "/models", None, parse_models, what="the model list")

    # ------------------------------------------------------------------ properties
    @property
    def use_chat_template(self) -> bool:
        """Whether ``generate`` sends chat requests (the server's chat template) or raw prompts.

        ``chat_template=True``/``False`` as given; with ``None`` the server is asked on
        first read (one ``/tokenize`` request, nothing generated; class doc), then the
        answer is kept. A server that cannot be reached raises, and is asked again on
        the next read.
        """
        if self._chat_template is None:
            with self._chat_lock:
                if self._chat_template is None:
                    self._chat_template = self._has_chat_template()
        return self._chat_template

    @use_chat_template.setter
    def use_chat_template(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"use_chat_template must be True or False, got {value!r}")
        self._chat_template = value

    def _has_chat_template(self) -> bool:
        """Whether the served model has a chat template, asked without generating.

        vLLM's ``/tokenize`` applies the chat template to ``messages``; for a model
        without one it answers 400 saying so (vLLM 0.32: "...you must provide a chat
        template if the tokenizer does not define one."). Any other refusal (no
        ``/tokenize`` at all, a proxy's 404, an API key's 401) keeps the chat endpoint,
        as before this check existed; OpenAI's own models are not asked.
        """
        if _OPENAI_MODEL.match(self.name):
            return True
        body = {
            "model": self.name,
            "messages": [{"role": "user", "content": "Hi"}],
            "add_generation_prompt": True,
            "add_special_tokens": False,
        }
        url = self._root + "/tokenize"
        try:
            self._http.call("POST", url, body, lambda data: data, what="the chat-template check")
        except HTTPStatusError as exc:
            message = exc.message.lower()
            if exc.status == 400 and ("chat template" in message or "chat_template" in message):
                logger.info(
                    "%s serves %r without a chat template: raw prompts", self._root, self.name
                )
                return False
            logger.info(
                "%s answered HTTP %s to the chat-template check; using chat", url, exc.status
            )
        return True

    @property
    def usage(self) -> Cost:
        """Prompts sent, prompt and generated tokens the server reported, wall seconds."""
        return self._meter.total

    @property
    def max_context(self) -> int | None:
        """The server's context window (vLLM's ``max_model_len``), or None if not reported.

        Read from ``/v1/models`` on first access (one request), then remembered.
        """
        if not self._max_context_read:
            for entry in self._list_models():
                value = entry.get("max_model_len")
                if entry.get("id") == self.name and is_int(value) and value > 0:
                    self._max_context = value
            self._max_context_read = True
        return self._max_context

    def _window(self) -> int | None:
        """``max_context``, or None where the server has no model list (not an error)."""
        try:
            return self.max_context
        except BackendError as exc:
            if isinstance(exc.__cause__, HTTPStatusError) and exc.__cause__.status in (404, 405):
                self._max_context_read = True
                return None
            raise

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` alone: tiktoken for OpenAI models, else the server's ``/tokenize``."""
        check_text(text, "text")
        if _OPENAI_MODEL.match(self.name):
            return len(self._tiktoken().encode(text, disallowed_special=()))
        body = {"model": self.name, "prompt": text, "add_special_tokens": False}
        try:
            reply = self._request("POST", "/tokenize", body, parse_tokenize, what="the text")
        except BackendError as exc:
            raise BackendError(
                f"count_tokens needs the server's /tokenize endpoint (vLLM has one) for model "
                f"{self.name!r}: {exc}"
            ) from exc
        count = reply.get("count")
        if not is_int(count):
            raise BackendError(f"{self._root}/tokenize answered without an integer 'count'")
        return int(count)

    def _tiktoken(self) -> Any:
        with self._lock:
            if self._encoding is None:
                import tiktoken

                try:
                    try:
                        self._encoding = tiktoken.encoding_for_model(self.name)
                    except KeyError:
                        self._encoding = tiktoken.get_encoding("o200k_base")
                except Exception as exc:
                    raise BackendError(
                        f"tiktoken could not load the encoding for {self.name!r} ({exc}); it "
                        "downloads encodings on first use: run once with network access or set "
                        "TIKTOKEN_CACHE_DIR to a folder holding them"
                    ) from exc
            return self._encoding

    # ------------------------------------------------------------------ generation
    def generate(
        self,
        prompts: Sequence[str],
        *,
        max_new_tokens: int = 100,
        temperature: float = 0.0,
        seed: int | None = None,
        stop: Sequence[str] | None = None,
    ) -> list[str]:
        """One completion per prompt, requested concurrently; greedy when temperature is 0.

        Raises :class:`ContextLengthError` when a prompt plus ``max_new_tokens`` is over
        the server's window, as the local backend does (module doc).
        """
        check_generation(prompts, max_new_tokens, temperature)
        for i, prompt in enumerate(prompts):
            check_text(prompt, f"prompt {i}")
        for j, text in enumerate(stop or ()):
            check_text(text, f"stop string {j}")
        options: dict[str, Any] = {"max_tokens": max_new_tokens, "temperature": temperature}
        if seed is not None:
            options["seed"] = seed
        if stop:
            options["stop"] = list(stop)
        window = self._window() if prompts else None
        chat = self.use_chat_template if prompts else False

        def one(job: tuple[int, str]) -> tuple[str, Usage]:
            i, prompt = job
            what = f"prompt {i} plus max_new_tokens={max_new_tokens}"
            if chat:
                body = {
                    "model": self.name,
                    "messages": [{"role": "user", "content": prompt}],
                    **options,
                }
                reply = self._request("POST", "/chat/completions", body, parse_chat, what=what)
            else:
                body = {"model": self.name, "prompt": prompt, **options}
                reply = self._request("POST", "/completions", body, parse_completion, what=what)
            if window is not None:
                # vLLM shortens max_tokens to fit its window without a word: refuse that
                # answer as the local backend refuses the prompt
                n_prompt = self._prompt_tokens(body, reply, window, what)
                if n_prompt is not None and n_prompt + max_new_tokens > window:
                    raise ContextLengthError(n_prompt + max_new_tokens, window, what)
            return reply.text, reply.usage

        return self._map(one, list(enumerate(prompts)))

    def _prompt_tokens(
        self, body: dict[str, Any], reply: Generated, window: int, what: str
    ) -> int | None:
        """The prompt tokens of a generation request: the reply's ``usage``, else the
        server's ``/tokenize`` on the same prompt (module doc). ``None``: not known, and
        the answer ended by itself (nothing was cut to fit the window)."""
        if reply.usage.known:
            return reply.usage.prompt_tokens
        chat = "messages" in body
        if self._no_tokenize is None:
            request: dict[str, Any] = {"model": self.name}
            if chat:  # the chat template applied as for the completion (vLLM's defaults)
                request.update(
                    messages=body["messages"], add_generation_prompt=True, add_special_tokens=False
                )
            else:
                request.update(prompt=body["prompt"], add_special_tokens=True)
            try:
                counted = self._request(
                    "POST", "/tokenize", request, parse_tokenize, what=what, raw_bad_request=True
                )
            except HTTPStatusError as exc:  # a 400 not about the window
                self._no_tokenize = f"its /tokenize refused to count the prompt ({exc.message})"
            except BackendError as exc:
                cause = exc.__cause__
                if not (isinstance(cause, HTTPStatusError) and cause.status in (404, 405)):
                    raise
                self._no_tokenize = "it has no /tokenize endpoint to count the prompt"
            else:
                return len(counted["tokens"])
        if reply.finish_reason == "stop":
            return None  # the answer ended by itself: whole, whatever the window
        endpoint = "/chat/completions" if chat else "/completions"
        raise BackendError(
            f"{self.base_url}{endpoint} reported no token usage for {what} of model "
            f"{self.name!r}, and {self._no_tokenize}: whether the prompt fits the server's "
            f"window of {window} tokens cannot be checked, and the answer ran to its token "
            f"limit (finish_reason {reply.finish_reason!r}), so the server may have cut it to "
            "fit. Refused rather than guessed: use a server that reports usage or has "
            "/tokenize (vLLM has both)"
        )

    # ------------------------------------------------------------------ scoring
    def score_spans(self, prompts: Sequence[str], spans: Sequence[Span]) -> list[SpanScore]:
        """Log-probability of the tokens covering ``spans[i]`` of ``prompts[i]`` (module doc)."""
        if isinstance(prompts, str):
            raise TypeError("`prompts` must be a sequence of strings, not a single str")
        if len(prompts) != len(spans):
            raise ValueError(f"got {len(prompts)} prompts but {len(spans)} spans")
        for i, (prompt, span) in enumerate(zip(prompts, spans, strict=True)):
            check_span(prompt, span, i)
            check_text(prompt, f"prompt {i}")
        jobs = list(enumerate(zip(prompts, spans, strict=True)))
        read: dict[int, tuple[SpanScore, Usage]] = {}
        left: dict[int, Left] = {}  # the prompts read() tokenized and left to force
        if self._scoring.reads:  # one request for all (the module doc), then what it left
            start = time.perf_counter()
            read, left = self._scoring.read(jobs, self._window, self.concurrency)
            self._meter.add(Cost(seconds=time.perf_counter() - start))

        def one(job: tuple[int, tuple[str, Span]]) -> tuple[SpanScore, Usage]:
            i, (prompt, span) = job
            if i in read:
                return read[i]
            return self._scoring.score(prompt, span, i, self._window, left.get(i))

        return self._map(one, jobs)

    # ------------------------------------------------------------------ plumbing
    @property
    def _root(self) -> str:
        return server_root(self.base_url)

    def _map(self, fn: Callable[[T], tuple[U, Usage]], items: list[T]) -> list[U]:
        """``fn`` over ``items`` on up to ``concurrency`` threads, in order, metering usage."""
        return map_metered(fn, items, concurrency=self.concurrency, meter=self._meter)

    def _request(
        self,
        method: str,
        endpoint: str,
        body: Any,
        parse: Callable[[Any], T],
        *,
        what: str,
        raw_bad_request: bool = False,
    ) -> T:
        """One request, retried inside the deadline (:func:`call`'s doc)."""
        return call(
            self._http,
            self.base_url,
            method,
            endpoint,
            body,
            parse,
            what=what,
            raw_bad_request=raw_bad_request,
        )


__all__ = ["OpenAICompatibleModel", "token_char_ranges"]
