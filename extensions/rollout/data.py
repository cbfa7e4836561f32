"""Samples for the rollout driver, loaded through verl's own RLHFDataset."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf, open_dict
from verl.protocol import DataProto
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

from extensions.errors import ConfigError

logger = logging.getLogger(__name__)


def file_list(value: Any) -> list[str]:
    """``data.train_files`` may be one path or a list of paths."""
    return [str(value)] if isinstance(value, (str, Path)) else [str(v) for v in value]


def load_dataset(files: list[str], tokenizer: Any, data_config: DictConfig) -> RLHFDataset:
    """verl's RLHFDataset over ``files``; overlong prompts are kept (the loop records them)."""
    for file in files:
        path = Path(file).expanduser()
        if not path.is_file():
            raise ConfigError(f"data file {str(path)!r} does not exist (set data.train_files or --data)")
        if path.suffix not in {".parquet", ".json", ".jsonl"}:
            raise ConfigError(f"data file {str(path)!r}: expected .parquet, .json or .jsonl")
    config = OmegaConf.create(OmegaConf.to_container(data_config, resolve=True))
    with open_dict(config):
        config.filter_overlong_prompts = False
        config.return_raw_chat = True
    try:
        dataset = RLHFDataset(files, tokenizer, config=config)  # its max_samples picks at random
    except Exception as exc:
        raise ConfigError(
            f"data files {files}: verl's RLHFDataset cannot read them: {type(exc).__name__}: {exc}"
        ) from exc
    prompt_key = config.get("prompt_key", "prompt")
    columns = dataset.dataframe.column_names
    if prompt_key not in columns:
        raise ConfigError(f"data files {files}: no prompt column {prompt_key!r}; columns are {sorted(columns)}")
    return dataset


def batch_from_rows(rows: list[dict[str, Any]]) -> DataProto:
    """A DataProto like verl's dataloader builds: one object array per key, ``None`` where a row lacks it."""
    columns = {}
    for key in sorted({k for row in rows for k in row}):
        column = np.empty(len(rows), dtype=object)  # filled one by one: lists must stay objects, not 2-D
        for i, row in enumerate(rows):
            column[i] = row.get(key)
        columns[key] = column
    return DataProto(non_tensor_batch=columns)


def batches(dataset: RLHFDataset, batch_size: int, limit: int | None = None) -> Iterator[DataProto]:
    """The first ``limit`` samples in order, as verl's trainer would feed them (collate_fn + DataProto)."""
    total = len(dataset) if limit is None else min(limit, len(dataset))
    for start in range(0, total, batch_size):
        items = [dataset[i] for i in range(start, min(start + batch_size, total))]
        batch = DataProto.from_single_dict(collate_fn(items))
        batch.non_tensor_batch["dataset_row"] = np.arange(start, start + len(items), dtype=object)
        yield batch


def fill_defaults(batch: DataProto, *, agent_name: str | None, interaction: str | None) -> list[str]:
    """Fill ``agent_name`` and ``interaction_kwargs.name`` where the dataset lacks them; returns warnings."""
    warnings, n = [], len(batch)
    columns = batch.non_tensor_batch
    if agent_name is not None:
        names = columns.get("agent_name")
        missing = [i for i in range(n) if names is None or not names[i]]
        if missing:
            column = np.empty(n, dtype=object)
            for i in range(n):
                column[i] = agent_name if i in missing else names[i]
            columns["agent_name"] = column
            warnings.append(f"{len(missing)} sample(s) had no agent_name; using {agent_name!r} from --agent-name")
    if interaction is not None:
        filled = 0
        for i in range(n):
            kwargs = dict(columns["interaction_kwargs"][i] or {})
            if "name" not in kwargs:
                kwargs["name"], filled = interaction, filled + 1
                _add_ground_truth(kwargs, columns, i)
            columns["interaction_kwargs"][i] = kwargs
        if filled:
            warnings.append(f"{filled} sample(s) had no interaction_kwargs.name; using {interaction!r}")
    for warning in warnings:
        logger.warning(warning)
    return warnings


def _add_ground_truth(kwargs: dict[str, Any], columns: dict[str, Any], i: int) -> None:
    reward_model = columns.get("reward_model")
    truth = (reward_model[i] or {}).get("ground_truth") if reward_model is not None else None
    if truth is not None:
        kwargs.setdefault("ground_truth", truth)
