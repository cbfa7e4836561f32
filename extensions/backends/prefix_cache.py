"""Prefix KV reuse for ``HFServer``: a bounded LRU store of per-sequence KV caches, matched by token prefix.

    cache = PrefixCache(max_bytes=1 << 30)
    n, kv = cache.lookup(prompt_ids)          # n tokens of prompt_ids have cached keys/values (kv[layer] = (k, v))
    cache.insert(prompt_ids + reply[:-1], kv)  # after a request: its prompt and all but the last generated token

An agent loop's next turn is the last turn's prompt, plus the reply, plus tool or user tokens, and every
trajectory of a batch starts with the same system prompt and tool schemas. A request whose prompt extends a
stored sequence (or shares a long enough head with one) gets that many positions' keys and values from the
store and prefills only the rest. Keys are stored after RoPE at positions ``0..n-1``, so a stored sequence's
first ``n`` positions are exactly what a fresh prefill of the same ``n`` tokens computes (up to float rounding
of different batch shapes). ``HFServer(prefix_cache_bytes=0)`` turns this off.

Entries are evicted least-recently-used first once their keys and values exceed ``max_bytes``; a stored
sequence that a newer one extends is dropped at once (the newer one serves both).
``tests/backends/test_prefix_cache.py`` covers it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

# keys and values of one layer: [1, kv_heads, seq, head_dim] each
LayerKV = tuple[torch.Tensor, torch.Tensor]


@dataclass
class CacheStats:
    """Counters since the server started (``HFServer.prefix_cache.stats``)."""

    lookups: int = 0
    hits: int = 0
    reused_tokens: int = 0
    prompt_tokens: int = 0
    inserts: int = 0
    evictions: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass(eq=False)
class _Entry:
    tokens: torch.Tensor  # int64 [seq]
    kv: list[LayerKV]
    nbytes: int = field(init=False)

    def __post_init__(self) -> None:
        self.nbytes = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in self.kv)


def common_prefix_len(a: torch.Tensor, b: torch.Tensor) -> int:
    """Length of the longest common head of two 1-D token tensors."""
    m = min(a.numel(), b.numel())
    if m == 0:
        return 0
    same = a[:m] == b[:m]
    return m if bool(same.all()) else int((~same).to(torch.int8).argmax())


class PrefixCache:
    """Bounded LRU store of KV caches keyed by token sequences; see the module docstring."""

    def __init__(self, max_bytes: int, *, min_match_tokens: int = 16) -> None:
        if max_bytes < 0:
            raise ValueError(f"prefix cache max_bytes must be >= 0, got {max_bytes}")
        self.max_bytes = max_bytes
        self.min_match_tokens = max(1, min_match_tokens)
        self.stats = CacheStats()
        self._entries: OrderedDict[int, _Entry] = OrderedDict()
        self._next_key = 0
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def longest(self, token_ids: Sequence[int] | torch.Tensor) -> tuple[int, int | None]:
        """(length, key) of the stored sequence sharing the longest head with ``token_ids``; no counters touched."""
        tokens = token_ids if isinstance(token_ids, torch.Tensor) else torch.tensor(list(token_ids), dtype=torch.long)
        best_key, best = None, 0
        for key, entry in self._entries.items():
            n = common_prefix_len(entry.tokens, tokens)
            if n > best:
                best_key, best = key, n
        return best, best_key

    def lookup(self, prompt_ids: Sequence[int], *, whole: bool = False) -> tuple[int, list[LayerKV] | None]:
        """The longest stored head of ``prompt_ids`` (at most ``len - 1`` tokens, one being left to run, unless
        ``whole``).

        Returns ``(n, kv)`` with ``kv[layer] = (keys, values)`` cut to ``n`` positions (views, not copies), or
        ``(0, None)`` when no stored sequence shares at least ``min_match_tokens`` tokens with the prompt.
        """
        self.stats.lookups += 1
        self.stats.prompt_tokens += len(prompt_ids)
        best, best_key = self.longest(prompt_ids if whole else prompt_ids[:-1])
        if best_key is None or best < self.min_match_tokens:
            return 0, None
        self._entries.move_to_end(best_key)
        self.stats.hits += 1
        self.stats.reused_tokens += best
        return best, [(k[:, :, :best], v[:, :, :best]) for k, v in self._entries[best_key].kv]

    def insert(self, token_ids: Sequence[int], kv: list[LayerKV]) -> bool:
        """Store ``kv`` (one ``(keys, values)`` per layer, ``len(token_ids)`` positions) for ``token_ids``.

        Returns False (storing nothing) when the sequence alone exceeds ``max_bytes`` or a stored sequence
        already starts with it. Stored sequences that ``token_ids`` extends are dropped.
        """
        seq = kv[0][0].shape[2] if kv else 0
        if seq != len(token_ids):
            raise ValueError(f"prefix cache insert: {len(token_ids)} tokens but keys/values for {seq} positions")
        if len(token_ids) < self.min_match_tokens:
            return False
        entry = _Entry(torch.tensor(list(token_ids), dtype=torch.long), kv)
        if entry.nbytes > self.max_bytes:
            return False
        for key, old in list(self._entries.items()):
            n = common_prefix_len(old.tokens, entry.tokens)
            if n == entry.tokens.numel():  # already covered (the same sequence, or a longer one)
                self._entries.move_to_end(key)
                return False
            if n == old.tokens.numel():  # the new sequence extends this one
                self._drop(key)
        self._entries[self._next_key] = entry
        self._next_key += 1
        self.nbytes += entry.nbytes
        self.stats.inserts += 1
        while self.nbytes > self.max_bytes:
            self._drop(next(iter(self._entries)))
            self.stats.evictions += 1
        return True

    def clear(self) -> None:
        self._entries.clear()
        self.nbytes = 0

    def _drop(self, key: int) -> None:
        self.nbytes -= self._entries.pop(key).nbytes


# a forward pass costs about this many prompt tokens' compute on top of its tokens (reading every weight once):
# new requests whose new-token counts differ by more prefill in separate passes instead of padding to the longest
PASS_OVERHEAD_TOKENS = 32


def plan_prefill(new_tokens: list[int], overhead: int = PASS_OVERHEAD_TOKENS) -> list[list[int]]:
    """Group request indices into forward passes: padding to a group's longest costs ``len(group) * longest``
    tokens; a request starts a new group when the padding it adds to the group exceeds ``overhead``."""
    order = sorted(range(len(new_tokens)), key=lambda i: new_tokens[i])
    groups: list[list[int]] = []
    for i in order:
        if groups and len(groups[-1]) * (new_tokens[i] - new_tokens[groups[-1][-1]]) <= overhead:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def stack_past(rows: Sequence[Any], past: int) -> list[LayerKV]:
    """Per layer, the rows' (HFServer requests') reused keys/values right-aligned in ``past`` positions (zeros where a row has none)."""
    source = next(r.past for r in rows if r.past is not None)
    stacked = []
    for layer, (k0, v0) in enumerate(source):
        keys = k0.new_zeros(len(rows), k0.shape[1], past, k0.shape[3])
        values = v0.new_zeros(len(rows), v0.shape[1], past, v0.shape[3])
        for i, request in enumerate(rows):
            if request.past is not None and request.reused:
                keys[i, :, past - request.reused :] = request.past[layer][0][0]
                values[i, :, past - request.reused :] = request.past[layer][1][0]
        stacked.append((keys, values))
    return stacked
