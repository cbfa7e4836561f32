"""compute_score called the way verl 0.9.1 calls it: get_custom_reward_fn + NaiveRewardManager.run_single.

The response is a real multi-turn Qwen2.5 transcript (chat template + real tokenizer), so the
``skip_special_tokens=True`` decode verl does is exercised, not assumed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from tensordict import TensorDict
from verl import DataProto
from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager
from verl.trainer.ppo.reward import get_custom_reward_fn

import extensions
from extensions.custom_rewards import REWARD_KEYS

PROMPT = [
    {"role": "system", "content": "Solve it. End with #### <number>."},
    {"role": "user", "content": "A baker fills 6 trays with 12 muffins each. How many muffins?"},
]
TURNS = [
    {
        "role": "assistant",
        "content": '<think>12*6</think>\n<tool_call>\n{"name": "calculator", "arguments": {}}\n</tool_call>',
    },
    {"role": "tool", "content": "#### 99 (a tool result that must not count)"},
    {"role": "assistant", "content": "<think>so #### 5?</think>Each tray holds 12, so:\n#### 72"},
]


def encode(tokenizer: Any, turns: list[dict[str, str]]) -> list[list[int]]:
    """Prompt ids and response ids exactly as the chat template lays out the trajectory."""
    prompt_text = tokenizer.apply_chat_template(PROMPT, add_generation_prompt=True, tokenize=False)
    full_text = tokenizer.apply_chat_template(PROMPT + turns, tokenize=False)
    assert full_text.startswith(prompt_text)
    response_text = full_text[len(prompt_text) :]
    return [tokenizer(text, add_special_tokens=False)["input_ids"] for text in (prompt_text, response_text)]


def reward_batch(tokenizer: Any, extra_fields: dict[str, Any]) -> DataProto:
    """One sample shaped like AgentLoopWorker._compute_score's DataProto (agent_loop.py)."""
    prompt_ids, response_ids = encode(tokenizer, TURNS)
    prompts, responses = torch.tensor([prompt_ids]), torch.tensor([response_ids])
    input_ids = torch.cat([prompts, responses], dim=1)
    batch = TensorDict(
        {
            "prompts": prompts,
            "responses": responses,
            "input_ids": input_ids,
            "attention_mask": torch.ones_like(input_ids),
            "position_ids": torch.arange(input_ids.shape[1]).unsqueeze(0),
        },
        batch_size=1,
    )
    non_tensor = {
        "data_source": np.array(["longflow/gsm8k"], dtype=object),
        "reward_model": np.array([{"style": "rule", "ground_truth": "72"}], dtype=object),
        "extra_info": np.array([{"split": "train", "index": 0}], dtype=object),
        "tool_extra_fields": np.array([extra_fields], dtype=object),
        "__num_turns__": np.array([4]),
    }
    return DataProto(batch=batch, non_tensor_batch=non_tensor)


def reward_config(path: str, **reward_kwargs: Any) -> Any:
    return OmegaConf.create(
        {"reward": {"custom_reward_function": {"path": path, "name": "compute_score", "reward_kwargs": reward_kwargs}}}
    )


@pytest.mark.parametrize(
    "path", ["pkg://extensions.custom_rewards", str(Path(extensions.__file__).parent / "custom_rewards.py")]
)
async def test_naive_reward_manager_calls_compute_score(qwen_tokenizer: Any, path: str) -> None:
    config = reward_config(path, w_turn=0.5, w_tool=0.25, w_format=0.125)
    manager = NaiveRewardManager(config, qwen_tokenizer, compute_score=get_custom_reward_fn(config))
    extra_fields = {
        "turn_scores": [1.0],
        "tool_rewards": [0.0],
        "extras": {"termination_reason": "final_answer", "num_malformed_tool_calls": 1, "num_tool_calls": 1},
    }
    result = await manager.run_single(reward_batch(qwen_tokenizer, extra_fields))
    # The last assistant turn holds '#### 72'; the tool's '#### 99' and the thought's '#### 5' do not count.
    assert result["reward_score"] == 1.0 + 0.5 * 1.0 + 0.25 * 0.0 - 0.125
    assert tuple(result["reward_extra_info"]) == REWARD_KEYS
    assert result["reward_extra_info"]["num_tool_calls"] == 1.0


async def test_final_answer_text_from_extras_is_preferred(qwen_tokenizer: Any) -> None:
    config = reward_config("pkg://extensions.custom_rewards")
    manager = NaiveRewardManager(config, qwen_tokenizer, compute_score=get_custom_reward_fn(config))
    extra_fields = {"turn_scores": [], "tool_rewards": [], "extras": {"final_answer_text": "I give up."}}
    result = await manager.run_single(reward_batch(qwen_tokenizer, extra_fields))
    assert (result["reward_score"], result["reward_extra_info"]["answer_found"]) == (0.0, 0.0)


def test_verl_decode_drops_role_tokens(qwen_tokenizer: Any) -> None:
    """What solution_str looks like: Qwen's <|im_start|> is skipped, the role name stays."""
    _, response_ids = encode(qwen_tokenizer, TURNS)
    decoded = qwen_tokenizer.decode(response_ids, skip_special_tokens=True)
    assert "\nuser\n<tool_response>\n#### 99" in decoded
    assert decoded.endswith("</tool_response>\nassistant\n<think>so #### 5?</think>Each tray holds 12, so:\n#### 72\n")
