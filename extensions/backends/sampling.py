"""Sampling for ``HFServer``: vLLM-style parameter checks and one-token sampling with log-probs.

    sampling = parse_sampling_params(params, prompt_len=12, max_model_len=32768, default_max_tokens=512,
                                     eos_ids=frozenset({151645}))
    token, logprob = sample_token(logits_row, sampling, prompt_and_output_ids, generator, "processed_logprobs")

Not run directly; ``tests/backends/test_hf_server.py`` covers it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import torch

SUPPORTED_PARAMS = frozenset(
    {"temperature", "top_p", "top_k", "repetition_penalty", "logprobs", "max_tokens", "max_new_tokens"}
    | {"stop_token_ids", "stop", "ignore_eos", "seed"}
)
LogprobsMode = Literal["processed_logprobs", "raw_logprobs"]


@dataclass(frozen=True)
class Sampling:
    """Validated sampling settings of one request."""

    temperature: float
    top_p: float
    top_k: int
    repetition_penalty: float
    max_tokens: int
    stop_ids: frozenset[int]
    logprobs: bool
    seed: int | None
    stop: tuple[str, ...] = ()
    """Stop strings: generation ends once the decoded output contains one (the token that completes it kept)."""


def _number(params: dict[str, Any], key: str, default: float, ok: Any, rule: str, errors: list[str]) -> float:
    value = params.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or not ok(value):
        errors.append(f"{key} must be {rule}, got {value!r}")
        return default
    return value


def parse_sampling_params(
    params: dict[str, Any], *, prompt_len: int, max_model_len: int, default_max_tokens: int, eos_ids: frozenset[int]
) -> Sampling:
    """Check ``params`` like vLLM's SamplingParams would; raise one ValueError listing every problem."""
    errors = [f"unknown key {k!r}" for k in sorted(set(params) - SUPPORTED_PARAMS)]
    temperature = _number(params, "temperature", 1.0, lambda v: v >= 0, "a number >= 0", errors)
    top_p = _number(params, "top_p", 1.0, lambda v: 0 < v <= 1, "a number in (0, 1]", errors)
    top_k = _number(params, "top_k", -1, lambda v: v == int(v) and v >= -1, "an integer >= -1 (-1 or 0: off)", errors)
    penalty = _number(params, "repetition_penalty", 1.0, lambda v: v > 0, "a number > 0", errors)
    key = "max_tokens" if "max_tokens" in params else "max_new_tokens"
    max_tokens = params.get(key)
    if max_tokens is None:
        max_tokens = default_max_tokens
    elif isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
        errors.append(f"{key} must be an integer, got {max_tokens!r}")
    stops = params.get("stop_token_ids") or []
    if not isinstance(stops, list | tuple | set | frozenset) or not all(isinstance(t, int) for t in stops):
        errors.append(f"stop_token_ids must be a list of token ids, got {stops!r}")
        stops = []
    stop_strings = params.get("stop") or []
    stop_strings = [stop_strings] if isinstance(stop_strings, str) else stop_strings
    if not isinstance(stop_strings, list | tuple) or not all(isinstance(t, str) and t for t in stop_strings):
        errors.append(f"stop must be a string or a list of non-empty strings, got {params.get('stop')!r}")
        stop_strings = []
    seed = params.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        errors.append(f"seed must be an integer or None, got {seed!r}")
    if prompt_len >= max_model_len:
        errors.append(f"prompt has {prompt_len} tokens, leaving no room in max_model_len={max_model_len}")
    if errors:
        raise ValueError(
            f"bad sampling_params: {'; '.join(errors)}. Supported keys: {', '.join(sorted(SUPPORTED_PARAMS))}"
        )
    return Sampling(
        temperature=float(temperature),
        top_p=float(top_p),
        top_k=int(top_k),
        repetition_penalty=float(penalty),
        max_tokens=max(1, min(int(max_tokens), max_model_len - prompt_len)),
        stop_ids=frozenset(stops) | (frozenset() if params.get("ignore_eos") else eos_ids),
        logprobs=bool(params.get("logprobs")),
        seed=seed,
        stop=tuple(stop_strings),
    )


def restrict(logits: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    """Mask (to -inf) the tokens outside top-k, then outside the top-p nucleus (at least one token kept)."""
    if 0 < top_k < logits.numel():
        logits = logits.masked_fill(logits < torch.topk(logits, top_k).values[-1], -math.inf)
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=True)
        probs = torch.softmax(sorted_logits, dim=-1)
        drop = (probs.cumsum(-1) - probs) > top_p
        logits = logits.masked_fill(torch.zeros_like(drop).scatter(0, order, drop), -math.inf)
    return logits


def apply_repetition_penalty(logits: torch.Tensor, seen: list[int], penalty: float) -> torch.Tensor:
    """vLLM's rule: for tokens already in the prompt or output, divide positive logits, multiply negative ones."""
    index = torch.tensor(sorted(set(seen)))
    picked = logits[index]
    return logits.index_copy(0, index, torch.where(picked > 0, picked / penalty, picked * penalty))


def sample_token(
    logits: torch.Tensor, sampling: Sampling, seen: list[int], generator: torch.Generator, mode: LogprobsMode
) -> tuple[int, float]:
    """Pick one token from a row of float32 logits; return it with its log-prob under ``mode``."""
    row = logits
    if sampling.repetition_penalty != 1.0:
        row = apply_repetition_penalty(row, seen, sampling.repetition_penalty)
    if sampling.temperature == 0:
        token = int(row.argmax())
    else:
        row = restrict(row / sampling.temperature, sampling.top_k, sampling.top_p)
        token = int(torch.multinomial(torch.softmax(row, dim=-1), 1, generator=generator))
    source = logits if mode == "raw_logprobs" else row
    return token, float(torch.log_softmax(source, dim=-1)[token])
