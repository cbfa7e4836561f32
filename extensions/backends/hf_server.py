"""``HFServer``: verl's LLM server ``generate`` interface on an in-process transformers model (CPU).

    server = HFServer.from_pretrained(ensure_embedded_model())
    out = await server.generate("req-1", prompt_ids=ids, sampling_params={"temperature": 0, "max_tokens": 64})
    out.token_ids, out.log_probs, out.stop_reason     # TokenOutput, as verl.workers.rollout.replica defines it

Same contract as ``verl.workers.rollout.llm_server.LLMServerClient.generate`` backed by verl's vLLM
server: generation stops at EOS (unless ``ignore_eos``) or any ``stop_token_ids`` (the stop token is
included), or after ``max_tokens`` (clamped to ``[1, max_model_len - len(prompt_ids)]``, like verl's
vLLM server); ``temperature`` 0 is greedy; ``top_p``, ``top_k`` (-1 or 0 = off), ``repetition_penalty``
and a per-request ``seed`` are honoured. ``log_probs`` (one per token, when ``logprobs`` is truthy, as
with vLLM) are the log-softmax of the logits the token was sampled from: ``processed_logprobs`` (verl's
default ``rollout.logprobs_mode``: after repetition penalty, temperature, top-k/top-p) or
``raw_logprobs`` (the model's logits at temperature 1). They agree for greedy or T=1 untruncated sampling.

One background thread owns the model. Requests are queued; whenever requests are waiting and the batch
has room, the thread prefills them (left-padded) and merges their KV cache into the running batch, so
concurrent requests decode together; each leaves the batch when it finishes (continuous batching).

Prefix KV reuse (``extensions.backends.prefix_cache``): a finished request's keys and values (prompt and
reply) are kept in a bounded LRU store, ``prefix_cache_bytes`` (default 1 GiB; 0 = off). A later prompt that
extends a stored sequence (the trajectory's next turn) or shares its head (the system prompt and tool schemas)
prefills only the tokens after the shared head. In a batch, each row's reused keys sit right-aligned before the
new tokens' block and the attention mask covers the gap, so rows with different reused lengths prefill in one
forward pass. Greedy output is token-identical with and without reuse (``tests/backends/test_prefix_reuse.py``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import threading
from pathlib import Path
from typing import Any

import torch
from transformers import DynamicCache
from verl.workers.rollout.replica import TokenOutput

from extensions.backends.prefix_cache import PrefixCache, common_prefix_len, plan_prefill, stack_past
from extensions.backends.running_batch import Request, RunningBatch, prefill_inputs
from extensions.backends.sampling import LogprobsMode, parse_sampling_params, sample_token
from extensions.errors import ConfigError

logger = logging.getLogger(__name__)
DEFAULT_PREFIX_CACHE_BYTES = 1 << 30


THREADS_ENV = "LONGFLOW_HF_THREADS"


def default_threads() -> int:
    """``$LONGFLOW_HF_THREADS``, else one core fewer than this process may use (at least 1): the event loop,
    tools and other processes get a core, and torch's OpenMP threads never spin against them (on a shared,
    oversubscribed machine 2 threads ran 4x slower than 1)."""
    value = os.environ.get(THREADS_ENV, "").strip()
    if not value:
        return max(1, len(os.sched_getaffinity(0)) - 1)
    if not value.isdigit() or int(value) < 1:
        raise ConfigError(f"${THREADS_ENV}={value!r}: expected a whole number of torch threads, at least 1")
    return int(value)


class HFServer:
    """In-process LLM server with verl's ``generate`` coroutine; see the module docstring.

    The class is the scheduler (admit, prefill with prefix reuse, decode, sample, retire); the running
    batch's tensors live in ``running_batch.py``, prefill planning, KV stacking and the prefix cache in
    ``prefix_cache.py``, sampling in ``sampling.py``.
    """

    def __init__(
        self,
        model: Any,
        *,
        max_batch_size: int = 8,
        max_model_len: int | None = None,
        response_length: int | None = None,
        num_threads: int | None = None,
        logprobs_mode: LogprobsMode = "processed_logprobs",
        seed: int | None = None,
        prefix_cache_bytes: int = DEFAULT_PREFIX_CACHE_BYTES,
        tokenizer: Any | None = None,
    ) -> None:
        if logprobs_mode not in ("processed_logprobs", "raw_logprobs"):
            raise ValueError(f"logprobs_mode must be 'processed_logprobs' or 'raw_logprobs', got {logprobs_mode!r}")
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        self.model = model.eval()
        self.tokenizer = tokenizer
        """Detokenizes the output for ``stop`` strings (as vLLM does); requests with stop strings need it."""
        config, gen = model.config, getattr(model, "generation_config", None)
        self.max_model_len = max_model_len or config.max_position_embeddings
        self.response_length = response_length or self.max_model_len
        self.vocab_size = config.vocab_size
        eos = [getattr(gen, "eos_token_id", None), config.eos_token_id]
        self.eos_ids = frozenset(t for e in eos for t in (e if isinstance(e, list) else [e]) if t is not None)
        pads = (getattr(gen, "pad_token_id", None), getattr(config, "pad_token_id", None), *sorted(self.eos_ids), 0)
        self.pad_id = next(t for t in pads if t is not None)  # any id works: padding is masked out
        self.max_batch_size = max_batch_size
        self.num_threads = num_threads or default_threads()
        self.logprobs_mode = logprobs_mode
        self.max_batch_seen = 0
        self.prefix_cache = PrefixCache(prefix_cache_bytes) if prefix_cache_bytes > 0 else None
        self.forward_passes = {"prefill": 0, "decode": 0}
        self._generator = torch.Generator().manual_seed(seed) if seed is not None else torch.Generator()
        self._queue: queue.Queue[Request | None] = queue.Queue()
        self._batch = RunningBatch()
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name="hf-server", daemon=True)
        self._thread.start()

    @classmethod
    def from_pretrained(
        cls, path: str | Path, *, dtype: str | None = None, weights: str | None = None, **kwargs: Any
    ) -> HFServer:
        """Load a Hugging Face model directory (checked by ``validate_model_dir``) and serve it.

        ``weights``: ``float32`` / ``bfloat16`` / ``int8`` (``extensions.backends.weights``; default
        ``$LONGFLOW_HF_WEIGHTS`` or float32); ``dtype`` is the older name for the first two."""
        from extensions.backends.embedded_model import validate_model_dir
        from extensions.backends.weights import load_model, weights_setting

        return cls(load_model(validate_model_dir(path), weights_setting(weights or dtype)), **kwargs)

    async def generate(
        self,
        request_id: str,
        *,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        image_data: list[Any] | None = None,
        video_data: list[Any] | None = None,
        audio_data: list[Any] | None = None,
        mm_processor_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> TokenOutput:
        """Generate a continuation of ``prompt_ids``; ``kwargs`` (e.g. ``priority``) are accepted and ignored."""
        if image_data or video_data or audio_data:
            raise ValueError(f"request {request_id}: HFServer serves text-only models; got multimodal data")
        prompt = [int(t) for t in prompt_ids]
        if not prompt or min(prompt) < 0 or max(prompt) >= self.vocab_size:
            raise ValueError(f"request {request_id}: prompt_ids must be non-empty ids in [0, {self.vocab_size})")
        sampling = parse_sampling_params(
            sampling_params,
            prompt_len=len(prompt),
            max_model_len=self.max_model_len,
            default_max_tokens=self.response_length,
            eos_ids=self.eos_ids,
        )
        if sampling.stop and self.tokenizer is None:
            raise ValueError(f"request {request_id}: stop strings need HFServer(tokenizer=...) to detokenize")
        if self._closed:
            raise RuntimeError("HFServer is closed")
        loop = asyncio.get_running_loop()
        generator = torch.Generator().manual_seed(sampling.seed) if sampling.seed is not None else None
        request = Request(prompt, sampling, loop, loop.create_future(), generator)
        self._queue.put(request)
        return await request.future

    def close(self) -> None:
        """Stop the model thread; queued and running requests fail with RuntimeError."""
        self._closed = True
        self._queue.put(None)
        self._thread.join(timeout=60)

    # --- model thread -------------------------------------------------------------------------------

    def _serve(self) -> None:
        torch.set_num_threads(self.num_threads)
        while True:
            new = self._admit()
            if self._closed:
                self._batch.rows += new
                break
            try:
                with torch.inference_mode():
                    if new:
                        self._prefill(new)
                    elif self._batch.rows:
                        self._decode()
                    self._retire()
            except Exception as exc:  # fail this batch, keep serving
                for request in self._batch.rows + new:
                    request.resolve(exc)
                self._batch.clear()
        self._drain(RuntimeError("HFServer is closed"))

    def _admit(self) -> list[Request]:
        new: list[Request] = []
        while len(self._batch.rows) + len(new) < self.max_batch_size:
            try:
                request = self._queue.get(block=not self._batch.rows and not new)
            except queue.Empty:
                break
            if request is None:
                self._closed = True
                break
            if not request.future.done():
                new.append(request)
        return new

    def _drain(self, exc: BaseException) -> None:
        for request in self._batch.rows:
            request.resolve(exc)
        self._batch.rows = []
        while not self._queue.empty():
            if (request := self._queue.get_nowait()) is not None:
                request.resolve(exc)

    def _forward(
        self, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, cache: DynamicCache
    ) -> torch.Tensor:
        out = self.model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        return out.logits[:, -1].float()

    def _prefill(self, new: list[Request]) -> None:
        if self.prefix_cache is not None and len(new) > 1:
            self._prefill_shared_heads(new)
        for request in new:
            if self.prefix_cache is not None:
                request.reused, request.past = self.prefix_cache.lookup(request.prompt_ids)
        for group in plan_prefill([len(r.prompt_ids) - r.reused for r in new]):
            self._prefill_group([new[i] for i in group])

    def _prefill_shared_heads(self, new: list[Request]) -> None:
        """Requests arriving together that share a head not yet cached (turn 1 of a batch: the system prompt and
        tool schemas): prefill that head once and store it, so each request then prefills only its own tail."""
        cache = self.prefix_cache
        if cache is None:
            return
        prompts = [torch.tensor(r.prompt_ids[:-1], dtype=torch.long) for r in new]
        for i, prompt in enumerate(prompts):
            head = max(common_prefix_len(prompt, other) for j, other in enumerate(prompts) if j != i)
            if head - cache.longest(prompt[:head])[0] >= cache.min_match_tokens:
                self._prefill_head(new[i].prompt_ids[:head])

    def _prefill_head(self, tokens: list[int]) -> None:
        n, past = self.prefix_cache.lookup(tokens, whole=True) if self.prefix_cache else (0, None)
        cache = DynamicCache(past, config=self.model.config)
        self.model(
            input_ids=torch.tensor([tokens[n:]]),
            attention_mask=torch.ones(1, len(tokens), dtype=torch.long),
            position_ids=torch.arange(n, len(tokens))[None],
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        self.forward_passes["prefill"] += 1
        if self.prefix_cache is not None:
            self.prefix_cache.insert(tokens, [(layer.keys, layer.values) for layer in cache.layers])

    def _prefill_group(self, new: list[Request]) -> None:
        """One forward pass over the new tokens of ``new`` (``running_batch.prefill_inputs``); they join the batch."""
        ids, mask, positions, past = prefill_inputs(new, self.pad_id)
        cache = DynamicCache(stack_past(new, past) if past else None, config=self.model.config)
        logits = self._forward(ids, mask, positions, cache)
        self.forward_passes["prefill"] += 1
        for request in new:
            request.past = None
        self._sample(logits, new)
        self._batch.join(new, cache, mask)
        self.max_batch_seen = max(self.max_batch_seen, len(self._batch.rows))

    def _decode(self) -> None:
        logits = self._forward(*self._batch.step())
        self.forward_passes["decode"] += 1
        self._sample(logits, self._batch.rows)

    def _sample(self, logits: torch.Tensor, rows: list[Request]) -> None:
        for i, request in enumerate(rows):
            s = request.sampling
            seen = request.prompt_ids + request.token_ids if s.repetition_penalty != 1.0 else []
            token, logprob = sample_token(logits[i], s, seen, request.generator or self._generator, self.logprobs_mode)
            request.add_token(token, logprob, self.tokenizer)

    def _retire(self) -> None:
        rows = self._batch.rows
        keep = [i for i, r in enumerate(rows) if r.stop_reason is None and not r.future.done()]
        for i, request in enumerate(rows):
            if request.stop_reason is not None:
                self._store_prefix(i, request)
                request.resolve(request.output())
        self._batch.keep(keep)

    def _store_prefix(self, row: int, request: Request) -> None:
        """Keep row ``row``'s keys/values (prompt + all generated tokens but the last) in the prefix cache."""
        if self.prefix_cache is None:
            return
        tokens = request.prompt_ids + request.token_ids[:-1]
        if len(tokens) < self.prefix_cache.min_match_tokens:
            return
        if (kv := self._batch.row_kv(row, len(tokens))) is not None:
            self.prefix_cache.insert(tokens, kv)
