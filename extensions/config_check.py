"""Validate every YAML file of the repo at once, before any GPU time is spent.

    python -m extensions.config_check            # exit 1 and list every problem, else "N files OK"

Each file is recognised by its shape and checked the way verl would use it:

- agent-loop lists (``- name: …  _target_: …``): the class imports, and the entry's kwargs
  bind to it (``LongWorkflowAgent`` kwargs are fully validated, interaction file included);
- tool files (``tools:``): verl's own ``initialize_tools_from_config`` builds every tool;
- interaction files (``interaction:``): every interaction is built;
- experiment configs (``experiments/*/config.yaml``): Hydra composes them on top of verl's
  ``ppo_trainer`` and every file they point at exists and is itself valid.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import io
import sys
from pathlib import Path
from typing import Any

import yaml

from extensions.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
SKIP_DIRS = {".venv", ".git", "node_modules", "outputs", ".ci", ".github"}
VERL_PROVIDED = {"trainer_config", "server_manager", "tokenizer", "processor", "dataset_cls", "data_config", "tools"}


def repo_yaml_files(root: Path = ROOT) -> list[Path]:
    return sorted(p for p in root.rglob("*.y*ml") if p.suffix in {".yaml", ".yml"} and not (set(p.parts) & SKIP_DIRS))


def check_agent_loops(entries: list[Any], where: str) -> list[str]:
    problems = []
    for i, entry in enumerate(entries):
        at = f"{where}[{i}]"
        if not isinstance(entry, dict) or "name" not in entry or "_target_" not in entry:
            problems.append(f"{at}: an agent loop entry needs 'name' and '_target_'")
            continue
        module, _, attr = str(entry["_target_"]).rpartition(".")
        try:
            cls = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            problems.append(f"{at}._target_: cannot import {entry['_target_']!r}: {exc}")
            continue
        kwargs = {k: v for k, v in entry.items() if k not in {"_target_", "name"}}
        problems += _check_loop_kwargs(cls, entry["name"], kwargs, at)
    return problems


def _check_loop_kwargs(cls: type, name: str, kwargs: dict[str, Any], at: str) -> list[str]:
    from extensions.custom_rollouts import LongWorkflowAgent
    from extensions.interactions.registry import load_interactions
    from extensions.loop_settings import parse_settings

    try:
        if issubclass(cls, LongWorkflowAgent):
            settings = parse_settings(kwargs, entry=name)
            if settings.interaction_config_path:
                load_interactions(settings.interaction_config_path)
        else:
            inspect.signature(cls).bind_partial(**{k: None for k in VERL_PROVIDED}, **kwargs)
    except (ConfigError, TypeError) as exc:
        return [f"{at}: {exc}"]
    return []


def check_tools(path: Path) -> list[str]:
    from verl.tools.tool_registry import initialize_tools_from_config

    try:
        with contextlib.redirect_stdout(io.StringIO()):  # BaseTool prints every schema
            initialize_tools_from_config(str(path))
    except Exception as exc:
        return [f"{path}: tools do not load: {type(exc).__name__}: {exc}"]
    return []


def check_interactions(path: Path) -> list[str]:
    from extensions.interactions.registry import load_interactions

    try:
        load_interactions(str(path))
    except ConfigError as exc:
        return [str(exc)]
    return []


def check_experiment(path: Path) -> list[str]:
    from hydra import compose, initialize_config_dir

    try:
        with initialize_config_dir(config_dir=str(path.parent), version_base=None):
            cfg = compose(config_name=path.stem)
    except Exception as exc:
        return [f"{path}: Hydra cannot compose it on verl's ppo_trainer: {type(exc).__name__}: {exc}"]
    rollout = cfg.actor_rollout_ref.rollout
    pointed = {
        "actor_rollout_ref.rollout.multi_turn.tool_config_path": rollout.multi_turn.tool_config_path,
        "actor_rollout_ref.rollout.agent.agent_loop_config_path": rollout.agent.agent_loop_config_path,
        "reward.custom_reward_function.path": cfg.reward.custom_reward_function.path,
    }
    problems = [
        f"{path}: {key}={value!r} does not exist (paths are relative to the repo root)"
        for key, value in pointed.items()
        if value and not _exists(str(value))
    ]
    if cfg.actor_rollout_ref.rollout.multi_turn.format not in _parser_names():
        problems.append(f"{path}: multi_turn.format={rollout.multi_turn.format!r} is not a registered tool parser")
    return problems


def _exists(path: str) -> bool:
    """A repo-relative file, or a ``pkg://`` module that imports."""
    if path.startswith("pkg://"):
        return importlib.util.find_spec(path[len("pkg://") :].replace("/", ".")) is not None
    return (ROOT / path).is_file()


def _parser_names() -> set[str]:
    from verl.experimental.agent_loop.tool_parser import ToolParser

    import extensions.plugin  # noqa: F401  (registers the pack's parsers)

    return set(ToolParser._registry)


def check_file(path: Path) -> list[str]:
    """Every problem of one YAML file ('' list if fine or not a config we know)."""
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        return [f"{path}: not valid YAML: {exc}"]
    if path.parent.parent.name == "experiments" and path.name == "config.yaml":
        return check_experiment(path)
    if isinstance(data, list) and data and all(isinstance(e, dict) and "_target_" in e for e in data):
        return check_agent_loops(data, str(path))
    if isinstance(data, dict) and "tools" in data:
        return check_tools(path)
    if isinstance(data, dict) and "interaction" in data:
        return check_interactions(path)
    return []


def check_repo(root: Path = ROOT) -> tuple[list[Path], list[str]]:
    files = repo_yaml_files(root)
    return files, [problem for f in files for problem in check_file(f)]


def main() -> int:
    files, problems = check_repo()
    for problem in problems:
        print(problem)
    print(f"{len(files)} YAML files checked, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
