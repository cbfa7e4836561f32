"""Validate a whole experiment before any model loads, listing every problem at once.

Used by ``python -m extensions.rollout`` (exit status 2 when anything is wrong):
``extensions.config_check.check_composed`` checks the composed config (tool parser, the tool,
agent-loop and interaction files it points at, the default loop, the reward function and its
``reward_kwargs``); ``check_data`` checks the samples that would run: the files exist and
load, the prompt column is there, each sample's agent loop is registered and its interaction
is defined for that loop.
"""

from __future__ import annotations

import importlib
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from extensions.config_check import agent_loop_entries, agent_loop_names, check_composed
from extensions.errors import ConfigError, choices

SUFFIXES = {".parquet", ".json", ".jsonl"}


def validate_experiment(
    config: DictConfig,
    where: str,
    *,
    data_files: list[str] | None,
    limit: int | None = None,
    agent_name: str | None = None,
    force_agent_name: str | None = None,
    interaction: str | None = None,
) -> list[str]:
    """Every problem of the composed ``config`` and, if ``data_files`` is given, of its first ``limit`` samples."""
    problems = check_composed(config, where, training=False)  # --backend vllm/sglang: check_server_replicas
    for flag, name in (("--agent-name", agent_name), ("--force-agent-name", force_agent_name)):
        if name is not None and name not in agent_loop_names(config):
            problems.append(
                f"{flag} {name!r} is not a registered agent loop; valid: {choices(agent_loop_names(config))}"
            )
    if data_files is not None:
        problems += check_data(
            config, data_files, limit=limit, agent_name=force_agent_name or agent_name, interaction=interaction
        )
    return list(dict.fromkeys(problems))


def read_rows(path: Path, columns: list[str] | None = None) -> tuple[list[str], list[dict[str, Any]]]:
    """The column names and rows of a .parquet, .json (a list of objects) or .jsonl file."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        names = pq.read_schema(path).names
        wanted = [c for c in (columns or names) if c in names]
        return names, pq.read_table(path, columns=wanted).to_pylist()
    text = path.read_text()
    rows = json.loads(text) if path.suffix == ".json" else [json.loads(line) for line in text.splitlines() if line]
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ValueError("expected a list of JSON objects")
    return sorted({k for r in rows for k in r}), rows


def check_data(
    config: DictConfig,
    files: list[str],
    *,
    limit: int | None = None,
    agent_name: str | None = None,
    interaction: str | None = None,
) -> list[str]:
    """The data files load, have the prompt column, and each sample's agent loop and interaction exist."""
    prompt_key = str(config.data.get("prompt_key", "prompt"))
    problems, rows = [], []
    for file in files:
        path = Path(file).expanduser()
        if not path.is_file():
            problems.append(f"data file {file!r} does not exist (set data.train_files or --data)")
            continue
        if path.suffix not in SUFFIXES:
            problems.append(f"data file {file!r}: expected one of {choices(SUFFIXES)}")
            continue
        try:
            names, file_rows = read_rows(path, [prompt_key, "agent_name", "extra_info"])
        except Exception as exc:
            problems.append(f"data file {file!r} cannot be read: {type(exc).__name__}: {exc}")
            continue
        if prompt_key not in names:
            problems.append(f"data file {file!r}: no prompt column {prompt_key!r} (data.prompt_key); columns: {names}")
        rows += [(file, i, row) for i, row in enumerate(file_rows)]
    default = agent_name or str(config.actor_rollout_ref.rollout.agent.default_agent_loop)
    return problems + _check_samples(config, rows[:limit], default, interaction)


def _check_samples(
    config: DictConfig, rows: list[tuple[str, int, dict[str, Any]]], default: str, interaction: str | None
) -> list[str]:
    """Group unknown agent loops and interactions by value: one problem each, with a count and the first sample."""
    loops, interactions = agent_loop_names(config), _interactions_by_loop(config)
    bad_loops: dict[str, list[str]] = defaultdict(list)
    bad_interactions: dict[tuple[str, str], list[str]] = defaultdict(list)
    for file, i, row in rows:
        where = f"{file} row {i}"
        loop = row.get("agent_name") or default
        if loop not in loops:
            bad_loops[loop].append(where)
            continue
        kwargs = (row.get("extra_info") or {}).get("interaction_kwargs") or {}
        name = kwargs.get("name") or interaction
        valid = interactions.get(loop)
        if name and valid is not None and name not in valid:
            bad_interactions[(loop, name)].append(where)
    problems = [
        f"{len(at)} sample(s) (first: {at[0]}) use agent loop {loop!r}, which is not registered; "
        f"valid: {choices(loops)} (the agent_name column, --agent-name or default_agent_loop)"
        for loop, at in bad_loops.items()
    ]
    problems += [
        f"{len(at)} sample(s) (first: {at[0]}) ask for interaction {name!r}, which agent loop {loop!r} does not "
        f"define; valid: {choices(interactions[loop])}"
        for (loop, name), at in bad_interactions.items()
    ]
    return problems


def _interactions_by_loop(config: DictConfig) -> dict[str, set[str]]:
    """The interaction names of each LongWorkflowAgent loop (loops whose settings do not load are left out)."""
    from extensions.custom_rollouts import LongWorkflowAgent
    from extensions.interactions.registry import load_interactions
    from extensions.loop_settings import parse_settings
    from extensions.verl_compat import agent_loop_registry

    entries = {**{k: dict(v) for k, v in agent_loop_registry().items()}, **agent_loop_entries(config)}
    found = {}
    for name, entry in entries.items():
        module, _, attr = str(entry.get("_target_", "")).rpartition(".")
        try:
            cls = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError, ValueError):  # reported by check_composed
            continue
        if not (isinstance(cls, type) and issubclass(cls, LongWorkflowAgent)):
            continue
        kwargs = {k: v for k, v in entry.items() if k not in {"_target_", "name"}}
        try:
            settings = parse_settings(kwargs, entry=name)
            path = settings.interaction_config_path
            found[name] = set(load_interactions(path)) if path else set()
        except ConfigError:  # already reported by check_composed
            continue
    return found
