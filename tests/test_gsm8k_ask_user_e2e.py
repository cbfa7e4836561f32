"""gsm8k_ask_user end to end on CPU: data prep -> verl's RLHFDataset -> verl's AgentLoopWorker with the
experiment's own config -> the policy plays the user (scripted fake server) -> real python_exec -> reward."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from extensions.data.gsm8k_ask_user import main as prepare_main
from extensions.rollout.cli import compose_experiment
from extensions.rollout.convert import to_record
from extensions.rollout.data import batches, load_dataset
from extensions.rollout.scoring import load_reward_fn, score
from extensions.rollout.summary import summarize
from extensions.testing.scripted_server import ScriptedServer
from extensions.verl_config import build_agent_loop_worker
from tests.test_llm_user import RoutedServer

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "Tom has 9 bags with 2 apples each. How many apples does Tom have?"
MASKED = "Tom has some bags with 2 apples each. How many apples does Tom have?"
FACT = "Tom has 9 bags with 2 apples each."


@pytest.fixture(scope="module")
def experiment(qwen_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ask_user")
    (tmp / "in.jsonl").write_text(json.dumps({"question": QUESTION, "answer": "9 * 2 = <<9*2=18>>18\n#### 18"}) + "\n")
    assert prepare_main(["--input", str(tmp / "in.jsonl"), "--output-dir", str(tmp / "data")]) == 0
    config, _ = compose_experiment(
        str(ROOT / "experiments" / "gsm8k_ask_user"), [f"actor_rollout_ref.model.path={qwen_dir}"]
    )
    return config, tmp / "data"


async def run(config, data: Path, variant: str, agent: list[str], user: list[str]):
    worker = build_agent_loop_worker(config, llm_client=None)
    routed = RoutedServer(
        ScriptedServer(worker.tokenizer, {"How many apples": agent}), ScriptedServer(worker.tokenizer, {FACT: user})
    )
    worker.llm_client = routed
    dataset = load_dataset([str(data / f"{variant}.parquet")], worker.tokenizer, config.data)
    (batch,) = list(batches(dataset, 8))
    out = await worker.generate_sequences(batch)
    record = to_record(out, 0, worker.tokenizer)
    score(record, load_reward_fn(config), worker.tokenizer, out.non_tensor_batch["extras"][0])
    return record, routed


async def test_agent_asks_the_policy_user_computes_and_is_rewarded(experiment, monkeypatch):
    monkeypatch.chdir(ROOT)  # the experiment's paths are relative to the repo root
    config, data = experiment
    agent = [
        "How many bags does Tom have?",
        '<tool_call>\n{"name": "python_exec", "arguments": {"code": "print(9 * 2)"}}\n</tool_call>',
        "Tom has 18 apples.\n#### 18",
    ]
    record, routed = await run(config, data, "ask_user", agent, ["He has 9 bags."])
    assert record.termination_reason == "interaction_done"
    assert [t.role for t in record.turns] == ["assistant", "user", "assistant", "tool", "assistant", "user"]
    assert record.turns[1].text == "\n<|im_start|>user\nHe has 9 bags.<|im_end|>\n<|im_start|>assistant\n"
    assert record.turns[1].visible_text == "He has 9 bags." and not record.turns[1].trained
    assert record.turns[3].tool_calls[0].result == "18\n[exit status 0]"
    assert record.turn_scores == [0.0, 1.0]
    assert record.reward_extra_info["acc"] == 1.0
    (prompt,) = routed.user_prompts  # the user model saw its fact and its own (masked) question
    text = routed.user.tokenizer.decode(prompt)
    assert f"Facts only you know:\n- {FACT}" in text and f"<|im_start|>assistant\n{MASKED}<|im_end|>" in text
    assert summarize([record], 1.0)["user_turn_rate"] == 1.0


async def test_full_problem_without_user_ends_on_the_answer(experiment, monkeypatch):
    monkeypatch.chdir(ROOT)
    config, data = experiment
    record, routed = await run(config, data, "full", ["9 * 2 = 18\n#### 18"], [])
    assert record.termination_reason == "final_answer" and record.reward_extra_info["acc"] == 1.0
    assert routed.user_prompts == [] and summarize([record], 1.0)["user_turn_rate"] == 0.0
