"""HFServer on a tiny random Qwen2: parity with model.generate, batching, limits, stops, logprobs, errors.

.venv/bin/python -m pytest tests/backends -q
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import torch

from extensions.backends.compare_generate import compare, run_generate
from extensions.backends.hf_server import HFServer

GREEDY = {"temperature": 0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}
PROMPTS = [list(range(1000, 1000 + n * 7, 7)) for n in (5, 17, 9, 30)]


@pytest.fixture
async def server(tiny_model: Any) -> AsyncIterator[HFServer]:
    srv = HFServer(tiny_model, num_threads=1)
    yield srv
    srv.close()


async def generate(server: HFServer, prompt: list[int], **params: Any) -> Any:
    return await server.generate("r", prompt_ids=prompt, sampling_params={**GREEDY, **params})


def first_new_token_index(tokens: list[int], start: int = 2) -> int:
    """An index k >= start whose token does not occur earlier, so stopping on it stops exactly there."""
    return next(k for k in range(start, len(tokens)) if tokens[k] not in tokens[:k])


async def test_greedy_matches_model_generate(server: HFServer, tiny_model: Any) -> None:
    for prompt in PROMPTS:
        out = await generate(server, prompt, max_tokens=16)
        expected = run_generate(tiny_model, [prompt], 16, server.eos_ids, server.pad_id)[0]
        assert out.token_ids == expected
        assert out.stop_reason == "length"
        assert out.extra_fields == {"min_global_steps": None, "max_global_steps": None}


async def test_concurrent_requests_match_sequential(server: HFServer) -> None:
    sequential = [(await generate(server, p, max_tokens=12)).token_ids for p in PROMPTS]
    outs = await asyncio.gather(*(generate(server, p, max_tokens=12 - i) for i, p in enumerate(PROMPTS)))
    assert [o.token_ids for o in outs] == [s[: 12 - i] for i, s in enumerate(sequential)]
    assert server.max_batch_seen > 1


async def test_request_joins_a_running_batch(server: HFServer) -> None:
    alone = [(await generate(server, p, max_tokens=n)).token_ids for p, n in ((PROMPTS[0], 300), (PROMPTS[3], 8))]
    long_task = asyncio.create_task(generate(server, PROMPTS[0], max_tokens=300))
    while not server._batch.rows or not server._batch.rows[0].token_ids:  # wait until the first request is decoding
        await asyncio.sleep(0.001)
    late = await generate(server, PROMPTS[3], max_tokens=8)
    assert not long_task.done()
    assert (await long_task).token_ids == alone[0]
    assert late.token_ids == alone[1]
    assert server.max_batch_seen == 2


async def test_max_tokens_is_honoured_and_clamped(tiny_model: Any) -> None:
    srv = HFServer(tiny_model, num_threads=1, max_model_len=40)
    try:
        assert len((await generate(srv, PROMPTS[0], max_tokens=7)).token_ids) == 7
        assert len((await generate(srv, PROMPTS[0], max_new_tokens=3)).token_ids) == 3
        assert len((await generate(srv, PROMPTS[0], max_tokens=0)).token_ids) == 1  # verl's vLLM server clamps to 1
        capped = await generate(srv, PROMPTS[3], max_tokens=100)  # 30 prompt tokens, context 40
        assert (len(capped.token_ids), capped.stop_reason) == (10, "length")
        assert len((await generate(srv, PROMPTS[3])).token_ids) == 10  # no max_tokens: up to the context
    finally:
        srv.close()


async def test_stop_token_ids_and_eos_end_the_reply_inclusively(server: HFServer, tiny_model: Any) -> None:
    full = (await generate(server, PROMPTS[1], max_tokens=20)).token_ids
    k = first_new_token_index(full)
    out = await generate(server, PROMPTS[1], max_tokens=20, stop_token_ids=[full[k]])
    assert (out.token_ids, out.stop_reason) == (full[: k + 1], "completed")
    saved = tiny_model.generation_config.eos_token_id
    tiny_model.generation_config.eos_token_id = full[k]
    eos_server = HFServer(tiny_model, num_threads=1)
    tiny_model.generation_config.eos_token_id = saved
    try:
        assert (await generate(eos_server, PROMPTS[1], max_tokens=20)).token_ids == full[: k + 1]
        assert (await generate(eos_server, PROMPTS[1], max_tokens=20, ignore_eos=True)).token_ids == full
    finally:
        eos_server.close()


def manual_logits(model: Any, prompt: list[int], reply: list[int]) -> torch.Tensor:
    """Logits that predicted each reply token, from one full forward pass with no cache."""
    with torch.inference_mode():
        logits = model(torch.tensor([prompt + reply[:-1]])).logits[0].float()
    return logits[len(prompt) - 1 :]


async def test_logprobs_match_a_manual_forward_pass(server: HFServer, tiny_model: Any) -> None:
    out = await generate(server, PROMPTS[2], max_tokens=10)
    assert len(out.log_probs) == len(out.token_ids) == 10
    logits = manual_logits(tiny_model, PROMPTS[2], out.token_ids)
    expected = torch.log_softmax(logits, -1).gather(1, torch.tensor(out.token_ids)[:, None])[:, 0]
    assert torch.allclose(torch.tensor(out.log_probs), expected, atol=1e-4)
    assert out.token_ids == logits.argmax(-1).tolist()
    assert (await generate(server, PROMPTS[2], max_tokens=3, logprobs=False)).log_probs is None


@pytest.mark.parametrize("mode", ["processed_logprobs", "raw_logprobs"])
async def test_sampled_logprobs_follow_the_logprobs_mode(tiny_model: Any, mode: str) -> None:
    srv = HFServer(tiny_model, num_threads=1, logprobs_mode=mode)
    try:
        out = await generate(srv, PROMPTS[2], max_tokens=10, temperature=0.7, seed=3)
        again = await generate(srv, PROMPTS[2], max_tokens=10, temperature=0.7, seed=3)
    finally:
        srv.close()
    assert again.token_ids == out.token_ids
    logits = manual_logits(tiny_model, PROMPTS[2], out.token_ids)
    scaled = logits / 0.7 if mode == "processed_logprobs" else logits
    expected = torch.log_softmax(scaled, -1).gather(1, torch.tensor(out.token_ids)[:, None])[:, 0]
    assert torch.allclose(torch.tensor(out.log_probs), expected, atol=1e-4)


async def test_top_k_one_is_greedy(server: HFServer) -> None:
    greedy = await generate(server, PROMPTS[0], max_tokens=8)
    assert (await generate(server, PROMPTS[0], max_tokens=8, temperature=1.3, top_k=1)).token_ids == greedy.token_ids
    assert (await generate(server, PROMPTS[0], max_tokens=8, temperature=1.0, top_p=1e-6)).token_ids == greedy.token_ids


async def test_bad_sampling_params_raise_one_clear_error(server: HFServer) -> None:
    bad = {"temperature": -1, "top_p": 2, "max_tokens": "10", "best_of": 2}
    message = (
        "bad sampling_params: unknown key 'best_of'; temperature must be a number >= 0, got -1; "
        "top_p must be a number in (0, 1], got 2; max_tokens must be an integer, got '10'. Supported keys: "
        "ignore_eos, logprobs, max_new_tokens, max_tokens, repetition_penalty, seed, stop, stop_token_ids, temperature, "
        "top_k, top_p"
    )
    with pytest.raises(ValueError, match=re.escape(message) + "$"):
        await server.generate("r", prompt_ids=PROMPTS[0], sampling_params=bad)
    with pytest.raises(ValueError, match=r"prompt_ids must be non-empty ids in \[0, 151936\)"):
        await server.generate("r", prompt_ids=[151936], sampling_params=GREEDY)
    assert len((await generate(server, PROMPTS[0], max_tokens=2)).token_ids) == 2  # still serving


async def test_from_pretrained_serves_a_model_dir(tiny_model_dir: Path, tiny_model: Any) -> None:
    srv = HFServer.from_pretrained(tiny_model_dir, num_threads=1)
    try:
        out = await generate(srv, PROMPTS[1], max_tokens=6)
    finally:
        srv.close()
    assert out.token_ids == run_generate(tiny_model, [PROMPTS[1]], 6, srv.eos_ids, srv.pad_id)[0]


async def test_close_fails_waiting_requests(tiny_model: Any) -> None:
    srv = HFServer(tiny_model, num_threads=1)
    srv.close()
    with pytest.raises(RuntimeError, match="HFServer is closed"):
        await generate(srv, PROMPTS[0], max_tokens=2)


def test_compare_generate_reports_identical_greedy_outputs(tiny_model: Any) -> None:
    results = compare(tiny_model, PROMPTS[:3], max_tokens=6, num_threads=1)
    assert [r.outputs == results[0].outputs for r in results] == [True, True, True]
    assert all(r.tokens == 18 for r in results)


async def test_stop_strings_end_the_reply_at_the_token_that_completes_one(tiny_model: Any, qwen_dir: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(qwen_dir)
    server = HFServer(tiny_model, num_threads=1, tokenizer=tokenizer)
    try:
        full = (await generate(server, PROMPTS[1], max_tokens=20)).token_ids
        pieces = [tokenizer.decode(full[:end], skip_special_tokens=True) for end in range(1, len(full) + 1)]
        k = next(i for i in range(3, len(full)) if len(pieces[i]) > len(pieces[i - 1]) >= 2)
        stop = pieces[k][-2:]  # the last two characters the (k+1)-th token completes
        first = next(i for i, text in enumerate(pieces) if stop in text)  # vLLM stops at the first completion
        out = await generate(server, PROMPTS[1], max_tokens=20, stop=[stop])
        assert (out.token_ids, out.stop_reason) == (full[: first + 1], "completed")
    finally:
        server.close()
    no_tokenizer = HFServer(tiny_model, num_threads=1)
    try:
        with pytest.raises(ValueError, match=r"stop strings need HFServer\(tokenizer=...\) to detokenize"):
            await generate(no_tokenizer, PROMPTS[1], max_tokens=5, stop=["x"])
    finally:
        no_tokenizer.close()
