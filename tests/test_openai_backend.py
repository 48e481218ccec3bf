"""The openai: backend against the test double of a server (rag_position.testing.openai_double)."""

from __future__ import annotations

import copy
import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from _backends_kit import NoTokenize

from rag_position.errors import (
    BackendError,
    BackendUnavailableError,
    ContextLengthError,
    ModelSpecError,
    ScoringUnsupportedError,
)
from rag_position.eval.engine.common import answer_stop
from rag_position.models import Generator, Scorer, load_model
from rag_position.models.openai_backend import OpenAICompatibleModel
from rag_position.models.transformers_backend import TransformersModel
from rag_position.serving import free_port
from rag_position.testing.openai_double import (
    NO_CHAT_TEMPLATE,
    HTTPError,
    ModelServer,
    OpenAIHandler,
    serve,
)

pytestmark = pytest.mark.slow

PROMPT = (
    "Answer the question using the documents.\n\n"
    "Document [1](Title: Paris) Paris is the capital and most populous city of France, "
    "on the river Seine.\n"
    "Document [2](Title: Lyon) Lyon is the third-largest city of France, at the confluence "
    "of the Rhone and the Saone.\n"
    "Document [3](Title: Marseille) Marseille is a port city on the Mediterranean coast.\n\n"
    "Question: what is the capital of France?\nAnswer:"
)
SHORT = ["What is the capital of France?", "Name a color of the sky."]


def _spans(prompt: str) -> dict[str, tuple[int, int]]:
    q = prompt.index("Question:")
    mid = prompt.index("Document [2]")
    return {
        "start": (0, 14),  # its first token is never scored
        "start-after-first-token": (7, 30),
        "middle": (mid, mid + 60),
        "inside-words": (mid + 3, mid + 17),
        "end": (q, len(prompt)),
        "last-char": (len(prompt) - 1, len(prompt)),
    }


@pytest.fixture(scope="module")
def server(embedded_fp32: TransformersModel) -> Iterator[ModelServer]:
    with serve(embedded_fp32) as srv:
        yield srv


def _client(srv: ModelServer, **kwargs: Any) -> OpenAICompatibleModel:
    return OpenAICompatibleModel(srv.url, srv.model_name, **kwargs)


def _post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


# ---------------------------------------------------------------------- scoring
def test_score_spans_equal_local_backend(
    server: ModelServer, embedded_raw: TransformersModel
) -> None:
    other = PROMPT.replace("Paris is the capital", "Paris, the capital,")
    spans = _spans(PROMPT)
    prompts = [PROMPT] * len(spans) + [other]
    wanted_spans = [*spans.values(), (other.index("Question:"), len(other))]
    remote = _client(server, chat_template=True)  # scoring is raw whatever chat_template says
    assert isinstance(remote, Scorer) and isinstance(remote, Generator)
    before = server.count("/v1/completions")
    got = remote.score_spans(prompts, wanted_spans)
    want = embedded_raw.score_spans(prompts, wanted_spans)
    assert server.count("/v1/completions") - before == len(prompts)  # one request per prompt
    for name, g, w in zip([*spans, "other-prompt"], got, want, strict=True):
        assert g.n_tokens == w.n_tokens, name
        assert g.mean == pytest.approx(w.mean, abs=1e-4), name
        assert g.sum == pytest.approx(w.sum, abs=1e-4), name
    assert remote.usage.lm_calls == len(prompts)
    assert remote.usage.prompt_tokens > 0 and remote.usage.generated_tokens == 0


def test_score_spans_argument_errors(server: ModelServer) -> None:
    remote = _client(server)
    before = len(server.requests)
    assert remote.score_spans([], []) == []
    with pytest.raises(ValueError, match="2 prompts but 1 spans"):
        remote.score_spans(["ab", "cd"], [(0, 1)])
    with pytest.raises(ValueError, match="empty"):
        remote.score_spans(["abc"], [(2, 2)])
    with pytest.raises(ValueError, match="outside the prompt"):
        remote.score_spans(["abc"], [(1, 9)])
    assert len(server.requests) == before  # all refused before any request
    with pytest.raises(ValueError, match="no scorable token"):
        remote.score_spans([PROMPT], [(0, 3)])  # only the first token


def test_completions_echo_format(server: ModelServer, embedded_raw: TransformersModel) -> None:
    prompt = "The sky is"
    echo = {"model": server.model_name, "prompt": prompt, "echo": True, "logprobs": 0}
    status, body = _post(server.url + "/completions", {**echo, "max_tokens": 0})
    assert status == 200
    choice = body["choices"][0]
    assert choice["text"] == prompt
    lp = choice["logprobs"]
    scored = embedded_raw.token_logprobs(prompt)
    assert lp["tokens"] == scored.tokens and lp["token_logprobs"][0] is None
    assert lp["text_offset"] == [a for a, _ in scored.offsets]
    assert lp["top_logprobs"][0] is None and len(lp["top_logprobs"]) == len(lp["tokens"])
    assert body["usage"] == {"prompt_tokens": 3, "completion_tokens": 0, "total_tokens": 3}
    # With generated tokens: prompt tokens, then completion tokens, offsets into the text.
    echo |= {"logprobs": 1, "max_tokens": 3, "temperature": 0}
    status, body = _post(server.url + "/completions", echo)
    lp = body["choices"][0]["logprobs"]
    text = body["choices"][0]["text"]
    assert status == 200 and text.startswith(prompt) and len(text) > len(prompt)
    assert len(lp["tokens"]) > 3 and lp["text_offset"][3] == len(prompt)
    assert all(isinstance(v, float) for v in lp["token_logprobs"][1:])


def test_server_errors_are_openai_style(server: ModelServer) -> None:
    cases: list[tuple[str, dict[str, Any], int]] = [
        ("/nothing", {}, 404),
        ("/completions", {"prompt": "x", "model": "other"}, 404),
        ("/completions", {"prompt": "x", "max_tokens": 0}, 400),
        ("/completions", {"prompt": 3}, 400),
        ("/chat/completions", {"messages": [{"role": "assistant", "content": "x"}]}, 400),
    ]
    for path, body, status in cases:
        got, reply = _post(server.url + path, body)
        assert got == status, path
        assert set(reply["error"]) >= {"message", "type", "code"}
    request = urllib.request.Request(server.url + "/completions", b"{not json", method="POST")
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=10)
    assert info.value.code == 400


# ---------------------------------------------------------------------- generation
@pytest.mark.parametrize("chat", [True, False], ids=["chat", "completions"])
def test_generate_equals_local_greedy(
    server: ModelServer,
    embedded_fp32: TransformersModel,
    embedded_raw: TransformersModel,
    chat: bool,
) -> None:
    local = embedded_fp32 if chat else embedded_raw
    remote = _client(server, chat_template=chat)
    endpoint = "/v1/chat/completions" if chat else "/v1/completions"
    before = server.count(endpoint)
    got = remote.generate(SHORT, max_new_tokens=10)
    assert server.count(endpoint) - before == len(SHORT)
    assert got == [local.generate([p], max_new_tokens=10)[0] for p in SHORT]
    assert remote.usage.lm_calls == 2 and 0 < remote.usage.generated_tokens <= 20


def test_generate_stop_and_system_message(server: ModelServer) -> None:
    remote = _client(server, chat_template=False)
    (text,) = remote.generate(["1, 2, 3, 4,"], max_new_tokens=12, stop=[" 6"])
    assert " 6" not in text
    status, body = _post(
        server.url + "/chat/completions",
        {
            "messages": [
                {"role": "system", "content": "Answer in one word."},
                {"role": "user", "content": "Capital of France?"},
            ],
            "max_tokens": 4,
            "temperature": 0,
        },
    )
    assert status == 200 and isinstance(body["choices"][0]["message"]["content"], str)


# ---------------------------------------------------------------------- chat template
@pytest.fixture(scope="module")
def base_model_server(embedded_fp32: TransformersModel) -> Iterator[ModelServer]:
    """The embedded weights served as a base model: a tokenizer without a chat template."""
    tokenizer = copy.copy(embedded_fp32.tokenizer)  # the session's tokenizer keeps its own
    tokenizer.chat_template = None
    base = TransformersModel(embedded_fp32.model, tokenizer, name="base", chat_template=False)
    with serve(base) as srv:
        yield srv


def test_the_chat_template_is_detected_once_without_generating(
    server: ModelServer, base_model_server: ModelServer, embedded_raw: TransformersModel
) -> None:
    for srv, has_template in ((server, True), (base_model_server, False)):
        remote = load_model(f"openai:{srv.url}/{srv.model_name}")  # chat_template=None
        asked = srv.count("/tokenize")
        assert remote.use_chat_template is has_template
        assert remote.use_chat_template is has_template  # asked once, then remembered
        assert srv.count("/tokenize") - asked == 1
        assert answer_stop(remote) == (() if has_template else ("\n",))
        used = "/v1/chat/completions" if has_template else "/v1/completions"
        before = srv.count(used)
        remote.generate(["The capital of France is"], max_new_tokens=4)
        assert srv.count(used) - before == 1
        assert srv.count("/tokenize") - asked == 1
    # the base model's answer is the raw completion, as the local backend's
    base = load_model(f"openai:{base_model_server.url}/base")
    raw = ["1, 2, 3, 4,"]
    assert base.generate(raw, max_new_tokens=6, stop=["\n"]) == embedded_raw.generate(
        raw, max_new_tokens=6, stop=["\n"]
    )
    assert base_model_server.count("/v1/chat/completions") == 0  # never tried
    # what vLLM answers a base model's chat request, the double answers too
    status, body = _post(
        base_model_server.url.removesuffix("/v1") + "/tokenize",
        {"model": "base", "messages": [{"role": "user", "content": "Hi"}]},
    )
    assert status == 400 and body["error"]["message"] == NO_CHAT_TEMPLATE
    status, _ = _post(
        base_model_server.url + "/chat/completions",
        {"model": "base", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2},
    )
    assert status == 400


def test_a_given_chat_template_is_not_asked_for(server: ModelServer) -> None:
    before = server.count("/tokenize")
    for given in (True, False):
        remote = load_model(f"openai:{server.url}/{server.model_name}", chat_template=given)
        assert remote.use_chat_template is given
    assert server.count("/tokenize") == before
    remote.use_chat_template = True
    assert remote.use_chat_template is True
    with pytest.raises(TypeError, match="True, False or None"):
        _client(server, chat_template="yes")
    with pytest.raises(ValueError, match="scoring must be one of auto, forced, echo"):
        _client(server, scoring="fast")
    for key, says in ((" sk-SECRET\n", "white space"), ("sk-SECRÉT", "0xc9"), ("a\r\nb", "0x0d")):
        with pytest.raises(ValueError, match=says) as info:  # at once, not as "unreachable"
            _client(server, api_key=key)
        assert "SECRET" not in str(info.value)  # the key itself never in a message


class _OtherRefusal(OpenAIHandler):
    def tokenize(self, req: dict[str, Any]) -> dict[str, Any]:
        raise HTTPError(400, "messages are not supported here")


@pytest.mark.parametrize("handler", [NoTokenize, _OtherRefusal], ids=["404", "other-400"])
def test_a_server_that_cannot_say_keeps_the_chat_endpoint(
    embedded_fp32: TransformersModel, handler: type[OpenAIHandler]
) -> None:
    with serve(embedded_fp32, handler=handler) as srv:
        remote = _client(srv, max_retries=0)
        assert remote.use_chat_template is True
        assert srv.count("/tokenize") == 1


def test_an_unreachable_server_is_an_error_and_is_asked_again() -> None:
    remote = OpenAICompatibleModel(
        f"http://127.0.0.1:{free_port()}/v1", "m", timeout=0.5, max_retries=0
    )
    for _ in range(2):  # not remembered as an answer
        with pytest.raises(BackendUnavailableError, match=r"/tokenize for model 'm'"):
            remote.use_chat_template  # noqa: B018
    assert remote._chat_template is None


# ---------------------------------------------------------------------- loading
def test_load_model_spec_forms_and_an_unknown_model(
    server: ModelServer, embedded_raw: TransformersModel
) -> None:
    name = server.model_name
    by_kwarg = load_model("openai:" + server.url, model=name, timeout=5.0)
    in_url = load_model(f"openai:{server.url}/{name}")
    detected = load_model("openai:" + server.url)
    bare = load_model("openai:" + server.url.removesuffix("/v1"))  # /v1 added
    for model in (by_kwarg, in_url, detected, bare):
        assert isinstance(model, OpenAICompatibleModel)
        assert model.name == name and model.base_url == server.url
    assert by_kwarg.timeout == 5.0
    # through the server's /tokenize
    assert detected.count_tokens(PROMPT) == embedded_raw.count_tokens(PROMPT)
    assert detected.max_context == 8192
    with pytest.raises(ModelSpecError, match="give one"):
        load_model(f"openai:{server.url}/{name}", model="other")
    with pytest.raises(ModelSpecError, match="http"):
        load_model("openai:localhost:8000")
    remote = OpenAICompatibleModel(server.url, "no-such-model", max_retries=0)
    with pytest.raises(BackendError, match=r"404.*does not exist"):
        remote.generate(["hi"], max_new_tokens=2)


# ---------------------------------------------------------------------- faults
def test_5xx_and_429_are_retried_then_reported(server: ModelServer) -> None:
    # echo: the faults go to the scoring request itself, not to a probe for forcing
    remote = _client(server, chat_template=False, max_retries=4, scoring="echo")
    assert remote.max_context == server.raw_model.max_context  # read once, before the faults
    before = server.count("/v1/completions")
    server.fail_next(2, status=500)  # the client's own exponential backoff: ~0.5 s + ~1 s
    assert len(remote.generate(["Hello"], max_new_tokens=2)) == 1
    assert server.count("/v1/completions") - before == 3
    server.fail_next(2, status=429, retry_after=0.01)
    assert remote.score_spans(["Hello there"], [(5, 11)])[0].n_tokens == 1
    assert server.count("/v1/completions") - before == 6
    # a failing /tokenize while probing for forced scoring is retried, then an error:
    # never a silent switch to another way of scoring
    probing = _client(server, max_retries=0)
    server.fail_next(1, status=503, retry_after=0.01, message="tokenizer down")
    with pytest.raises(BackendError, match=r"/tokenize answered HTTP 503.*tokenizer down"):
        probing.score_spans(["Hello there"], [(5, 11)])
    # retries exhausted: the status and the server's message
    remote = _client(server, max_retries=1)
    assert remote.max_context  # the window is read first, once
    server.fail_next(2, status=503, retry_after=0.01, message="overloaded, try later")
    with pytest.raises(BackendError, match=r"503 after 1 retries.*overloaded, try later"):
        remote.generate(["Hello"], max_new_tokens=2)


@pytest.mark.parametrize("kind", ["nothing-listening", "never-answers"])
def test_server_down_is_unavailable_within_timeout(kind: str) -> None:
    timeout, retries = 0.5, 1
    with socket.socket() as sock:
        if kind == "never-answers":  # accepts connections (backlog) but never replies
            sock.bind(("127.0.0.1", 0))
            sock.listen(4)
            port = sock.getsockname()[1]
        else:
            port = free_port()
        remote = OpenAICompatibleModel(
            f"http://127.0.0.1:{port}/v1", "m", timeout=timeout, max_retries=retries
        )
        start = time.perf_counter()
        with pytest.raises(BackendUnavailableError, match=f"127.0.0.1:{port}") as info:
            remote.score_spans(["Hello there"], [(5, 11)])
        elapsed = time.perf_counter() - start
    assert "max_retries=1" in str(info.value)
    # the timeout is the whole call's deadline, retries and backoff included
    assert elapsed < timeout + 0.5


class _TwoModelsNoLogprobs(OpenAIHandler):
    """Two models, completions without prompt log-probabilities (as OpenAI's chat models)."""

    def models(self, req: dict[str, Any]) -> dict[str, Any]:
        body = super().models(req)
        body["data"].append({**body["data"][0], "id": "second-model"})
        return body

    def postprocess(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        for choice in body.get("choices", []):
            choice["logprobs"] = None
        return body


def test_several_models_need_a_name_and_scoring_needs_prompt_logprobs(
    embedded_fp32: TransformersModel,
) -> None:
    with serve(embedded_fp32, handler=_TwoModelsNoLogprobs) as srv:
        with pytest.raises(ModelSpecError, match=r"2 models.*second-model"):
            load_model("openai:" + srv.url)
        assert load_model("openai:" + srv.url, model="second-model").name == "second-model"
        with pytest.raises(ScoringUnsupportedError, match="cannot return prompt log-prob"):
            _client(srv).score_spans(["Hello there"], [(5, 11)])


def test_prompt_over_the_window(embedded_fp32: TransformersModel) -> None:
    src = embedded_fp32
    small = TransformersModel(
        src.model, src.tokenizer, name="small-window", chat_template=False, max_context=64
    )
    with serve(small) as srv:
        remote = _client(srv, chat_template=False, max_retries=0)
        n = small.count_tokens(PROMPT)
        assert n > 64
        with pytest.raises(ContextLengthError, match="over the model's context window of 64"):
            remote.score_spans(["Hello there", PROMPT], [(5, 11), (0, 20)])
        with pytest.raises(ContextLengthError, match="prompt 0 plus max_new_tokens=5") as info:
            remote.generate([PROMPT], max_new_tokens=5)
        assert (info.value.n_tokens, info.value.limit) == (n + 5, 64)
        with pytest.raises(ContextLengthError):
            _client(srv, chat_template=True, max_retries=0).generate(["Hi " * 80])


class _RefusesZeroMaxTokens(OpenAIHandler):
    """Like servers that insist on max_tokens >= 1 even with echo."""

    def completions(self, req: dict[str, Any]) -> dict[str, Any]:
        if req.get("max_tokens") == 0:
            raise HTTPError(400, "max_tokens must be at least 1, got 0.")
        return super().completions(req)


def test_server_refusing_zero_max_tokens(
    embedded_fp32: TransformersModel, embedded_raw: TransformersModel
) -> None:
    prompt, span = PROMPT, _spans(PROMPT)["end"]
    with serve(embedded_fp32, handler=_RefusesZeroMaxTokens) as srv:
        remote = _client(srv)
        got = remote.score_spans([prompt, prompt], [span, span])
        # the generated token is ignored: same score as the prompt alone
        want = embedded_raw.score_spans([prompt], [span])[0]
        assert [g.n_tokens for g in got] == [want.n_tokens] * 2
        assert got[0].mean == pytest.approx(want.mean, abs=1e-4)
        assert srv.count("/v1/completions") <= 4  # one refusal per prompt at most
        before = srv.count("/v1/completions")
        remote.score_spans([prompt], [span])
        assert srv.count("/v1/completions") - before == 1  # asks max_tokens=1 from then on


def test_count_tokens_with_tiktoken(monkeypatch: pytest.MonkeyPatch) -> None:
    import tiktoken

    class Encoding:
        def encode(self, text: str, disallowed_special: Any = ()) -> list[int]:
            return list(range(len(text.split())))

    def unknown(name: str) -> Any:
        raise KeyError(name)

    monkeypatch.setattr(tiktoken, "encoding_for_model", unknown)
    monkeypatch.setattr(tiktoken, "get_encoding", lambda name: Encoding())
    assert OpenAICompatibleModel("http://127.0.0.1:9/v1", "gpt-9").count_tokens("a b c") == 3

    def offline(name: str) -> Any:
        raise OSError("no network")

    monkeypatch.setattr(tiktoken, "get_encoding", offline)
    with pytest.raises(BackendError, match="TIKTOKEN_CACHE_DIR"):
        OpenAICompatibleModel("http://127.0.0.1:9/v1", "gpt-4o").count_tokens("a b c")


# ---------------------------------------------------------------------- forced scoring
def test_a_server_that_does_not_force_is_detected_and_scored_by_echo(
    server: ModelServer, embedded_fp32: TransformersModel
) -> None:
    """A double with token strings, like a vLLM without rag-position's processor: it
    ignores vllm_xargs, so the output is not the forced tokens. One without token strings
    is probed once too."""
    prompt, span = PROMPT, _spans(PROMPT)["end"]
    with serve(embedded_fp32, token_strs=True) as srv:
        echo = _client(srv, scoring="echo").score_spans([prompt], [span])[0]
        auto = _client(srv)  # scoring="auto"
        before = srv.count("/tokenize"), srv.count("/v1/completions")
        got = auto.score_spans([prompt] * 4, [span] * 4)
        # one probe (tokenize + a completion that comes back unforced), then echo only
        assert srv.count("/tokenize") - before[0] == 1
        assert srv.count("/v1/completions") - before[1] == 1 + 4
        assert got == [echo] * 4
        assert auto.usage.generated_tokens == 0  # scoring generates nothing
        with pytest.raises(ScoringUnsupportedError, match="rag-position serve"):
            _client(srv, scoring="forced").score_spans([prompt], [span])
    auto = _client(server)
    before = server.count("/tokenize"), server.count("/v1/completions")
    auto.score_spans([prompt] * 3, [span] * 3)
    assert server.count("/tokenize") - before[0] == 1
    assert server.count("/v1/completions") - before[1] == 3  # echo alone


def test_token_char_ranges_follow_the_bytes() -> None:
    from rag_position.models.openai_backend import token_char_ranges

    # byte-level BPE: "Ġ" is a space; "é" split over two tokens (0xC3, 0xA9)
    assert token_char_ranges(["Hi", "Ġthere"], "Hi there") == ([0, 2], [2, 8])
    assert token_char_ranges(["caf", "Ã", "©", "!"], "café!") == ([0, 3, 3, 4], [3, 4, 4, 5])
    assert token_char_ranges(["<s>", "Hi"], "Hi") == ([0, 0], [0, 2])  # a BOS the text lacks
    assert token_char_ranges(["Hi", "Ġthere"], "Hi here") is None  # not this text: no ranges
    # SentencePiece: "▁" is a space, <0x0A> a byte; the space before the first word and
    # the BOS are not in the text
    assert token_char_ranges(["▁a", "<0x0A>", "b"], " a\nb") == ([0, 2, 3], [2, 3, 4])
    assert token_char_ranges(["<s>", "▁Hello", "▁world"], "Hello world") == ([0, 0, 5], [0, 5, 11])
    # a BOS outside the byte-level alphabet does not decide how the rest is read
    bos = "<\uff5cbegin\u2581of\u2581sentence\uff5c>"  # DeepSeek's
    assert token_char_ranges([bos, "Hi", "Ġyou"], "Hi you") == ([0, 0, 2], [0, 2, 6])
