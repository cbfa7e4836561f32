"""The GSM8K code-verify workflow end to end on CPU: data prep → verl's RLHFDataset → verl's
AgentLoopWorker with the experiment's own config → real sandboxed python_exec → reward."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import open_dict

from extensions.data.gsm8k import main as prepare_main
from extensions.interactions.code_verify import VERIFY_PROMPT
from extensions.rollout.cli import compose_experiment
from extensions.rollout.convert import to_record
from extensions.rollout.data import batches, file_list, load_dataset
from extensions.rollout.scoring import load_reward_fn, score
from extensions.testing.scripted_server import ScriptedServer
from extensions.verl_config import build_agent_loop_worker

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "Tom has 9 bags with 2 apples each. How many apples does Tom have?"


@pytest.fixture(scope="module")
def experiment(qwen_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("e2e")
    (tmp / "in.jsonl").write_text(json.dumps({"question": QUESTION, "answer": "9 * 2 = <<9*2=18>>18\n#### 18"}) + "\n")
    code = prepare_main(
        ["--input", str(tmp / "in.jsonl"), "--output-dir", str(tmp / "data"), "--interaction", "code_verify"]
    )
    assert code == 0
    config, _ = compose_experiment(
        str(ROOT / "experiments" / "gsm8k_code_verify"),
        [f"actor_rollout_ref.model.path={qwen_dir}", f"data.train_files={tmp / 'data' / 'train.parquet'}"],
    )
    return config


async def test_code_verify_trajectory_reward_reason_and_mask(experiment, monkeypatch):
    monkeypatch.chdir(ROOT)  # the experiment's paths are relative to the repo root
    config = experiment
    with open_dict(config):
        config.reward.custom_reward_function.reward_kwargs = {"w_turn": 0.5, "w_tool": 0.25, "w_format": 0.1}
    replies = [
        "<think>9 bags, 2 each... maybe 17</think>Tom has 17 apples.\n#### 17",
        '<tool_call>\n{"name": "python_exec", "arguments": {"code": "print(9 * 2)"}}\n</tool_call>',
        '```json\n{"name": "check_answer", "arguments": {"answer": "18"}\n```',  # malformed: missing }
        "I was wrong: the code prints 18.\n#### 18",
    ]
    worker = build_agent_loop_worker(config, llm_client=None)
    worker.llm_client = ScriptedServer(worker.tokenizer, {QUESTION: replies})
    dataset = load_dataset(file_list(config.data.train_files), worker.tokenizer, config.data)
    (batch,) = list(batches(dataset, 8))
    out = await worker.generate_sequences(batch)
    record = to_record(out, 0, worker.tokenizer)
    score(record, load_reward_fn(config), worker.tokenizer, out.non_tensor_batch["extras"][0])

    assert record.termination_reason == "interaction_done"
    assert [t.role for t in record.turns] == [
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert record.turns[1].visible_text == VERIFY_PROMPT and record.turns[1].score == 0.0
    tool_call = record.turns[3].tool_calls[0]
    assert (tool_call.name, tool_call.result, tool_call.error) == ("python_exec", "18\n[exit status 0]", None)
    assert record.turns[5].malformed_tool_calls and record.turns[5].malformed_tool_calls[0].startswith(
        "Tool call 1 is not valid JSON"
    )
    assert record.turn_scores == [0.0, 1.0] and record.tool_rewards == [0.0]
    # reward = 1*outcome + 0.5*mean(turn_scores) + 0.25*mean(tool_rewards) - 0.1*malformed
    assert record.reward == pytest.approx(1.0 + 0.5 * 0.5 + 0.25 * 0.0 - 0.1 * 1)
    assert record.reward_extra_info["acc"] == 1.0 and record.reward_extra_info["num_malformed_tool_calls"] == 1.0
    # mask: assistant spans 1, everything else 0, and they tile the response
    for turn in record.turns:
        lo, hi = turn.span
        assert record.response_mask[lo:hi] == [int(turn.role == "assistant")] * (hi - lo)
    assert sum(hi - lo for lo, hi in (t.span for t in record.turns)) == len(record.response_ids)
