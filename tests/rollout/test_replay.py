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


def test_trajectories_recorded_before_the_refactor_replay_token_exact():
    """The main job's 4 trajectories as recorded by f7e62c2 (before the seam refactor and prefix KV reuse)
    replay through today's LongWorkflowAgent with identical tokens and masks."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "extensions.rollout",
            "experiments/gsm8k_code_verify",
            "--replay",
            "tests/fixtures/main_job_before_refactor.jsonl",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "replayed 4 trajectories (0 skipped: errors or prompt_too_long), 0 mismatch(es)" in out.stdout
