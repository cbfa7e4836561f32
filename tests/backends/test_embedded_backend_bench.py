"""benchmarks.embedded_backend's pieces on the tiny model: trace replay, plain generate, per-turn summary.

.venv/bin/python -m pytest tests/backends/test_embedded_backend_bench.py -q
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.embedded_backend import PlainGenerate, replay_turns, run_replay, summarize_scripted
from extensions.backends.hf_server import HFServer


def test_replay_turns_are_the_runs_of_mask_one(tmp_path: Path) -> None:
    record = {"prompt_ids": [1, 2], "response_ids": [3, 4, 5, 6, 7, 8], "response_mask": [1, 1, 0, 0, 1, 1]}
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(record) + "\n")
    assert replay_turns(path) == [[([1, 2], [3, 4]), ([1, 2, 3, 4, 5, 6], [7, 8])]]


async def test_replay_reproduces_greedy_replies_on_every_server(tiny_model: Any) -> None:
    server = HFServer(tiny_model, num_threads=1)
    try:
        prompt = list(range(3000, 3020))
        first = (
            await server.generate("a", prompt_ids=prompt, sampling_params={"temperature": 0, "max_tokens": 5})
        ).token_ids
        second_prompt = prompt + first + [9, 9]
        params = {"temperature": 0, "max_tokens": 4}
        second = (await server.generate("b", prompt_ids=second_prompt, sampling_params=params)).token_ids
        trajectories = [[(prompt, first), (second_prompt, second)]]
        plain = PlainGenerate(tiny_model, server.eos_ids, server.pad_id)
        for srv in (server, plain):
            result = await run_replay(srv, trajectories)
            assert (result["identical_replies"], result["generated_tokens"], result["assistant_turns"]) == ("2/2", 9, 2)
    finally:
        server.close()


def test_scripted_summary_interpolates_unmeasured_turns() -> None:
    records = [{"turn": t, "prompt": [0] * (10 * t), "reply": [1, 2], "s": s} for t, s in ((1, 1.0), (3, 3.0))]
    summary = summarize_scripted(records, turns=3)
    assert (summary["total_s"], summary["turn_last_over_first"], summary["total_is_interpolated"]) == (6.0, 3.0, True)
    assert summary["gen_tok_s"] == 1.0  # 2 tokens x 3 turns / 6 s
    assert summary["context_tokens"] == {"1": 10, "3": 30}
