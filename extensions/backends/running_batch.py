"""``HFServer``'s requests and its running batch: the rows decoding together, their KV cache and attention mask.

Rows are right-aligned: every row's last token sits in the last column, and shorter rows are padded on
the left (mask 0). A prefilled group joins by left-padding whichever side is narrower (``join``); each
decode step adds one column (``step``); a finished row leaves, and the columns that are padding in every
row still running are dropped (``keep``). ``row_kv`` cuts one row's keys and values out for the prefix
cache. The model thread alone touches a ``RunningBatch``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import DynamicCache
from verl.workers.rollout.replica import TokenOutput

from extensions.backends.prefix_cache import LayerKV
from extensions.backends.sampling import Sampling

logger = logging.getLogger(__name__)

STOP_TAIL_TOKENS = 16
"""Output tokens decoded to look for stop strings (a stop string is far shorter)."""


@dataclass(eq=False)
class Request:
    """One ``generate`` call: its prompt and sampling, the caller's future, and the tokens so far."""

    prompt_ids: list[int]
    sampling: Sampling
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[TokenOutput]
    generator: torch.Generator | None = None
    token_ids: list[int] = field(default_factory=list)
    log_probs: list[float] = field(default_factory=list)
    stop_reason: str | None = None
    reused: int = 0  # prompt tokens whose keys/values came from the prefix cache
    past: list[LayerKV] | None = None

    def add_token(self, token: int, logprob: float, tokenizer: Any) -> None:
        """Append a sampled token; ``stop_reason`` is set when it ends the request: a stop token, a stop string
        in the decoded tail (checked after every token, like vLLM; ``tokenizer`` decodes it), or ``max_tokens``."""
        self.token_ids.append(token)
        self.log_probs.append(logprob)
        s = self.sampling
        if token in s.stop_ids or (s.stop and self._hits_stop(tokenizer)):
            self.stop_reason = "completed"
        elif len(self.token_ids) >= s.max_tokens:
            self.stop_reason = "length"

    def _hits_stop(self, tokenizer: Any) -> bool:
        tail = tokenizer.decode(self.token_ids[-STOP_TAIL_TOKENS:], skip_special_tokens=True)
        return any(stop in tail for stop in self.sampling.stop)

    def output(self) -> TokenOutput:
        """The finished request as verl's ``TokenOutput`` (log-probs only when the request asked for them)."""
        return TokenOutput(
            token_ids=self.token_ids,
            log_probs=self.log_probs if self.sampling.logprobs else None,
            stop_reason=self.stop_reason,
            num_preempted=0,
            extra_fields={"min_global_steps": None, "max_global_steps": None},
        )

    def resolve(self, result: TokenOutput | BaseException) -> None:
        """Hand the caller its output or exception, on the caller's event loop (from the model thread)."""

        def deliver() -> None:
            if self.future.done():
                return
            if isinstance(result, BaseException):
                self.future.set_exception(result)
            else:
                self.future.set_result(result)

        with contextlib.suppress(RuntimeError):  # the caller's event loop is closed: nobody is waiting
            self.loop.call_soon_threadsafe(deliver)


def left_pad(t: torch.Tensor, dim: int, total: int) -> torch.Tensor:
    """Zero-pad dimension ``dim`` of ``t`` on the left up to ``total`` (KV caches and masks stay aligned right)."""
    return torch.nn.functional.pad(t, (0, 0) * (t.dim() - 1 - dim) + (total - t.shape[dim], 0))


def prefill_inputs(new: list[Request], pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """(ids, mask, positions, past) of one prefill pass over the new tokens of ``new``: row i is
    ``[pad, reused_i | pad, new_i]``, right-aligned, where ``past`` columns hold the reused keys."""
    past = max(r.reused for r in new)
    width = max(len(r.prompt_ids) - r.reused for r in new)
    ids = torch.full((len(new), width), pad_id, dtype=torch.long)
    mask = torch.zeros(len(new), past + width, dtype=torch.long)
    positions = torch.zeros_like(ids)
    for i, request in enumerate(new):
        n, tail = request.reused, request.prompt_ids[request.reused :]
        ids[i, width - len(tail) :] = torch.tensor(tail)
        positions[i, width - len(tail) :] = torch.arange(n, n + len(tail))
        mask[i, past - n : past] = 1
        mask[i, past + width - len(tail) :] = 1
    return ids, mask, positions, past


class RunningBatch:
    """The requests decoding together, with their KV cache and attention mask (the module docstring)."""

    def __init__(self) -> None:
        self.rows: list[Request] = []
        self.cache: DynamicCache | None = None
        self.mask = torch.zeros(0, 0, dtype=torch.long)

    def clear(self) -> None:
        self.rows, self.cache, self.mask = [], None, torch.zeros(0, 0, dtype=torch.long)

    def join(self, new: list[Request], cache: DynamicCache, mask: torch.Tensor) -> None:
        """Add a prefilled group (its cache and mask) below the running rows."""
        if self.cache is None:
            self.rows, self.cache, self.mask = new, cache, mask
            return
        total = max(self.mask.shape[1], mask.shape[1])
        self.mask = torch.cat([left_pad(self.mask, 1, total), left_pad(mask, 1, total)])
        for old, fresh in zip(self.cache.layers, cache.layers, strict=True):
            old.keys = torch.cat([left_pad(old.keys, 2, total), left_pad(fresh.keys, 2, total)])
            old.values = torch.cat([left_pad(old.values, 2, total), left_pad(fresh.values, 2, total)])
        self.rows = self.rows + new

    def step(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, DynamicCache]:
        """(ids, mask, positions, cache) of one decode pass: every row's last token, one more mask column."""
        if self.cache is None:
            raise RuntimeError("HFServer: running rows without a KV cache")
        last = torch.tensor([[r.token_ids[-1]] for r in self.rows])
        self.mask = torch.cat([self.mask, torch.ones(len(self.rows), 1, dtype=torch.long)], dim=1)
        return last, self.mask, self.mask.sum(-1, keepdim=True) - 1, self.cache

    def keep(self, keep: list[int]) -> None:
        """Keep only rows ``keep``; drop the leading columns that are padding in every kept row."""
        if len(keep) == len(self.rows):
            return
        self.rows = [self.rows[i] for i in keep]
        if not keep:
            self.clear()
            return
        index = torch.tensor(keep)
        lead = int(self.mask[index].argmax(dim=1).min())  # leading columns that are padding in every kept row
        self.mask = self.mask[index, lead:]
        for layer in self.cache.layers if self.cache is not None else []:
            layer.keys, layer.values = layer.keys[index, :, lead:], layer.values[index, :, lead:]

    def row_kv(self, row: int, length: int) -> list[LayerKV] | None:
        """Row ``row``'s keys and values at its ``length`` unmasked positions; None if they are not there."""
        if self.cache is None:
            return None
        columns = self.mask[row].nonzero().squeeze(1)
        if columns.numel() != length:  # never expected; a cache miss later is harmless, a failed batch is not
            logger.warning(
                "HFServer: row %d has %d cached positions, expected %d; not cached", row, columns.numel(), length
            )
            return None
        return [
            (layer.keys[row : row + 1, :, columns], layer.values[row : row + 1, :, columns])
            for layer in self.cache.layers
        ]
