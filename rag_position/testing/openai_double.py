"""A test double of vLLM's OpenAI-compatible server, over a local :class:`TransformersModel`.

**For tests, not for serving.** It answers one prompt at a time under one lock and
records every request; to serve a model, run vLLM (``rag-position serve``, see
:mod:`rag_position.serving`). What it is for: the failures a real server cannot be
made to produce on demand. ``fail_next`` answers the next requests with an HTTP error
(the client's retries), ``break_next`` answers with a broken reply instead (a body
that is truncated, HTML, or JSON with a null text, a NaN or missing log-probability,
a reply trickled a byte at a time, or none at all; or a well-formed reply without
``usage``: every name in ``BREAKS``),
``clip_to_window=True`` shortens ``max_tokens`` to fit the window without a word as
vLLM does, a ``handler=`` subclass alters replies (missing log-probabilities, a
refused ``max_tokens=0``, several models), and ``count`` says how many requests a
path saw. The tests of the ``openai:`` backend against vLLM itself
are in ``tests/test_vllm_server.py``, and the same faults in front of vLLM are
:mod:`rag_position.testing.fault_proxy`'s. The reply bodies it sends are built in
:mod:`rag_position.testing._openai_payloads`, the faults and broken replies in
:mod:`rag_position.testing._faults`.

It speaks the subset of vLLM's OpenAI-compatible API that rag-position uses:

Endpoints (JSON in, JSON out, standard library only):

``GET /v1/models``
    The one served model, with vLLM's ``max_model_len``.
``POST /v1/completions``
    ``model``, ``prompt`` (a string, a list of strings, or token ids), ``max_tokens`` (default 16;
    0 is allowed with ``echo``: the prompt alone is returned), ``temperature``,
    ``seed``, ``stop``, ``echo``, ``logprobs``. The prompt is used raw, without the
    chat template, as vLLM does. With ``logprobs`` the response carries vLLM's layout:
    ``tokens``, ``token_logprobs`` (``null`` for the first prompt token),
    ``text_offset`` (character offsets into the returned ``text``) and
    ``top_logprobs``. Limitations: ``top_logprobs`` holds only the actual token, never
    alternatives; the log-probabilities of generated tokens come from re-scoring
    ``prompt + completion``, and a generated token whose text straddles the end of the
    prompt after re-tokenisation is left out.
``POST /v1/chat/completions``
    ``messages`` (one user message, optionally after one system message),
    ``max_tokens`` (or ``max_completion_tokens``; default 16), ``temperature``,
    ``seed``, ``stop``; the model's chat template is applied. A model without one (a
    base model, served with ``chat_template=False``) is refused with vLLM's 400,
    :data:`NO_CHAT_TEMPLATE`, here and for ``messages`` sent to ``/tokenize``.
``POST /tokenize``
    vLLM's tokenizer endpoint: ``{"prompt": ..., "add_special_tokens": true}`` gives
    ``{"count", "max_model_len", "tokens"}``; ``{"messages": [...]}`` instead counts a
    chat request as ``/v1/chat/completions`` reads it (the template applied); and
    ``token_strs`` with
    ``"return_token_strs": true`` where the server was made with ``token_strs=True``
    (by default it leaves them out, so that a client's probe for forced scoring ends
    here, before any completion request). Like a vLLM server without rag-position's
    logits processor, it ignores ``vllm_xargs``: it never forces tokens.
``GET /health``
    200 with an empty body once the server runs.

Errors are ``{"error": {"message", "type", "code"}}``: 400 for a bad request (a
prompt over the window names its length and the limit, in vLLM's words), 404 for an
unknown path or model, 500 for a failure inside the model. Requests that touch the
model are serialised by one lock. ``finish_reason`` is ``"length"`` when the model
produced ``max_tokens`` tokens (end-of-sequence included), else ``"stop"``.

Example:
    >>> from rag_position.models import load_model
    >>> from rag_position.testing.openai_double import serve
    >>> with serve(load_model("embedded")) as server:        # started in a thread
    ...     remote = load_model("openai:" + server.url)        # the single model is found
    ...     remote.generate(["What is the capital of France?"], max_new_tokens=8)
    ['The capital of France is Paris.']
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from rag_position.cost import metered
from rag_position.errors import ContextLengthError
from rag_position.models.transformers_backend import TransformersModel
from rag_position.testing._faults import (
    BREAKS,
    JSON,
    InjectingServer,
    error_body,
    fault_headers,
    send_broken,
    send_json,
)
from rag_position.testing._openai_payloads import (
    DEFAULT_MAX_TOKENS,
    HTTPError,
    check_window,
    logprobs_reply,
    message_content,
    n_tokens,
    prompt_ids,
    usage_body,
)

logger = logging.getLogger(__name__)

NO_CHAT_TEMPLATE = (
    "As of transformers v4.44, default chat template is no longer allowed, so you must "
    "provide a chat template if the tokenizer does not define one."
)
"""vLLM's 400 for a chat request to a model without a chat template (a base model)."""


class OpenAIHandler(BaseHTTPRequestHandler):
    """Request handler; subclass it and pass it to :func:`serve` to alter responses in tests.

    ``postprocess(path, body)`` sees every successful JSON response before it is sent.
    """

    server: ModelServer
    protocol_version = "HTTP/1.1"

    # ------------------------------------------------------------------ plumbing
    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s " + format, self.address_string(), *args)

    def postprocess(self, path: str, body: JSON) -> JSON:
        """Hook for tests: the JSON about to be sent for ``path``. Returns it unchanged."""
        return body

    def send_json(self, status: int, body: JSON, headers: dict[str, str] | None = None) -> None:
        send_json(self, status, body, headers)

    def send_error_json(
        self, status: int, message: str, type_: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_json(status, error_body(status, message, type_), headers)

    def _routes(self) -> dict[tuple[str, str], Callable[[JSON], JSON]]:
        return {
            ("GET", "/v1/models"): self.models,
            ("GET", "/health"): lambda _: {},
            ("POST", "/v1/completions"): self.completions,
            ("POST", "/v1/chat/completions"): self.chat_completions,
            ("POST", "/tokenize"): self.tokenize,
            ("POST", "/v1/tokenize"): self.tokenize,
        }

    def _dispatch(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        path = self.path.split("?", 1)[0].rstrip("/") or "/"
        self.server.record(method, path)
        fault = self.server.take_fault()
        if fault is not None:
            self.send_error_json(fault.status, fault.message, "InjectedFault", fault_headers(fault))
            return
        routes = self._routes()
        route = routes.get((method, path))
        if route is None:
            known = any(p == path for _, p in routes)
            status, what = (405, "method not allowed") if known else (404, "not found")
            self.send_error_json(status, f"{method} {path}: {what}", "NotFoundError")
            return
        try:
            payload = json.loads(raw) if raw else {}
            if not isinstance(payload, dict):
                raise HTTPError(400, "the request body must be a JSON object")
            body = self.postprocess(path, route(payload))
        except json.JSONDecodeError as exc:
            self.send_error_json(400, f"the request body is not JSON: {exc}", "BadRequestError")
        except HTTPError as exc:
            self.send_error_json(exc.status, exc.message, exc.type)
        except ContextLengthError as exc:
            self.send_error_json(400, str(exc), "BadRequestError")
        except (ValueError, TypeError) as exc:
            self.send_error_json(400, str(exc), "BadRequestError")
        except Exception as exc:
            logger.exception("request %s %s failed", method, path)
            self.send_error_json(500, f"{type(exc).__name__}: {exc}", "InternalServerError")
        else:
            broken = self.server.take_break()
            if broken is None:
                self.send_json(200, body)
            else:
                send_broken(self, broken, body)

    # ------------------------------------------------------------------ validation
    def _check_model(self, req: JSON) -> None:
        name = req.get("model")
        if name is not None and name != self.server.model_name:
            raise HTTPError(404, f"The model `{name}` does not exist.", "NotFoundError")

    @staticmethod
    def _int(req: JSON, key: str, default: int | None) -> int | None:
        value = req.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise HTTPError(400, f"{key} must be an integer, got {value!r}")
        return value

    @staticmethod
    def _sampling(req: JSON) -> tuple[float, int | None, list[str] | None]:
        temperature = req.get("temperature")
        temperature = 1.0 if temperature is None else temperature
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
            raise HTTPError(400, f"temperature must be a number, got {temperature!r}")
        if temperature < 0:
            raise HTTPError(400, f"temperature must be >= 0, got {temperature}")
        seed = OpenAIHandler._int(req, "seed", None)
        stop = req.get("stop")
        if isinstance(stop, str):
            stop = [stop]
        if stop is not None and not (
            isinstance(stop, list) and all(isinstance(s, str) for s in stop)
        ):
            raise HTTPError(400, f"stop must be a string or a list of strings, got {stop!r}")
        n = req.get("n")
        if n not in (None, 1):
            raise HTTPError(400, f"only n=1 is supported, got n={n!r}")
        return float(temperature), seed, stop or None

    # ------------------------------------------------------------------ routes
    def models(self, _req: JSON) -> JSON:
        srv = self.server
        return {
            "object": "list",
            "data": [
                {
                    "id": srv.model_name,
                    "object": "model",
                    "created": srv.created,
                    "owned_by": "rag-position",
                    "max_model_len": srv.raw_model.max_context,
                }
            ],
        }

    def completions(self, req: JSON) -> JSON:
        self._check_model(req)
        prompt = req.get("prompt")
        if isinstance(prompt, list) and prompt and all(type(t) is int for t in prompt):
            # token ids, as vLLM takes them: decoded to text here (the double is not exact
            # about re-tokenisation; it only has to accept them)
            prompt = self.server.raw_model.tokenizer.decode(prompt)
        prompts = [prompt] if isinstance(prompt, str) else prompt
        if not (isinstance(prompts, list) and prompts and all(isinstance(p, str) for p in prompts)):
            raise HTTPError(400, "prompt must be a string or a non-empty list of strings")
        echo = bool(req.get("echo", False))
        max_tokens = self._int(req, "max_tokens", DEFAULT_MAX_TOKENS)
        assert max_tokens is not None
        if max_tokens < 0 or (max_tokens == 0 and not echo):
            raise HTTPError(400, f"max_tokens must be at least 1, got {max_tokens}")
        logprobs = self._int(req, "logprobs", None)
        if logprobs is not None and logprobs < 0:
            raise HTTPError(400, f"logprobs must be >= 0, got {logprobs}")
        temperature, seed, stop = self._sampling(req)
        model = self.server.raw_model
        choices: list[JSON] = []
        n_prompt_total = n_new_total = 0
        with self.server.lock:
            for i, text in enumerate(prompts):
                if not text:
                    raise HTTPError(400, f"prompt {i} is empty")
                n_prompt = n_tokens(model, text)
                max_tokens = check_window(model, n_prompt, max_tokens, self.server.clip)
                completion, n_new = "", 0
                if max_tokens > 0:
                    with metered() as tally:
                        (completion,) = model.generate(
                            [text],
                            max_new_tokens=max_tokens,
                            temperature=temperature,
                            seed=seed,
                            stop=stop,
                        )
                    n_new = tally.total.generated_tokens
                lp = None
                if logprobs is not None:
                    lp = logprobs_reply(model, text, completion, echo)
                choices.append(
                    {
                        "index": i,
                        "text": text + completion if echo else completion,
                        "logprobs": lp,
                        "finish_reason": "length" if n_new >= max_tokens else "stop",
                        "stop_reason": None,
                    }
                )
                n_prompt_total += n_prompt
                n_new_total += n_new
        return {
            "id": f"cmpl-{uuid.uuid4().hex}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": self.server.model_name,
            "choices": choices,
            "usage": usage_body(n_prompt_total, n_new_total),
        }

    def _chat_prompt(self, messages: Any) -> tuple[TransformersModel, str]:
        """The model and prompt that a chat request's ``messages`` run as."""
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise HTTPError(400, "messages must be a list of objects")
        roles = [m.get("role") for m in messages]
        if roles not in (["user"], ["system", "user"]):
            raise HTTPError(
                400,
                f"only one user message, optionally after one system message, is supported; "
                f"got roles {roles}",
            )
        contents = [message_content(m) for m in messages]
        chat = self.server.chat_model
        if chat is None:  # vLLM 0.32's words (its /tokenize and chat endpoints alike)
            raise HTTPError(400, NO_CHAT_TEMPLATE)
        if len(messages) == 1:
            return chat, contents[0]
        # A system message: render the template here and run the prompt raw.
        prompt = chat.tokenizer.apply_chat_template(
            [{"role": r, "content": c} for r, c in zip(roles, contents, strict=True)],
            tokenize=False,
            add_generation_prompt=True,
        )
        return self.server.raw_model, str(prompt)

    def chat_completions(self, req: JSON) -> JSON:
        self._check_model(req)
        model, prompt = self._chat_prompt(req.get("messages"))
        max_tokens = self._int(
            req, "max_completion_tokens", self._int(req, "max_tokens", DEFAULT_MAX_TOKENS)
        )
        assert max_tokens is not None
        if max_tokens < 1:
            raise HTTPError(400, f"max_tokens must be at least 1, got {max_tokens}")
        temperature, seed, stop = self._sampling(req)
        with self.server.lock:
            n_prompt = n_tokens(model, prompt)
            max_tokens = check_window(model, n_prompt, max_tokens, self.server.clip)
            with metered() as tally:
                (text,) = model.generate(
                    [prompt],
                    max_new_tokens=max_tokens,
                    temperature=temperature,
                    seed=seed,
                    stop=stop,
                )
            n_new = tally.total.generated_tokens
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.server.model_name,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "logprobs": None,
                    "finish_reason": "length" if n_new >= max_tokens else "stop",
                }
            ],
            "usage": usage_body(n_prompt, n_new),
        }

    def tokenize(self, req: JSON) -> JSON:
        self._check_model(req)
        model = self.server.raw_model
        if "messages" in req:  # a chat request, counted as /v1/chat/completions reads it
            with self.server.lock:
                chat, text = self._chat_prompt(req["messages"])
                ids = prompt_ids(chat, text)
            return {"count": len(ids), "max_model_len": model.max_context, "tokens": ids}
        prompt = req.get("prompt")
        if not isinstance(prompt, str):
            raise HTTPError(400, "prompt must be a string")
        special = bool(req.get("add_special_tokens", True))
        with self.server.lock:
            ids = list(model.tokenizer(prompt, add_special_tokens=special)["input_ids"])
            wanted = req.get("return_token_strs") and self.server.token_strs
            strs = model.tokenizer.convert_ids_to_tokens(ids) if wanted else None
        reply: JSON = {"count": len(ids), "max_model_len": model.max_context, "tokens": ids}
        if strs is not None:
            reply["token_strs"] = strs  # as vLLM: the tokenizer's own token strings
        return reply


class ModelServer(InjectingServer):
    """The OpenAI-compatible server for one local model (see the module docstring).

    Use :func:`serve` to get one already running in a background thread. The testing
    aids (``fail_next``, ``break_next``, ``count``) and the lifecycle (``start``,
    ``shutdown``, a ``with`` block) are :class:`~rag_position.testing._faults.InjectingServer`'s.

    Example:
        >>> with serve(model, port=0) as server:          # port 0: any free port
        ...     print(server.url)
        http://127.0.0.1:40513/v1
    """

    def __init__(
        self,
        model: TransformersModel,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        name: str | None = None,
        handler: type[OpenAIHandler] = OpenAIHandler,
        token_strs: bool = False,
        clip_to_window: bool = False,
    ) -> None:
        super().__init__((host, port), handler)
        self.token_strs = token_strs
        self.clip = clip_to_window
        self.model_name = name or model.name
        self.raw_model, self.chat_model = _variants(model)
        self.created = int(time.time())
        self.lock = threading.Lock()  # one model: requests that touch it run one at a time

    @property
    def url(self) -> str:
        """Base URL for OpenAI clients, e.g. ``http://127.0.0.1:8000/v1``."""
        return self.address + "/v1"


def _variants(model: TransformersModel) -> tuple[TransformersModel, TransformersModel | None]:
    """(raw, chat): the same weights with the chat template off and on (None: no template)."""

    settings: dict[str, Any] = {
        "max_batch_tokens": model.max_batch_tokens,
        "max_batch_size": model.max_batch_size,
        "max_context": model.max_context,
        "score_batch_size": model.score_batch_size,
    }

    def copy(chat_template: bool) -> TransformersModel:
        return TransformersModel(
            model.model, model.tokenizer, name=model.name, chat_template=chat_template, **settings
        )

    if model.use_chat_template:
        return copy(False), model
    chat = copy(True)
    return model, chat if chat.use_chat_template else None


def serve(
    model: TransformersModel,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    name: str | None = None,
    handler: type[OpenAIHandler] = OpenAIHandler,
    token_strs: bool = False,
    clip_to_window: bool = False,
) -> ModelServer:
    """Start a :class:`ModelServer` for ``model`` in a background thread and return it.

    ``name`` is the served model name (default ``model.name``); ``port=0`` picks a free
    port; ``token_strs`` makes ``/tokenize`` return token strings when asked. Stop it
    with ``.shutdown()`` or use it as a context manager.

    Example:
        >>> server = serve(load_model("embedded"))
        >>> remote = load_model("openai:" + server.url)
        >>> server.shutdown()
    """
    return ModelServer(
        model,
        host,
        port,
        name=name,
        handler=handler,
        token_strs=token_strs,
        clip_to_window=clip_to_window,
    ).start()


__all__ = ["BREAKS", "NO_CHAT_TEMPLATE", "HTTPError", "ModelServer", "OpenAIHandler", "serve"]
