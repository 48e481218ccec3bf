"""Any OpenAI-compatible server (vLLM, OpenAI...) as a Generator, and vLLM as a Scorer.

``rag-position serve`` starts vLLM for a local model (:mod:`rag_position.serving`).

Requests go through the ``openai`` client, whose retries back off exponentially on
408, 409, 429, 5xx, connection errors and timeouts (``max_retries`` of them, each
attempt bounded by ``timeout`` seconds). Prompts of a batch are sent concurrently,
at most ``concurrency`` at a time; results keep the input order.

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
  the span's, else the request falls back to echo.
- ``"auto"`` (default): forced while the server forces, else echo from then on.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit, urlunsplit

import openai
from openai.types import Completion

from rag_position.cost import Cost, UsageMeter, in_context
from rag_position.errors import (
    BackendError,
    BackendUnavailableError,
    ContextLengthError,
    ModelSpecError,
    ScoringUnsupportedError,
)
from rag_position.models.protocols import Span, SpanScore, check_span

T = TypeVar("T")
U = TypeVar("U")

SCORING_MODES = ("auto", "forced", "echo")
FORCE_KEY = "rag_position_force"  # the vllm_xargs key of rag_position_vllm.ForceTokens

_OPENAI_MODEL = re.compile(
    r"^(gpt-|chatgpt-|o\d|text-davinci|text-embedding|davinci|babbage|ft:gpt-)", re.I
)
_CONTEXT_HINTS = ("context length", "maximum model length", "context window", "max_model_len")
_LIMIT_PATTERNS = (r"maximum context length is (\d+)", r"maximum model length (?:of|is) (\d+)")
_TOTAL_PATTERNS = (
    r"you requested (\d+) tokens",
    r"resulted in (\d+) tokens",
    r"prompt \(length (\d+)\)",
    r"request has (\d+) input tokens",
    r"prompt contains (?:at least )?(\d+) input tokens",  # vLLM 0.32
)


class OpenAICompatibleModel:
    """A model behind an OpenAI-compatible HTTP API: generation, span scoring, token counts.

    ``generate`` uses ``/v1/chat/completions`` (the server applies the chat template)
    when ``chat_template`` is true, else ``/v1/completions`` with the raw prompt.

    ``score_spans`` always uses ``/v1/completions``, by forced generation or echo
    (``scoring=``, module doc), so the **raw prompt is scored without a chat
    template**: completions endpoints apply none. Scores therefore equal a local
    model's with ``chat_template=False``. It needs a server that forces tokens or
    returns prompt log-probabilities (vLLM does; OpenAI's hosted chat models do not,
    which raises :class:`ScoringUnsupportedError`).

    ``count_tokens`` uses tiktoken for OpenAI model names (``gpt-*``, ``o1``...), else
    the server's ``/tokenize`` endpoint (vLLM has one; one request per call).

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
        timeout: float = 60.0,
        max_retries: int = 4,
        chat_template: bool = True,
        concurrency: int = 8,
        scoring: str = "auto",
    ) -> None:
        if scoring not in SCORING_MODES:
            raise ValueError(f"scoring must be one of {', '.join(SCORING_MODES)}, got {scoring!r}")
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        self.base_url = base_url.rstrip("/")
        self.name = model
        self.use_chat_template = chat_template
        self.timeout = timeout
        self.max_retries = max_retries
        self.concurrency = concurrency
        self._client = openai.OpenAI(
            base_url=self.base_url,
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY",
            timeout=timeout,
            max_retries=max_retries,
        )
        self._meter = UsageMeter()
        self._echo_tokens = 0  # max_tokens for scoring requests; 1 once a server refuses 0
        self.scoring = scoring
        # whether forced scoring works here: None until tried, then True or False
        self._forcing: bool | None = {"auto": None, "forced": True, "echo": False}[scoring]
        self._probe = threading.Lock()
        self._lock = threading.Lock()
        self._encoding: Any = None
        self._max_context: int | None = None
        self._max_context_read = False

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_spec(
        cls,
        rest: str,
        *,
        model: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 4,
        chat_template: bool = True,
        concurrency: int = 8,
        scoring: str = "auto",
    ) -> OpenAICompatibleModel:
        """Build from what follows ``openai:`` in a spec: a base URL, maybe with the model.

        ``http://host:8000/v1/Qwen2.5-7B-Instruct`` names the model after ``/v1/``; a
        URL with no path gets ``/v1``. Without a model name, the server's
        ``/v1/models`` must list exactly one.
        """
        parts = urlsplit(rest)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ModelSpecError(
                f"'openai:{rest}' needs an http(s) base URL, e.g. 'openai:http://localhost:8000/v1'"
            )
        path = parts.path.rstrip("/")
        in_url: str | None = None
        head, sep, tail = path.partition("/v1/")
        if sep and tail:
            path, in_url = head + "/v1", unquote(tail)
        elif not path:
            path = "/v1"
        if model and in_url and model != in_url:
            raise ModelSpecError(
                f"the URL names model {in_url!r} but model={model!r} was given; give one"
            )
        base = urlunsplit((parts.scheme, parts.netloc, path, "", ""))
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
        page = self._call(lambda: self._client.models.list(), "/models")
        return [m.model_dump() for m in page.data]

    # ------------------------------------------------------------------ properties
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
                if entry.get("id") == self.name and isinstance(value, int):
                    self._max_context = value
            self._max_context_read = True
        return self._max_context

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` alone: tiktoken for OpenAI models, else the server's ``/tokenize``."""
        if _OPENAI_MODEL.match(self.name):
            return len(self._tiktoken().encode(text, disallowed_special=()))
        root = self.base_url.removesuffix("/v1")
        body = {"model": self.name, "prompt": text, "add_special_tokens": False}
        try:
            reply = self._call(
                lambda: self._client.post(f"{root}/tokenize", cast_to=object, body=body),
                "/tokenize",
            )
        except BackendError as exc:
            raise BackendError(
                f"count_tokens needs the server's /tokenize endpoint (vLLM has one) for model "
                f"{self.name!r}: {exc}"
            ) from exc
        if not isinstance(reply, dict) or not isinstance(reply.get("count"), int):
            raise BackendError(f"{root}/tokenize answered without an integer 'count': {reply!r}")
        return int(reply["count"])

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
        """One completion per prompt, requested concurrently; greedy when temperature is 0."""
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        stops = list(stop) if stop else openai.omit
        seed_arg = openai.omit if seed is None else seed

        def one(job: tuple[int, str]) -> tuple[str, Any]:
            i, prompt = job
            what = f"prompt {i} plus max_new_tokens={max_new_tokens}"
            if self.use_chat_template:
                chat = self._call(
                    lambda: self._client.chat.completions.create(
                        model=self.name,
                        messages=[{"role": "user", "content": prompt}],
                        max_tokens=max_new_tokens,
                        temperature=temperature,
                        seed=seed_arg,
                        stop=stops,
                    ),
                    "/chat/completions",
                    what=what,
                )
                if not chat.choices:
                    raise BackendError(f"{self.base_url}/chat/completions returned no choices")
                return chat.choices[0].message.content or "", chat.usage
            done = self._call(
                lambda: self._client.completions.create(
                    model=self.name,
                    prompt=prompt,
                    max_tokens=max_new_tokens,
                    temperature=temperature,
                    seed=seed_arg,
                    stop=stops,
                ),
                "/completions",
                what=what,
            )
            if not done.choices:
                raise BackendError(f"{self.base_url}/completions returned no choices")
            return done.choices[0].text, done.usage

        return self._map(one, list(enumerate(prompts)))

    # ------------------------------------------------------------------ scoring
    def score_spans(self, prompts: Sequence[str], spans: Sequence[Span]) -> list[SpanScore]:
        """Log-probability of the tokens covering ``spans[i]`` of ``prompts[i]`` (module doc)."""
        if len(prompts) != len(spans):
            raise ValueError(f"got {len(prompts)} prompts but {len(spans)} spans")
        for i, (prompt, span) in enumerate(zip(prompts, spans, strict=True)):
            check_span(prompt, span, i)
        jobs = list(enumerate(zip(prompts, spans, strict=True)))

        def one(job: tuple[int, tuple[str, Span]]) -> tuple[SpanScore, Any]:
            i, (prompt, span) = job
            forced = self._try_forced(prompt, span, i)
            if forced is not None:
                return forced
            reply = self._echo(prompt, i)
            # metered as scoring: the prompt read, nothing generated (a server may count
            # the one token it decodes for an echo)
            read = getattr(reply.usage, "prompt_tokens", 0) or 0
            return _span_score(reply, prompt, span, i, self.base_url), _Usage(read, 0)

        return self._map(one, jobs)

    def _try_forced(self, prompt: str, span: Span, index: int) -> tuple[SpanScore, Any] | None:
        """Forced scoring where this server forces; the first try is made by one thread alone.

        Until a reply has shown whether the server forces, concurrent prompts wait for
        that one try instead of all probing at once.
        """
        if self._forcing is False:
            return None
        if self._forcing is None:
            with self._probe:
                if self._forcing is None:
                    result = self._forced(prompt, span, index)
                    if result is not None:
                        self._forcing = True
                    return result
            if self._forcing is False:
                return None
        return self._forced(prompt, span, index)

    def _forced(self, prompt: str, span: Span, index: int) -> tuple[SpanScore, Any] | None:
        """Score by forced generation (module doc); None: score this prompt by echo.

        A server that cannot force (no token strings from /tokenize, a refused request,
        output that is not the forced tokens) turns forcing off for this model under
        ``scoring="auto"``; a prompt whose token strings do not spell it is scored by
        echo alone. An unreachable or failing server is an error either way.
        """
        tokenized = self._tokenize_with_offsets(prompt)
        if tokenized is None:
            return None
        ids, starts, ends = tokenized
        window = self.max_context
        if window is not None and len(ids) > window:
            raise ContextLengthError(len(ids), window, f"prompt {index}")
        lo, hi = span
        scored = [i for i in range(1, len(ids)) if starts[i] < hi and ends[i] > lo]
        if not scored:
            raise ValueError(
                f"span {span} of prompt {index} covers no scorable token (the first token of a "
                "sequence has no prediction)"
            )
        a, b = scored[0], scored[-1] + 1
        target = ids[a:b]
        try:
            reply = self._call(
                lambda: self._client.completions.create(
                    model=self.name,
                    prompt=ids[:a],
                    max_tokens=b - a,
                    temperature=0.0,
                    logprobs=0,
                    extra_body={
                        "vllm_xargs": {FORCE_KEY: target},
                        # generation_config's end-of-sequence ids must not end the forced
                        # output early (no min_tokens: vLLM would mask those ids, forced
                        # ones included)
                        "ignore_eos": True,
                        "return_tokens_as_token_ids": True,
                        "skip_special_tokens": False,
                    },
                ),
                "/completions",
                what=f"prompt {index}",
                raw_bad_request=True,
            )
        except openai.BadRequestError as exc:
            self._no_forcing(_server_message(exc))
            return None
        choice = reply.choices[0] if reply.choices else None
        lp = choice.logprobs if choice is not None else None
        tokens = lp.tokens if lp is not None else None
        values = lp.token_logprobs if lp is not None else None
        if tokens != [f"token_id:{t}" for t in target] or values is None:
            self._no_forcing("the generated tokens were not the forced ones")
            return None
        if len(values) != len(target) or any(v is None for v in values):
            raise BackendError(
                f"{self.base_url}/completions returned {len(values)} log-probabilities for "
                f"{len(target)} forced tokens of prompt {index}"
            )
        total = float(sum(values))
        # metered as what it is, scoring: the forced tokens count as prompt tokens read
        usage = reply.usage
        read = (getattr(usage, "prompt_tokens", 0) or 0) + (
            getattr(usage, "completion_tokens", 0) or 0
        )
        return SpanScore(total / len(values), total, len(values)), _Usage(read, 0)

    def _no_forcing(self, why: str) -> None:
        if self.scoring == "forced":
            raise ScoringUnsupportedError(
                f"the server at {self.base_url} cannot score by forced generation ({why}); "
                "start it with `rag-position serve` (which loads the forcing logits processor) "
                "or use scoring='echo'"
            )
        self._forcing = False  # auto: echo from now on (a bool write; every reply is checked)

    def _tokenize_with_offsets(self, prompt: str) -> tuple[list[int], list[int], list[int]] | None:
        """The server's token ids of ``prompt`` and each token's character range, or None."""
        root = self.base_url.removesuffix("/v1")
        body = {
            "model": self.name,
            "prompt": prompt,
            "add_special_tokens": True,
            "return_token_strs": True,
        }
        try:
            reply = self._call(
                lambda: self._client.post(f"{root}/tokenize", cast_to=object, body=body),
                "/tokenize",
                raw_bad_request=True,
            )
        except openai.BadRequestError as exc:  # no such option here: a capability
            self._no_forcing(f"/tokenize refused token strings: {_server_message(exc)}")
            return None
        except BackendError as exc:
            if isinstance(exc.__cause__, openai.NotFoundError):  # no /tokenize endpoint
                self._no_forcing("it has no /tokenize endpoint")
                return None
            raise  # unreachable, failing: not a reason to score differently
        ids = reply.get("tokens") if isinstance(reply, dict) else None
        strs = reply.get("token_strs") if isinstance(reply, dict) else None
        if not isinstance(ids, list) or not isinstance(strs, list) or len(ids) != len(strs):
            self._no_forcing("its /tokenize returns no token strings")
            return None
        ranges = token_char_ranges(strs, prompt)
        if ranges is None:  # this prompt's token strings do not spell it: echo scores it
            if self.scoring == "forced":
                raise ScoringUnsupportedError(
                    f"the token strings {self.base_url.removesuffix('/v1')}/tokenize returns "
                    f"for {self.name!r} do not spell the prompt, so spans cannot be placed on "
                    "them; use scoring='echo' or 'auto'"
                )
            return None
        return [int(i) for i in ids], ranges[0], ranges[1]

    def _echo(self, prompt: str, index: int) -> Completion:
        """The prompt echoed with its token log-probabilities (max_tokens 0, else 1)."""
        while True:
            n = self._echo_tokens
            try:
                return self._echo_once(prompt, index, n)
            except openai.BadRequestError as exc:  # a 400 not about the context window
                message = _server_message(exc)
                if any(w in message.lower() for w in ("logprob", "echo")):
                    raise _unsupported(self.base_url, message) from exc
                if n > 0:
                    raise self._status_error(exc, "/completions") from exc
                self._echo_tokens = 1  # the server refuses max_tokens=0: ask for 1, ignore it

    def _echo_once(self, prompt: str, index: int, max_tokens: int) -> Completion:
        return self._call(
            lambda: self._client.completions.create(
                model=self.name,
                prompt=prompt,
                echo=True,
                logprobs=0,  # the prompt token's own log-probability; no alternatives
                max_tokens=max_tokens,
                temperature=0.0,
            ),
            "/completions",
            what=f"prompt {index}",
            raw_bad_request=True,
        )

    # ------------------------------------------------------------------ plumbing
    def _map(self, fn: Callable[[T], tuple[U, Any]], items: list[T]) -> list[U]:
        """``fn`` over ``items`` on up to ``concurrency`` threads, in order, metering usage."""
        if not items:
            return []
        start = time.perf_counter()

        def run(item: T) -> U:
            value, usage = fn(item)
            prompt_tokens = getattr(usage, "prompt_tokens", 0) or 0
            generated = getattr(usage, "completion_tokens", 0) or 0
            self._meter.add(Cost(1, int(prompt_tokens), int(generated), 0.0))
            return value

        try:
            if len(items) == 1 or self.concurrency == 1:
                return [run(item) for item in items]
            with ThreadPoolExecutor(min(self.concurrency, len(items))) as pool:
                futures: list[Future[U]] = [pool.submit(in_context(run), item) for item in items]
                try:
                    return [f.result() for f in futures]
                except BaseException:
                    for f in futures:
                        f.cancel()
                    raise
        finally:
            self._meter.add(Cost(seconds=time.perf_counter() - start))

    def _call(
        self,
        request: Callable[[], T],
        endpoint: str,
        *,
        what: str = "prompt",
        raw_bad_request: bool = False,
    ) -> T:
        """Run one client request, turning openai errors into rag-position errors.

        With ``raw_bad_request``, a 400 that is not about the context window is re-raised
        as is (the caller may retry differently).
        """
        url = self.base_url + endpoint
        try:
            return request()
        except openai.APITimeoutError as exc:
            raise BackendUnavailableError(
                f"{url} did not answer within timeout={self.timeout}s, "
                f"{self.max_retries + 1} attempts (max_retries={self.max_retries}); "
                "is the server up and not overloaded?"
            ) from exc
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc
            raise BackendUnavailableError(
                f"cannot reach the model server at {url} ({type(cause).__name__}: {cause}) "
                f"after {self.max_retries + 1} attempts (timeout={self.timeout}s, "
                f"max_retries={self.max_retries}); start the server or check the URL"
            ) from exc
        except openai.APIStatusError as exc:
            if exc.status_code == 400:
                context = _context_error(_server_message(exc), what)
                if context is not None:
                    raise context from exc
                if raw_bad_request:
                    raise
            raise self._status_error(exc, endpoint) from exc
        except openai.OpenAIError as exc:
            raise BackendError(f"{url}: {type(exc).__name__}: {exc}") from exc

    def _status_error(self, exc: openai.APIStatusError, endpoint: str) -> BackendError:
        retried = exc.status_code in (408, 409, 429) or exc.status_code >= 500
        after = f" after {self.max_retries} retries" if retried and self.max_retries else ""
        return BackendError(
            f"{self.base_url}{endpoint} answered HTTP {exc.status_code}{after} for model "
            f"{self.name!r}: {_server_message(exc)}"
        )


@dataclass(frozen=True)
class _Usage:
    prompt_tokens: int
    completion_tokens: int


def _server_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return str(body["message"])
    return exc.message


def _context_error(message: str, what: str) -> BackendError | ContextLengthError | None:
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


def _first_int(patterns: Sequence[str], text: str) -> int | None:
    for pattern in patterns:
        found = re.search(pattern, text, re.I)
        if found:
            return int(found.group(1))
    return None


def _unsupported(base_url: str, detail: str) -> ScoringUnsupportedError:
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


def _span_score(reply: Completion, prompt: str, span: Span, index: int, url: str) -> SpanScore:
    """Apply the span rule (module doc) to an echoed prompt's token log-probabilities."""
    if not reply.choices:
        raise BackendError(f"{url}/completions returned no choices for prompt {index}")
    choice = reply.choices[0]
    lp = choice.logprobs
    if lp is None or lp.tokens is None or lp.token_logprobs is None or lp.text_offset is None:
        raise _unsupported(url, "the response has no logprobs")
    n = len(lp.tokens)
    if n == 0 or len(lp.token_logprobs) < n or len(lp.text_offset) < n:
        raise _unsupported(url, "token_logprobs or text_offset is shorter than tokens")
    if not choice.text.startswith(prompt):
        raise _unsupported(url, "the prompt was not echoed")
    offsets = list(lp.text_offset[:n])
    first = lp.tokens[0]
    if (
        n > 1
        and first.startswith("<")
        and first.endswith(">")
        and not prompt.startswith(first)
        and offsets[1] == offsets[0] + len(first)
    ):
        # A special token (BOS) the server counted in the offsets but not in the text.
        offsets = [0] + [o - len(first) for o in offsets[1:]]
    end_of_prompt = len(prompt)
    n_prompt = sum(1 for o in offsets if o < end_of_prompt)
    lo, hi = span
    values: list[float] = []
    for i in range(1, n_prompt):
        a = offsets[i]
        b = next((o for o in offsets[i + 1 : n_prompt] if o > a), end_of_prompt)
        if a < hi and b > lo:
            value = lp.token_logprobs[i]
            if value is None:
                raise _unsupported(url, f"token {i} of prompt {index} has a null log-probability")
            values.append(float(value))
    if not values:
        raise ValueError(
            f"span {span} of prompt {index} covers no scorable token (the first token of a "
            "sequence has no prediction)"
        )
    total = sum(values)
    return SpanScore(total / len(values), total, len(values))


__all__ = ["OpenAICompatibleModel"]
