"""Replay: recorded trajectories re-run through verl's worker rebuild identical tokens and masks."""

from __future__ import annotations

from extensions.rollout.convert import to_record
from extensions.rollout.records import read_jsonl, write_jsonl
from extensions.rollout.replay import replay
from tests.conftest import run_batch, sample
from tests.test_long_workflow import tool_call


async def test_replay_is_token_identical_and_catches_drift(worker, tmp_path):
    long_text = " ".join(f"w{i}" for i in range(300))
    script = {
        "RP-a": [
            "<think>use the tool</think>" + tool_call("echo", text="one"),
            "It is 1.",
            tool_call("echo", text=long_text) + tool_call("nosuch", text="x"),
            "<think>done</think>Final: 1",
        ],
        "RP-b": ["Plain answer 7."],
    }
    samples = [
        sample("RP-a", "long_workflow", interaction_kwargs={"name": "scripted", "user_messages": ["Sure?"]}),
        sample("RP-b", "long_workflow"),
    ]
    out = await run_batch(worker, script, samples)
    records = [to_record(out, i, worker.tokenizer) for i in range(len(out))]
    assert [r.termination_reason for r in records] == ["interaction_done", "final_answer"]
    write_jsonl(records, tmp_path / "t.jsonl")
    records = read_jsonl(tmp_path / "t.jsonl")

    problems, _ = await replay(records, worker.config, tmp_path / "replay")
    assert problems == []

    drifted = records[0].model_copy(deep=True)
    drifted.response_mask[3] ^= 1
    problems, _ = await replay([drifted], worker.config, tmp_path / "replay2")
    n = len(drifted.response_mask)
    assert problems == [f"trajectory 0: response_mask differs at position 3 (lengths {n} vs {n})"]
