"""A local transformers causal LM as a Generator and a Scorer.

Scoring runs the decoder once per prompt and applies the LM head only at the
positions that predict the span's tokens, so a 3,000-token prompt never
materialises a (3,000 x vocabulary) logits tensor.

Span rule: a span ``(start, end)`` is a half-open character range of the prompt
as the caller wrote it (before any chat template). The scored tokens are every
token whose character range intersects the span, so a span edge that falls
inside a token takes that whole token in. The first token of the sequence has
no prediction and is never scored; a span covering only that token is an error.
With the chat template on, the template's own tokens precede the prompt, so the
prompt's first token is scored too.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from rag_position.cost import Cost, UsageMeter
from rag_position.errors import ContextLengthError, ModelSpecError
from rag_position.models.devices import (  # re-exported: the local backend's settings
    DType,
    check_device,
    cpu_supports_bf16,
    resolve_dtype,
)
from rag_position.models.prefix_cache import PrefixCache, cached_target_logprobs
from rag_position.models.protocols import (
    Span,
    SpanScore,
    check_generation,
    check_span,
    cut_at_stop,
)
from rag_position.passages import check_text

logger = logging.getLogger(__name__)

_SENTINEL = "\u2063RAG_POSITION_PROMPT\u2063"


@dataclass(frozen=True)
class Encoded:
    """One prompt after the chat template, tokenised, with the user prompt's place in it."""

    ids: list[int]
    offsets: list[tuple[int, int]]
    prompt_start: int  # character offset of the user's prompt inside the rendered text


@dataclass(frozen=True)
class TokenLogprobs:
    """Every token of a prompt with its log-probability given the tokens before it."""

    token_ids: list[int]
    tokens: list[str]
    offsets: list[tuple[int, int]]
    logprobs: list[float | None]  # None for the first token, which has no prediction


class TransformersModel:
    """A local causal LM: batched generation and batched span scoring.

    ``prefix_cache_mb`` > 0 keeps each scoring prompt's key/value states up to its
    span, at most that many MiB (:mod:`rag_position.models.prefix_cache`; 0: off).

    Example:
        >>> model = load_model("embedded", dtype="float32")
        >>> prompt = "Document [1] Paris is the capital of France.\\nQuestion: What is the capital?"
        >>> start = prompt.index("Question:")
        >>> model.score_spans([prompt], [(start, len(prompt))])[0].n_tokens
        8
        >>> model.generate(["What is the capital of France?"], max_new_tokens=8)
        ['The capital of France is Paris.']
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        name: str,
        chat_template: bool = True,
        max_batch_tokens: int = 16384,
        max_batch_size: int = 16,
        score_batch_size: int | None = None,
        max_context: int | None = None,
        prefix_cache_mb: float = 0,
    ) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.name = name
        self.use_chat_template = bool(chat_template and getattr(tokenizer, "chat_template", None))
        self.max_batch_tokens = max_batch_tokens
        self.max_batch_size = max_batch_size
        # On CPU a padded batch sends attention down its masked path, measured 2.2x
        # slower for 10-passage prompts than one prompt at a time (which stays on the
        # causal flash kernel); accelerators gain from batching.
        on_cpu = model.device.type == "cpu"
        self.score_batch_size = score_batch_size or (1 if on_cpu else max_batch_size)
        # Greedy batches on CPU: each prompt prefilled alone (no padding: the fast causal
        # path), then the batch decoded together, one read of the weights per step for
        # every answer (:meth:`_greedy_batch`). Accelerators use ``model.generate``.
        self.split_prefill = on_cpu
        self.max_context = max_context or _context_window(model, tokenizer)
        self.meter = UsageMeter()  # what the model spent (``usage``); the prefix cache adds to it
        self._head = model.get_output_embeddings()
        self.decoder = model.get_decoder()  # the layers without the LM head (scoring, the cache)
        self._softcap = getattr(model.config, "final_logit_softcapping", None)
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self._template_prefix, self._template_suffix = self._template_parts()
        # Off (0): None, and scoring runs as without it (rag_position.models.prefix_cache).
        self.prefix_cache = PrefixCache(prefix_cache_mb) if prefix_cache_mb else None

    # ------------------------------------------------------------------ loading
    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str,
        *,
        gguf_file: str | None = None,
        dtype: DType | torch.dtype = "auto",
        device: str = "cpu",
        chat_template: bool = True,
        **kwargs: Any,
    ) -> TransformersModel:
        """Load any local transformers causal LM (a folder, a cached hub name, or a GGUF file)."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        check_device(device)
        path = Path(name_or_path).expanduser()
        if gguf_file is None and path.suffix == ".gguf":
            if not path.is_file():
                raise ModelSpecError(f"GGUF file {path} does not exist")
            gguf_file, name_or_path = path.name, str(path.parent)
        torch_dtype = resolve_dtype(dtype, device)
        label = f"{name_or_path}/{gguf_file}" if gguf_file else name_or_path
        if gguf_file:
            # Parsing and de-quantising a GGUF file on every load is slow (19 s for the
            # embedded model): load its float32 conversion, made once into the cache.
            from rag_position.models._gguf import export_gguf

            name_or_path = str(export_gguf(Path(name_or_path) / gguf_file))
        tokenizer = AutoTokenizer.from_pretrained(name_or_path)
        model: Any = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=torch_dtype)
        model.to(device=device, dtype=torch_dtype)
        return cls(model, tokenizer, name=label, chat_template=chat_template, **kwargs)

    # ------------------------------------------------------------------ properties
    @property
    def usage(self) -> Cost:
        """What this model has spent since it was loaded."""
        return self.meter.total

    @property
    def dtype(self) -> torch.dtype:
        return self.model.dtype  # type: ignore[no-any-return]

    @property
    def device(self) -> torch.device:
        return self.model.device  # type: ignore[no-any-return]

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` alone: no special tokens, no chat template."""
        check_text(text, "text")
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    # ------------------------------------------------------------------ templating
    def _template_parts(self) -> tuple[str, str]:
        if not self.use_chat_template:
            return "", ""
        rendered = self._apply_template(_SENTINEL)
        prefix, sep, suffix = rendered.partition(_SENTINEL)
        if not sep:
            raise ValueError(f"the chat template of {self.name} drops the user message")
        return prefix, suffix

    def _apply_template(self, prompt: str) -> str:
        messages = [{"role": "user", "content": prompt}]
        return str(
            self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        )

    def render(self, prompt: str) -> tuple[str, int]:
        """The text the model reads for ``prompt`` and where ``prompt`` starts in it."""
        if not self.use_chat_template:
            return prompt, 0
        rendered = self._apply_template(prompt)
        start = len(self._template_prefix)
        if rendered[start : start + len(prompt)] != prompt:
            start = rendered.find(prompt)
            if start < 0:
                raise ValueError(
                    f"the chat template of {self.name} alters the prompt text, so spans cannot "
                    "be located; load the model with chat_template=False"
                )
        return rendered, start

    def encode(self, prompt: str) -> Encoded:
        """``prompt`` as the model reads it: the chat template applied, tokenised."""
        text, start = self.render(prompt)
        enc = self.tokenizer(
            text, add_special_tokens=not self.use_chat_template, return_offsets_mapping=True
        )
        return Encoded(list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]], start)

    def check_length(self, n_tokens: int, extra: int = 0, what: str = "prompt") -> None:
        """A :class:`ContextLengthError` when ``n_tokens`` (plus ``extra`` to generate) exceed
        the window; ``what`` names the prompt in the message."""
        if n_tokens + extra > self.max_context:
            label = f"{what} plus max_new_tokens={extra}" if extra else what
            raise ContextLengthError(n_tokens + extra, self.max_context, label)

    # ------------------------------------------------------------------ scoring
    def score_spans(self, prompts: Sequence[str], spans: Sequence[Span]) -> list[SpanScore]:
        """Log-probability of the tokens covering ``spans[i]`` of ``prompts[i]`` (module doc)."""
        if len(prompts) != len(spans):
            raise ValueError(f"got {len(prompts)} prompts but {len(spans)} spans")
        encoded: list[Encoded] = []
        targets: list[list[int]] = []
        for i, prompt in enumerate(prompts):
            check_text(prompt, f"prompt {i}")
        for i, (prompt, span) in enumerate(zip(prompts, spans, strict=True)):
            check_span(prompt, span, i)
            enc = self.encode(prompt)
            self.check_length(len(enc.ids), what=f"prompt {i}")
            lo, hi = span[0] + enc.prompt_start, span[1] + enc.prompt_start
            idx = [j for j, (a, b) in enumerate(enc.offsets) if j > 0 and a < hi and b > lo]
            if not idx:
                raise ValueError(
                    f"span {span} of prompt {i} covers no scorable token (the first token of a "
                    "sequence has no prediction)"
                )
            encoded.append(enc)
            targets.append(idx)

        if self.prefix_cache is not None:  # None: the model is not plain full attention
            cached = cached_target_logprobs(
                self, self.prefix_cache, [e.ids for e in encoded], targets
            )
            if cached is not None:
                return [
                    SpanScore(float(lp.sum()) / len(lp), float(lp.sum()), len(lp)) for lp in cached
                ]
        results: list[SpanScore | None] = [None] * len(prompts)
        for batch in self._batches([len(e.ids) for e in encoded], self.score_batch_size):
            logprobs = self._target_logprobs(
                [encoded[i].ids for i in batch], [targets[i] for i in batch]
            )
            for i, lp in zip(batch, logprobs, strict=True):
                total = float(lp.sum())
                results[i] = SpanScore(total / len(lp), total, len(lp))
        return [r for r in results if r is not None]

    def token_logprobs(self, prompt: str) -> TokenLogprobs:
        """Every prompt token's log-probability (what vLLM returns for ``echo`` + ``logprobs``)."""
        check_text(prompt, "prompt")
        enc = self.encode(prompt)
        if not enc.ids:
            raise ValueError("prompt is empty")
        self.check_length(len(enc.ids))
        (lp,) = self._target_logprobs([enc.ids], [list(range(1, len(enc.ids)))])
        tokens = [self.tokenizer.decode([t]) for t in enc.ids]
        return TokenLogprobs(enc.ids, tokens, enc.offsets, [None, *(float(x) for x in lp)])

    @torch.inference_mode()
    def _target_logprobs(
        self, batch_ids: list[list[int]], batch_targets: list[list[int]]
    ) -> list[torch.Tensor]:
        """log p(ids[j] | ids[:j]) for each j in targets, one tensor per row (float32)."""
        width = max(len(ids) for ids in batch_ids)
        pad = self.tokenizer.pad_token_id
        # Right padding: real tokens keep positions 0..n-1, exactly as when run alone.
        input_ids = torch.full((len(batch_ids), width), pad, dtype=torch.long)
        mask = torch.zeros((len(batch_ids), width), dtype=torch.long)
        for r, ids in enumerate(batch_ids):
            input_ids[r, : len(ids)] = torch.tensor(ids)
            mask[r, : len(ids)] = 1
        with self.meter.timed(len(batch_ids), int(mask.sum())):
            hidden = self.decoder(
                input_ids=input_ids.to(self.device),
                attention_mask=mask.to(self.device),
                use_cache=False,
            ).last_hidden_state
            rows = torch.tensor([r for r, t in enumerate(batch_targets) for _ in t])
            cols = torch.tensor([j for t in batch_targets for j in t])
            wanted = input_ids[rows, cols].to(self.device)
            out = torch.empty(len(cols), dtype=torch.float32)
            chunk = 1024  # bounds the (positions x vocabulary) logits held at once
            for s in range(0, len(cols), chunk):
                h = hidden[
                    rows[s : s + chunk].to(self.device), (cols[s : s + chunk] - 1).to(self.device)
                ]
                out[s : s + chunk] = self.project(h, wanted[s : s + chunk])
        return list(torch.split(out, [len(t) for t in batch_targets]))

    def project(self, hidden: torch.Tensor, wanted: torch.Tensor) -> torch.Tensor:
        """log p(wanted[k]) from the last hidden state ``hidden[k]``: the LM head, float32."""
        logits = self._head(hidden).float()
        if self._softcap:
            logits = torch.tanh(logits / self._softcap) * self._softcap
        logp = torch.log_softmax(logits, dim=-1)
        return logp.gather(1, wanted[:, None])[:, 0].cpu()

    def _batches(self, lengths: Sequence[int], max_size: int) -> Iterator[list[int]]:
        """Indices grouped longest first, each group's padded size within the token budget."""
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        batch: list[int] = []
        for i in order:
            width = lengths[batch[0]] if batch else lengths[i]
            if batch and (
                width * (len(batch) + 1) > self.max_batch_tokens or len(batch) >= max_size
            ):
                yield batch
                batch = []
            batch.append(i)
        if batch:
            yield batch

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
        """Completions for ``prompts``, batched with left padding; greedy when temperature is 0.

        Outputs are cut before the first stop string; special tokens are removed.
        """
        check_generation(prompts, max_new_tokens, temperature)
        for i, prompt in enumerate(prompts):
            check_text(prompt, f"prompt {i}")
            if not prompt:
                raise ValueError(f"prompt {i} is empty")
        for j, text in enumerate(stop or ()):
            check_text(text, f"stop string {j}")
        encoded = []
        for i, prompt in enumerate(prompts):
            enc = self.encode(prompt)
            self.check_length(len(enc.ids), max_new_tokens, what=f"prompt {i}")
            encoded.append(enc.ids)
        outputs: list[str] = [""] * len(prompts)
        budget_lengths = [len(ids) + max_new_tokens for ids in encoded]
        for batch in self._batches(budget_lengths, self.max_batch_size):
            ids = [encoded[i] for i in batch]
            texts = None
            if temperature == 0 and self.split_prefill:
                texts = self._greedy_batch(ids, max_new_tokens, stop)
            if texts is None:
                texts = self._generate_batch(ids, max_new_tokens, temperature, seed, stop)
            for i, text in zip(batch, texts, strict=True):
                outputs[i] = text
        return outputs

    def _eos_ids(self) -> set[int]:
        eos = self.model.generation_config.eos_token_id
        if eos is None:
            eos = self.tokenizer.eos_token_id
        return {eos} if isinstance(eos, int) else set(eos or [])

    def _finish(self, tokens: list[int], eos_ids: set[int], stop: Sequence[str] | None) -> str:
        kept = []
        for t in tokens:
            if t in eos_ids:
                break
            kept.append(t)
        return cut_at_stop(self.tokenizer.decode(kept, skip_special_tokens=True), stop)

    @torch.inference_mode()
    def _greedy_batch(
        self, batch_ids: list[list[int]], max_new_tokens: int, stop: Sequence[str] | None
    ) -> list[str] | None:
        """Greedy answers for a batch: prefill one prompt at a time, decode all together.

        Each prompt's prefill is exactly the one-prompt forward pass (no padding), and
        its key/value cache is copied into a left-padded batch cache; each decoding step
        then feeds one token per unfinished answer, at that answer's own position, with
        the padding masked out. An answer leaves the batch when it ends (end of sequence,
        a stop string, ``max_new_tokens``), so no step is spent on finished answers.
        Returns None (the caller falls back to ``model.generate``) for a model whose
        cache is not plain full attention (sliding windows, hybrid layers).
        """
        from transformers.cache_utils import DynamicCache, DynamicLayer

        eos_ids = self._eos_ids()
        name = cache_name()
        lengths = [len(ids) for ids in batch_ids]
        width = max(lengths)
        rows = len(batch_ids)
        tokens: list[list[int]] = []
        merged: list[tuple[torch.Tensor, torch.Tensor]] = []  # per layer: (keys, values)
        with self.meter.timed(rows, sum(lengths)) as generated:
            for r, ids in enumerate(batch_ids):
                out = self.model(
                    input_ids=torch.tensor([ids], device=self.device),
                    use_cache=True,
                    logits_to_keep=1,
                    **{name: DynamicCache()},
                )
                cache = getattr(out, name)
                if not all(type(layer) is DynamicLayer for layer in cache.layers):
                    self.split_prefill = False
                    return None
                tokens.append([int(out.logits[0, -1].argmax())])
                for j, layer in enumerate(cache.layers):
                    keys, values = layer.keys, layer.values
                    if r == 0:  # the batch's cache, left-padded to the longest prompt
                        shape = (rows, keys.shape[1], width, keys.shape[3])
                        merged.append((keys.new_zeros(shape), values.new_zeros(shape)))
                    merged[j][0][r, :, width - lengths[r] :] = keys[0]
                    merged[j][1][r, :, width - lengths[r] :] = values[0]
                del out, cache
            batch_cache = DynamicCache(ddp_cache_data=merged)
            del merged
            mask = torch.zeros((rows, width), dtype=torch.long, device=self.device)
            for r, n in enumerate(lengths):
                mask[r, width - n :] = 1
            active = list(range(rows))
            step = 0
            while True:
                still = [
                    i
                    for i, r in enumerate(active)
                    if not self._ended(tokens[r], eos_ids, max_new_tokens, stop)
                ]
                if not still:
                    break
                if len(still) < len(active):
                    index = torch.tensor(still, device=self.device)
                    batch_cache.batch_select_indices(index)
                    mask = mask[index]
                    active = [active[i] for i in still]
                step += 1
                mask = torch.cat([mask, mask.new_ones((len(active), 1))], dim=1)
                out = self.model(
                    input_ids=torch.tensor([[tokens[r][-1]] for r in active], device=self.device),
                    attention_mask=mask,
                    position_ids=torch.tensor(
                        [[lengths[r] + step - 1] for r in active], device=self.device
                    ),
                    use_cache=True,
                    logits_to_keep=1,
                    **{name: batch_cache},
                )
                batch_cache = getattr(out, name)
                for r, t in zip(active, out.logits[:, -1].argmax(-1).tolist(), strict=True):
                    tokens[r].append(int(t))
            for row in tokens:
                ends = next((k for k, t in enumerate(row) if t in eos_ids), None)
                generated[0] += len(row) if ends is None else ends + 1
        return [self._finish(row, eos_ids, stop) for row in tokens]

    def _ended(
        self,
        row: list[int],
        eos_ids: set[int],
        max_new_tokens: int,
        stop: Sequence[str] | None,
    ) -> bool:
        if row[-1] in eos_ids or len(row) >= max_new_tokens:
            return True
        if stop:
            text = self.tokenizer.decode(row, skip_special_tokens=True)
            return any(s in text for s in stop)
        return False

    @torch.inference_mode()
    def _generate_batch(
        self,
        batch_ids: list[list[int]],
        max_new_tokens: int,
        temperature: float,
        seed: int | None,
        stop: Sequence[str] | None,
    ) -> list[str]:
        from transformers import GenerationConfig

        width = max(len(ids) for ids in batch_ids)
        pad = self.tokenizer.pad_token_id
        input_ids = torch.full((len(batch_ids), width), pad, dtype=torch.long)
        mask = torch.zeros((len(batch_ids), width), dtype=torch.long)
        for r, ids in enumerate(batch_ids):
            input_ids[r, width - len(ids) :] = torch.tensor(ids)
            mask[r, width - len(ids) :] = 1
        eos_ids = self._eos_ids()
        config = GenerationConfig(  # type: ignore[no-untyped-call]
            max_new_tokens=max_new_tokens,
            do_sample=temperature > 0,
            temperature=temperature if temperature > 0 else None,
            top_k=None,
            top_p=None,
            pad_token_id=pad,
            eos_token_id=sorted(eos_ids) or None,
            stop_strings=list(stop) if stop else None,
        )
        with (
            self.meter.timed(len(batch_ids), int(mask.sum())) as generated,
            torch.random.fork_rng(devices=[]),
        ):
            if seed is not None:
                torch.manual_seed(seed)
            out = self.model.generate(
                input_ids=input_ids.to(self.device),
                attention_mask=mask.to(self.device),
                generation_config=config,
                tokenizer=self.tokenizer if stop else None,
            )
            new = out[:, width:].cpu()
            rows = new.tolist()
            for row in rows:
                ends = next((k for k, t in enumerate(row) if t in eos_ids), None)
                if ends is None and pad not in eos_ids:  # ended by a stop string: padded
                    kept = len(row)
                    while kept and row[kept - 1] == pad:
                        kept -= 1
                    generated[0] += kept
                else:
                    generated[0] += len(row) if ends is None else ends + 1
        return [self._finish(row, eos_ids, stop) for row in rows]


def cache_name() -> str:
    """What transformers calls the key/value cache (``cache`` from 5.x, before that
    ``past_key_values``), in a forward's arguments and its output."""
    from transformers import modeling_outputs

    fields = modeling_outputs.CausalLMOutputWithPast.__dataclass_fields__
    return "cache" if "cache" in fields else "past_key_values"


def _context_window(model: Any, tokenizer: Any) -> int:
    for attr in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        value = getattr(model.config, attr, None)
        if isinstance(value, int) and value > 0:
            return value
    value = getattr(tokenizer, "model_max_length", None)
    if isinstance(value, int) and 0 < value < 10**7:
        return value
    logger.warning("could not read the context window of the model; assuming 2048 tokens")
    return 2048


__all__ = ["TokenLogprobs", "TransformersModel", "cpu_supports_bf16", "resolve_dtype"]
