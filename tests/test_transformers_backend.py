"""The local transformers backend on the embedded model: exact span scores, generation."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from rag_position.errors import ContextLengthError, ModelSpecError
from rag_position.models import Generator, Scorer, SpanScore, load_model
from rag_position.models.transformers_backend import TransformersModel, resolve_dtype

DATA = Path(__file__).resolve().parents[1] / "rag_position" / "data" / "files"  # in the repo
BF16_TOLERANCE = 0.05  # documented in README: bf16 mean log-prob vs float32, per span


def _nq_prompt(n_docs: int = 5) -> tuple[str, str]:
    """A real multi-passage prompt from the NQ oracle file, built by hand (no library code)."""
    with gzip.open(DATA / "nq-open-oracle-dev.jsonl.gz", "rt") as f:
        rows = [json.loads(next(f)) for _ in range(n_docs)]
    docs = "\n".join(
        f"Document [{i + 1}](Title: {r['ctxs'][0]['title']}) {r['ctxs'][0]['text']}"
        for i, r in enumerate(rows)
    )
    question = rows[2]["question"]
    return f"Answer the question.\n\n{docs}\n\nQuestion: {question}\nAnswer:", question


def _reference(
    model: TransformersModel, prompt: str, spans: list[tuple[int, int]]
) -> list[SpanScore]:
    """Independent plain computation: whole forward pass, full logits, log-softmax, gather."""
    text = model._apply_template(prompt) if model.use_chat_template else prompt
    shift = text.index(prompt) if model.use_chat_template else 0
    enc = model.tokenizer(
        text, add_special_tokens=not model.use_chat_template, return_offsets_mapping=True
    )
    ids = torch.tensor([enc["input_ids"]])
    with torch.no_grad():
        logp = torch.log_softmax(model.model(ids).logits[0].float(), dim=-1)
    out = []
    for lo, hi in spans:
        values = [
            logp[j - 1, ids[0, j]].item()
            for j in range(1, ids.shape[1])
            if max(enc["offset_mapping"][j][0], lo + shift)
            < min(enc["offset_mapping"][j][1], hi + shift)
        ]
        out.append(SpanScore(sum(values) / len(values), sum(values), len(values)))
    return out


def _spans(prompt: str, question: str) -> dict[str, tuple[int, int]]:
    q = prompt.rindex(question)
    mid = prompt.index("Document [3]")
    return {
        "start": (0, 20),
        "middle": (mid, mid + 60),
        "end": (q - len("Question: "), len(prompt)),
        "question": (q, q + len(question)),
        "inside-a-token": (q + 2, q + 7),
    }


@pytest.fixture(scope="module", params=["chat", "raw", "chat-padded-batches"])
def model32(request: Any, embedded_fp32: Any, embedded_raw: Any) -> TransformersModel:
    if request.param == "chat-padded-batches":  # on CPU the default scores one prompt at a time
        return TransformersModel(
            embedded_fp32.model, embedded_fp32.tokenizer, name="padded", score_batch_size=8
        )
    return embedded_fp32 if request.param == "chat" else embedded_raw  # type: ignore[no-any-return]


def test_backend_satisfies_protocols(embedded_fp32: Any) -> None:
    assert isinstance(embedded_fp32, Generator)
    assert isinstance(embedded_fp32, Scorer)
    assert embedded_fp32.dtype == torch.float32
    assert embedded_fp32.max_context == 8192


def test_span_scores_equal_plain_computation_fp32(model32: TransformersModel) -> None:
    prompt, question = _nq_prompt(4)
    spans = _spans(prompt, question)
    batched = model32.score_spans([prompt] * len(spans), list(spans.values()))
    wanted = _reference(model32, prompt, list(spans.values()))
    for (name, span), got, want in zip(spans.items(), batched, wanted, strict=True):
        alone = model32.score_spans([prompt], [span])[0]
        assert got.n_tokens == want.n_tokens == alone.n_tokens, name
        assert got.mean == pytest.approx(want.mean, abs=1e-4), name
        assert got.sum == pytest.approx(want.sum, abs=1e-3 * max(1, want.n_tokens)), name
        assert alone.mean == pytest.approx(want.mean, abs=1e-4), name


def test_padded_batch_of_different_lengths_matches_alone(embedded_fp32: TransformersModel) -> None:
    padded = TransformersModel(
        embedded_fp32.model, embedded_fp32.tokenizer, name="padded", score_batch_size=8
    )
    long_prompt, question = _nq_prompt()
    prompts = [long_prompt, "Question: who wrote hamlet?\nAnswer:", "Short one. Question: why?"]
    spans = [(long_prompt.rindex(question), len(long_prompt)), (10, 26), (11, 25)]
    before = padded.usage.seconds
    batched = padded.score_spans(prompts, spans)
    assert padded.usage.lm_calls == 3
    assert padded.usage.seconds > before
    for p, s, got in zip(prompts, spans, batched, strict=True):
        assert got.mean == pytest.approx(embedded_fp32.score_spans([p], [s])[0].mean, abs=1e-4)


def test_bf16_within_documented_tolerance(
    embedded_fp32: TransformersModel, embedded_bf16: TransformersModel
) -> None:
    prompt, question = _nq_prompt(10)
    spans = list(_spans(prompt, question).values())
    ref = embedded_fp32.score_spans([prompt] * len(spans), spans)
    got = embedded_bf16.score_spans([prompt] * len(spans), spans)
    for r, g in zip(ref, got, strict=True):
        assert g.n_tokens == r.n_tokens
        assert abs(g.mean - r.mean) < BF16_TOLERANCE


def test_empty_and_bad_input(embedded_raw: TransformersModel) -> None:
    assert embedded_raw.score_spans([], []) == []
    prompt = "Paris is the capital of France."  # its first token has no prediction
    first = embedded_raw.tokenizer(prompt, return_offsets_mapping=True)["offset_mapping"][0]
    with pytest.raises(ValueError, match="covers no scorable token"):
        embedded_raw.score_spans([prompt], [(first[0], first[1])])
    whole = embedded_raw.score_spans([prompt], [(0, len(prompt))])[0]
    assert whole.n_tokens == embedded_raw.count_tokens(prompt) - 1
    with pytest.raises(ValueError, match=r"span \(3, 3\) of prompt 0 is empty"):
        embedded_raw.score_spans(["hello world"], [(3, 3)])
    with pytest.raises(ValueError, match="outside the prompt"):
        embedded_raw.score_spans(["hello world"], [(5, 40)])
    with pytest.raises(ValueError, match="outside the prompt"):
        embedded_raw.score_spans(["hello world"], [(-1, 4)])
    with pytest.raises(ValueError, match="2 prompts but 1 spans"):
        embedded_raw.score_spans(["a b", "c d"], [(0, 1)])
    assert embedded_raw.generate([]) == []
    with pytest.raises(ValueError, match="prompt 1 is empty"):
        embedded_raw.generate(["hi", ""])
    with pytest.raises(ValueError, match="max_new_tokens"):
        embedded_raw.generate(["hi"], max_new_tokens=0)


def test_prompt_over_the_window_is_an_error_not_truncated(embedded_fp32: TransformersModel) -> None:
    prompt = "word " * 9000
    with pytest.raises(ContextLengthError, match=r"9\d\d\d tokens, over .* window of 8192"):
        embedded_fp32.score_spans([prompt], [(0, 10)])
    small = TransformersModel(
        embedded_fp32.model, embedded_fp32.tokenizer, name="small", max_context=64
    )
    with pytest.raises(ContextLengthError, match="max_new_tokens=20") as info:
        small.generate(["word " * 40], max_new_tokens=20)
    assert info.value.limit == 64


def test_greedy_generation_is_deterministic_and_batch_invariant(
    embedded_fp32: TransformersModel, embedded_bf16: TransformersModel
) -> None:
    prompt, _ = _nq_prompt(3)
    prompts = [prompt, "What is the capital of France?", "Name three colors."]
    for model in (embedded_fp32, embedded_bf16):
        batched = model.generate(prompts, max_new_tokens=24)
        again = model.generate(prompts, max_new_tokens=24)
        alone = [model.generate([p], max_new_tokens=24)[0] for p in prompts]
        assert batched == again == alone, model.name
        assert all(isinstance(t, str) and t for t in batched)
    (paris,) = embedded_fp32.generate(["What is the capital of France?"], max_new_tokens=12)
    assert "Paris" in paris
    full = embedded_fp32.generate(["Name three colors."], max_new_tokens=24)[0]
    assert "\n" in full  # the model lists them one per line: a stop string cuts there
    cut = embedded_fp32.generate(["Name three colors."], max_new_tokens=24, stop=["\n"])[0]
    assert cut == full[: full.index("\n")]


def _hf_alone(model: TransformersModel, prompts: list[str], **kwargs: Any) -> list[str]:
    """One prompt at a time through transformers' own ``generate`` (the reference)."""
    model.split_prefill = False
    try:
        return [model.generate([p], **kwargs)[0] for p in prompts]
    finally:
        model.split_prefill = True


def test_cpu_batches_prefill_alone_and_decode_together(embedded_fp32: TransformersModel) -> None:
    """Greedy CPU batches equal transformers' generate one by one (very different lengths,
    early ends, budget cuts); the meter counts each answer's tokens with its EOS."""
    assert embedded_fp32.split_prefill  # the CPU default
    long, _ = _nq_prompt(5)
    prompts = ["Name three colors.", long, "What is the capital of France?", "Hi", long[:400]]
    for budget in (1, 7, 40):
        expected = _hf_alone(embedded_fp32, prompts, max_new_tokens=budget)
        before = embedded_fp32.usage
        got = embedded_fp32.generate(prompts, max_new_tokens=budget)
        spent = embedded_fp32.usage - before
        assert got == expected, budget
        assert spent.lm_calls == len(prompts)
        assert len(prompts) <= spent.generated_tokens <= budget * len(prompts)
    stop = ["\n"]
    assert embedded_fp32.generate(prompts, max_new_tokens=24, stop=stop) == _hf_alone(
        embedded_fp32, prompts, max_new_tokens=24, stop=stop
    )


def test_split_prefill_falls_back_for_a_cache_it_cannot_merge(
    embedded_fp32: TransformersModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model whose cache is not plain full attention (sliding windows) is answered by
    transformers' generate, and the model remembers not to try again."""
    import transformers.cache_utils as cache_utils

    class Sliding(cache_utils.DynamicLayer):
        pass

    real = cache_utils.DynamicCache

    def sliding_cache(*args: Any, **kwargs: Any) -> Any:
        cache = real(*args, **kwargs)
        cache.layer_class_to_replicate = Sliding
        return cache

    expected = _hf_alone(embedded_fp32, ["Name three colors."], max_new_tokens=12)
    monkeypatch.setattr(cache_utils, "DynamicCache", sliding_cache)
    try:
        got = embedded_fp32.generate(["Name three colors.", "Hi"], max_new_tokens=12)
        assert not embedded_fp32.split_prefill
    finally:
        embedded_fp32.split_prefill = True
    assert got[0] == expected[0]


@pytest.mark.slow  # loads the embedded model itself
def test_gguf_is_converted_once_into_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A GGUF load reads its float32 conversion, made once into the cache: the same model."""
    from rag_position.models.embedded import embedded_gguf_path

    monkeypatch.setenv("RAG_POSITION_CACHE", str(tmp_path))
    first = load_model("embedded", dtype="float32")
    folders = list((tmp_path / "models").iterdir())
    assert len(folders) == 1 and (folders[0] / ".complete").is_file()
    stamp = (folders[0] / "config.json").stat().st_mtime_ns
    second = load_model(f"hf:{embedded_gguf_path()}", dtype="float32")
    assert (folders[0] / "config.json").stat().st_mtime_ns == stamp  # not converted again
    assert second.name.endswith(".gguf")  # named after the file, not the cache folder
    prompt = "What is the capital of France?"
    assert first.generate([prompt], max_new_tokens=12) == second.generate(
        [prompt], max_new_tokens=12
    )


def test_sampling_is_reproducible_by_seed(embedded_fp32: TransformersModel) -> None:
    kwargs: dict[str, Any] = {"max_new_tokens": 16, "temperature": 1.0}
    a = embedded_fp32.generate(["Tell me a story."] * 2, seed=7, **kwargs)
    b = embedded_fp32.generate(["Tell me a story."] * 2, seed=7, **kwargs)
    c = embedded_fp32.generate(["Tell me a story."] * 2, seed=8, **kwargs)
    assert a == b
    assert a != c


def test_usage_is_metered(embedded_raw: TransformersModel) -> None:
    before, prompts = embedded_raw.usage, ["one two three", "four five six"]
    embedded_raw.score_spans(prompts, [(4, 7), (5, 9)])
    spent = embedded_raw.usage - before
    assert spent.lm_calls == 2 and spent.seconds > 0
    assert spent.prompt_tokens == sum(map(embedded_raw.count_tokens, prompts))


def test_unknown_spec_lists_accepted_forms_and_a_missing_gguf_file_is_named(
    tmp_path: Path,
) -> None:
    for spec in ["", "gpt-4", "hf:", "openai:", "llama:foo"]:
        with pytest.raises(ModelSpecError, match=r"accepted forms.*embedded.*hf:.*openai:"):
            load_model(spec)
    with pytest.raises(ModelSpecError, match=r"missing\.gguf does not exist"):
        load_model(f"hf:{tmp_path / 'missing.gguf'}")


def test_dtype_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_dtype("float32", "cpu") == torch.float32
    assert resolve_dtype("auto", "cpu") in (torch.float32, torch.bfloat16)
    monkeypatch.setenv("RAG_POSITION_DTYPE", "float32")  # as on a CPU without bfloat16
    assert resolve_dtype("auto", "cpu") == torch.float32
    assert resolve_dtype("bfloat16", "cpu") == torch.bfloat16  # an explicit dtype wins
    monkeypatch.setenv("RAG_POSITION_DTYPE", "fp8")
    with pytest.raises(ValueError, match=r"\$RAG_POSITION_DTYPE='fp8'"):
        resolve_dtype("auto", "cpu")
    monkeypatch.delenv("RAG_POSITION_DTYPE")
    with pytest.raises(ValueError, match="'auto', 'float32'"):
        resolve_dtype("int8", "cpu")  # type: ignore[arg-type]
