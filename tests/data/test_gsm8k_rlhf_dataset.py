"""The prepared parquet loads through verl's RLHFDataset and reaches the agent loop as intended.

Path of a sample: RLHFDataset.__getitem__ (rl_dataset.py) -> collate_fn -> DataProto.from_single_dict
-> AgentLoopWorker.generate_sequences, which hands ``{k: v[i] for k, v in non_tensor_batch.items()}``
to ``_run_agent_loop(agent_name=..., **kwargs)`` and on to ``agent_loop.run(sampling_params, **kwargs)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from verl import DataProto
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

from extensions.data.gsm8k import prepare
from extensions.data.prompts import DEFAULT_TOOLS, system_prompt


def load(tmp_path: Path, parquet: Path, tokenizer: Any) -> RLHFDataset:
    """verl's dataset over ``parquet``. The overlong-prompt filter is off: datasets dill-hashes the
    tokenizer to fingerprint the filter, ~30 s on 2 cores; the test measures prompt length itself."""
    config = OmegaConf.create(
        {"prompt_key": "prompt", "filter_overlong_prompts": False, "cache_dir": str(tmp_path / "verl-cache")}
    )
    return RLHFDataset(data_files=str(parquet), tokenizer=tokenizer, config=config)


def test_rlhf_dataset_item_and_agent_loop_kwargs(
    problems_jsonl: str, problems: list[dict[str, str]], tmp_path: Path, qwen_tokenizer: Any
) -> None:
    written = prepare(problems_jsonl, tmp_path / "out", interaction="code_verify", val_size=1)
    dataset = load(tmp_path, written["train"], qwen_tokenizer)
    assert len(dataset) == 2

    # 1. The dataset item.
    item = dataset[1]
    question = problems[2]["question"]
    assert item["raw_prompt"] == [
        {"role": "system", "content": system_prompt(DEFAULT_TOOLS)},
        {"role": "user", "content": question},
    ]
    assert item["agent_name"] == "long_workflow"
    assert item["index"] == 2
    assert item["tools_kwargs"] == {"check_answer": {"create_kwargs": {"ground_truth": "2.5"}}}
    assert item["interaction_kwargs"] == {"name": "code_verify", "query": question, "ground_truth": "2.5"}
    assert item["data_source"] == "longflow/gsm8k"
    assert item["reward_model"] == {"style": "rule", "ground_truth": "2.5"}

    # 2. What one agent loop's run() receives after collate_fn and DataProto.
    batch = DataProto.from_single_dict(collate_fn([dataset[i] for i in range(len(dataset))]))
    kwargs = {key: value[1] for key, value in batch.non_tensor_batch.items()}
    assert kwargs["agent_name"] == "long_workflow"
    assert list(kwargs["raw_prompt"]) == item["raw_prompt"]
    assert kwargs["tools_kwargs"]["check_answer"]["create_kwargs"] == {"ground_truth": "2.5"}
    assert kwargs["interaction_kwargs"]["ground_truth"] == "2.5"
    assert kwargs["extra_info"]["tool_selection"] == list(DEFAULT_TOOLS)
    # The prompt renders with the real Qwen2.5 chat template, ending in the generation prompt, and
    # fits the default data.max_prompt_length (1024) with room for the tool schemas.
    text = qwen_tokenizer.apply_chat_template(kwargs["raw_prompt"], add_generation_prompt=True, tokenize=False)
    assert text.endswith(f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n")
    assert len(qwen_tokenizer(text, add_special_tokens=False)["input_ids"]) < 256


def test_rlhf_dataset_without_tools_or_interaction(problems_jsonl: str, tmp_path: Path, qwen_tokenizer: Any) -> None:
    written = prepare(problems_jsonl, tmp_path / "out", tools=[], limit=1)
    item = load(tmp_path, written["train"], qwen_tokenizer)[0]
    assert (item["tools_kwargs"], item["interaction_kwargs"]) == ({}, {})
