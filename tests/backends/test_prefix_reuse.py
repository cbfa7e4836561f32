"""Prefix KV reuse in HFServer (tiny random Qwen2): greedy tokens identical with and without reuse, exact
reused counts, mixed batches, LRU bound; PrefixCache and the prefill planner on their own.

.venv/bin/python -m pytest tests/backends/test_prefix_reuse.py -q
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import torch

from extensions.backends.hf_server import HFServer, plan_prefill
from extensions.backends.prefix_cache import PrefixCache, common_prefix_len

GREEDY = {"temperature": 0, "logprobs": True}
SYSTEM = list(range(2000, 2040))  # a 40-token shared head, like a system prompt with tool schemas
TOOL = [151644, 872, 198, 3000, 3001, 3002, 151645, 198, 151644, 77091, 198]  # "<|im_start|>user\n...assistant\n"


@pytest.fixture
async def servers(tiny_model: Any) -> AsyncIterator[tuple[HFServer, HFServer]]:
    reuse, plain = HFServer(tiny_model, num_threads=1), HFServer(tiny_model, num_threads=1, prefix_cache_bytes=0)
    yield reuse, plain
    reuse.close()
    plain.close()


async def generate(server: HFServer, prompt: list[int], max_tokens: int) -> Any:
    return await server.generate("r", prompt_ids=prompt, sampling_params={**GREEDY, "max_tokens": max_tokens})


async def multi_turn(server: HFServer, first: list[int], turns: int, max_tokens: int) -> list[list[int]]:
    """A trajectory: each prompt = the last prompt + its reply + TOOL tokens (what an agent loop sends)."""
    return [turn[1] for turn in await multi_turn_prompts(server, first, turns, max_tokens)]


async def multi_turn_prompts(
    server: HFServer, first: list[int], turns: int, max_tokens: int
) -> list[tuple[list[int], list[int]]]:
    prompt, turns_seen = first, []
    for _ in range(turns):
        reply = (await generate(server, prompt, max_tokens)).token_ids
        turns_seen.append((prompt, reply))
        prompt = prompt + reply + TOOL
    return turns_seen


async def test_multi_turn_greedy_is_identical_and_prefills_only_new_tokens(
    servers: tuple[HFServer, HFServer],
) -> None:
    reuse, plain = servers
    first = [*SYSTEM, 5, 6, 7]
    got = await multi_turn_prompts(reuse, first, turns=4, max_tokens=9)
    assert [reply for _, reply in got] == await multi_turn(plain, first, turns=4, max_tokens=9)
    assert [len(reply) for _, reply in got] == [9, 9, 9, 9]
    stats = reuse.prefix_cache.stats
    assert (stats.lookups, stats.hits) == (4, 3)
    # turn k+1 reuses turn k's prompt + its reply except the last reply token (never run through the model)
    assert stats.reused_tokens == sum(len(prompt) + len(reply) - 1 for prompt, reply in got[:3]) == 51 + 71 + 91
    assert len(reuse.prefix_cache) == 1  # each turn's entry supersedes the last one
    assert plain.prefix_cache is None


async def test_logprobs_match_without_reuse(servers: tuple[HFServer, HFServer]) -> None:
    reuse, plain = servers
    first = [*SYSTEM, 9]
    r1, p1 = await generate(reuse, first, 6), await generate(plain, first, 6)
    assert r1.token_ids == p1.token_ids
    second = first + r1.token_ids + TOOL
    r2, p2 = await generate(reuse, second, 6), await generate(plain, second, 6)
    assert reuse.prefix_cache.stats.reused_tokens == len(first) + 5
    assert r2.token_ids == p2.token_ids
    assert torch.allclose(torch.tensor(r2.log_probs), torch.tensor(p2.log_probs), atol=1e-4)


async def test_a_batch_mixing_hits_of_different_lengths_and_misses(servers: tuple[HFServer, HFServer]) -> None:
    reuse, plain = servers
    heads = [[*SYSTEM, 11], [*SYSTEM, 12, 13, 14], [*SYSTEM[:20], 15] + list(range(4000, 4030))]
    for server in servers:  # turn 1 of three trajectories, one at a time
        for head in heads:
            await generate(server, head, 5)
    prompts = [heads[0] + [1] * 7, heads[1] + [2, 3], list(range(5000, 5012)), [*SYSTEM[:30], 16, 17]]
    before = reuse.prefix_cache.stats.reused_tokens
    outs = await asyncio.gather(*(generate(reuse, p, 8) for p in prompts))
    expected = [(await generate(plain, p, 8)).token_ids for p in prompts]
    assert [o.token_ids for o in outs] == expected
    # heads 0 and 1 are reused in full (their 5-token replies diverge from the new prompts), head 2's entry
    # shares 20 tokens with prompt 3 but heads 0/1 share 30, prompt 2 shares nothing
    assert reuse.prefix_cache.stats.reused_tokens - before == len(heads[0]) + len(heads[1]) + 30
    assert reuse.max_batch_seen > 1


async def test_concurrent_trajectories_stay_identical(servers: tuple[HFServer, HFServer]) -> None:
    reuse, plain = servers
    firsts = [[*SYSTEM, 100 + i] + [7] * (3 * i) for i in range(4)]
    got = await asyncio.gather(*(multi_turn(reuse, f, turns=3, max_tokens=6 + i) for i, f in enumerate(firsts)))
    want = [await multi_turn(plain, f, turns=3, max_tokens=6 + i) for i, f in enumerate(firsts)]
    assert list(got) == want
    assert reuse.prefix_cache.stats.hits >= 8  # turns 2-3 of each trajectory, plus shared heads on turn 1


async def test_memory_bound_evicts_least_recently_used(tiny_model: Any) -> None:
    config = tiny_model.config
    # layers x (keys, values) x kv heads x head_dim x 4 bytes (float32)
    per_token = config.num_hidden_layers * 2 * config.num_key_value_heads * 16 * 4
    server = HFServer(tiny_model, num_threads=1, prefix_cache_bytes=100 * per_token)
    try:
        a, b = [6000 + i for i in range(40)], [7000 + i for i in range(40)]
        for prompt in (a, b):
            await generate(server, prompt, 3)  # each stores 40 + 2 positions
        cache = server.prefix_cache
        assert (len(cache), cache.nbytes, cache.stats.evictions) == (2, 84 * per_token, 0)
        await generate(server, [*a, 1], 3)  # reuses (touches) a's entry, stores 43 positions: b is evicted
        assert (len(cache), cache.nbytes, cache.stats.evictions) == (2, 85 * per_token, 1)
        assert cache.stats.reused_tokens == 40
        assert cache.lookup([*b, 1])[0] == 0
        assert cache.lookup([*a, 1, 5])[0] == 41
    finally:
        server.close()


def test_prefix_cache_store_lookup_and_supersede() -> None:
    def kv(n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [(torch.arange(n, dtype=torch.float32).view(1, 1, n, 1), torch.zeros(1, 1, n, 1))]

    cache = PrefixCache(max_bytes=1000, min_match_tokens=3)
    assert cache.insert([1, 2, 3, 4], kv(4))
    assert cache.lookup([1, 2, 3, 4, 5])[0] == 4
    n, got = cache.lookup([1, 2, 3, 4])  # at most len - 1: one token must be left to run
    assert n == 3 and got[0][0].flatten().tolist() == [0.0, 1.0, 2.0]
    assert cache.lookup([1, 2, 9, 9])[0] == 0  # 2 < min_match_tokens
    assert not cache.insert([1, 2, 3], kv(3))  # covered by [1, 2, 3, 4]
    assert cache.insert([1, 2, 3, 4, 5, 6], kv(6)) and len(cache) == 1 and cache.nbytes == 48
    assert not cache.insert(list(range(200)), kv(200))  # alone above max_bytes
    with pytest.raises(ValueError, match="3 tokens but keys/values for 4 positions"):
        cache.insert([1, 2, 3], kv(4))


def test_common_prefix_len() -> None:
    t = torch.tensor
    assert [common_prefix_len(t(a), t(b)) for a, b in (([1, 2, 3], [1, 2, 4]), ([1, 2], [1, 2, 3]), ([], [1]))] == [
        2,
        2,
        0,
    ]


def test_plan_prefill_groups_requests_of_similar_length() -> None:
    assert plan_prefill([5, 400, 12, 30]) == [[0, 2], [3], [1]]  # 30 would add 2 x 18 > 32 padding
    assert plan_prefill([5, 400, 12, 25]) == [[0, 2, 3], [1]]
    assert plan_prefill([100, 100, 100]) == [[0, 1, 2]]
    assert plan_prefill([10, 30, 50], overhead=30) == [[0, 1], [2]]
    assert plan_prefill([]) == []


async def test_requests_arriving_together_prefill_their_shared_head_once(servers: tuple[HFServer, HFServer]) -> None:
    reuse, plain = servers
    prompts = [[*SYSTEM, 300 + i, 301 + i] for i in range(3)]
    requests = [type("R", (), {"prompt_ids": p})() for p in prompts]
    with torch.inference_mode():
        reuse._prefill_shared_heads(requests)  # the model thread is idle, waiting for requests
    assert reuse.prefix_cache.longest(SYSTEM)[0] == 40
    assert (len(reuse.prefix_cache), reuse.forward_passes["prefill"]) == (1, 1)  # one head, one pass
    outs = await asyncio.gather(*(generate(reuse, p, 6) for p in prompts))
    assert [o.token_ids for o in outs] == [(await generate(plain, p, 6)).token_ids for p in prompts]
    assert reuse.prefix_cache.stats.reused_tokens >= 3 * 40
