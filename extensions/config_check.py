"""Validate config YAML files at once, before any GPU time is spent; every problem is listed.

    python -m extensions.config_check                      # every YAML of the repo
    python -m extensions.config_check bad.yaml experiments/gsm8k_code_verify   # files or folders
    python -m extensions.config_check experiments/gsm8k_learn/config.yaml +gpus=x4 trainer.nnodes=2   # as the run
    python -m extensions.config_check --help

Exit status: 0 when every file is valid, 1 when any problem was found (or a path does not exist).

Each file is recognised by its shape and checked the way verl would use it:

- agent-loop lists (``- name: …  _target_: …``): the class imports, and the entry's kwargs
  bind to it (``LongWorkflowAgent`` kwargs are fully validated, interaction file included);
- tool files (``tools:``): verl's own ``initialize_tools_from_config`` builds every tool (MCP
  tools start their servers: the servers JSON must be valid and the tools offered);
- interaction files (``interaction:``): every interaction is built;
- experiment configs (``experiments/*/config.yaml``, or any YAML whose ``defaults`` name
  ``ppo_trainer``): Hydra composes them on top of verl's ``ppo_trainer``; then
  ``check_composed`` checks the tool parser, the tool, agent-loop and interaction files they
  point at, the reward function with its ``reward_kwargs``, and that ``algorithm.adv_estimator``
  names a registered advantage estimator, and where the run's pieces go (``placement_check``: the
  rollout replica's GPUs; on several nodes, no tool or user endpoint on a loopback address). The
  rollout driver runs ``check_composed`` on its composed config before any model loads.

Relative paths are looked up in the working directory, then in the pack's checkout.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import inspect
import io
import os
import sys
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf

from extensions.custom_advantages import check_estimator_name
from extensions.engine_rules import attention_problem, composed_stop_string_problems, critic_attention_problem
from extensions.errors import ConfigError, choices
from extensions.placement_check import check_nodes, check_rollout_size
from extensions.segment_weights import check_segment_estimator
from extensions.trainer_mode_check import check_trainer_mode
from extensions.training_signal import max_error_rate

ROOT = Path(__file__).resolve().parents[1]
SKIP_DIRS = {".venv", ".git", "node_modules", "outputs", ".ci", ".github"}
VERL_PROVIDED = {"trainer_config", "server_manager", "tokenizer", "processor", "dataset_cls", "data_config", "tools"}


def repo_yaml_files(root: Path = ROOT) -> list[Path]:
    """The YAML files under ``root``, outside .venv, .git, outputs and CI folders."""
    return sorted(
        p
        for p in root.rglob("*.y*ml")
        if p.suffix in {".yaml", ".yml"} and not (set(p.relative_to(root).parts) & SKIP_DIRS)
    )


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
    from extensions.folding import parse_fold_settings
    from extensions.folding_loop import FoldingWorkflowAgent
    from extensions.interactions.registry import load_interactions
    from extensions.loop_settings import parse_settings

    try:
        if issubclass(cls, FoldingWorkflowAgent):
            kwargs = dict(kwargs)
            parse_fold_settings(kwargs.pop("fold", None), entry=name)
        if issubclass(cls, LongWorkflowAgent):
            settings = parse_settings(kwargs, entry=name)
            if settings.interaction_config_path:
                load_interactions(settings.interaction_config_path)
        else:
            inspect.signature(cls).bind_partial(**{k: None for k in VERL_PROVIDED}, **kwargs)
    except (ConfigError, TypeError) as exc:
        return [f"{at}: {line}" for line in str(exc).splitlines()]
    return []


def check_tools(path: Path) -> list[str]:
    """verl's loader builds every tool (MCP tools start their server to read its tool list)."""
    from verl.tools import tool_registry

    import extensions.plugin  # noqa: F401  (accepts verl <= 0.8's `config.type: mcp` entries)

    cwd = Path.cwd()
    try:
        os.chdir(ROOT)  # relative paths inside tool files (MCP servers JSON) are from the repo root
        with contextlib.redirect_stdout(io.StringIO()):  # BaseTool prints every schema
            tool_registry.initialize_tools_from_config(str(path))
    except Exception as exc:
        message = str(exc).removeprefix(f"{path}: ")  # the loader names the file too (mcp/legacy.py)
        return [f"{path}: tools do not load: {type(exc).__name__}: {message}"]
    finally:
        os.chdir(cwd)
    return []


def check_interactions(path: Path) -> list[str]:
    from extensions.interactions.registry import load_interactions

    try:
        load_interactions(str(path))
    except ConfigError as exc:
        return [str(exc)]
    return []


def check_experiment(path: Path, overrides: tuple[str, ...] = ()) -> list[str]:
    """Compose the experiment config on verl's ppo_trainer (with Hydra ``overrides``, as the run gets them) and
    check it (``check_composed``)."""
    from hydra import compose, initialize_config_dir

    try:
        with initialize_config_dir(config_dir=str(path.parent.resolve()), version_base=None):
            cfg = compose(config_name=path.stem, overrides=list(overrides))
    except Exception as exc:
        given = f" with {' '.join(overrides)}" if overrides else ""
        return [f"{path}: Hydra cannot compose it on verl's ppo_trainer{given}: {type(exc).__name__}: {exc}"]
    return check_composed(cfg, f"{path} ({' '.join(overrides)})" if overrides else str(path))


def check_composed(cfg: DictConfig, where: str, *, training: bool = True) -> list[str]:
    """Every problem of a composed experiment config: parser, tool/agent-loop/interaction files, reward, and
    (``training``) the rollout's GPU count against the trainer's; the rollout driver checks its own servers."""
    rollout = cfg.actor_rollout_ref.rollout
    problems = []
    if rollout.multi_turn.format not in _parser_names():
        problems.append(
            f"{where}: actor_rollout_ref.rollout.multi_turn.format={rollout.multi_turn.format!r} is not a "
            f"registered tool parser; valid: {choices(_parser_names())}"
        )
    for key, value in (
        ("actor_rollout_ref.rollout.multi_turn.tool_config_path", rollout.multi_turn.tool_config_path),
        ("actor_rollout_ref.rollout.agent.agent_loop_config_path", rollout.agent.agent_loop_config_path),
    ):
        if not value:
            continue
        file = resolve(str(value))
        if file is None:
            problems.append(
                f"{where}: {key}={str(value)!r} does not exist (looked in the working directory and {ROOT})"
            )
        else:
            problems += check_file(file, explicit=True)
    names = agent_loop_names(cfg)
    if rollout.agent.default_agent_loop not in names:
        problems.append(
            f"{where}: actor_rollout_ref.rollout.agent.default_agent_loop={rollout.agent.default_agent_loop!r} is "
            f"not a registered agent loop; valid: {choices(names)}"
        )
    try:  # verl itself only fails at the first advantage step, without listing the names
        check_estimator_name(cfg.algorithm.adv_estimator)
        check_segment_estimator(cfg.algorithm, folding=_is_folding(cfg, rollout.agent.default_agent_loop))
        max_error_rate(cfg.algorithm)
    except ConfigError as exc:
        problems.append(f"{where}: {exc}")
    entries = agent_loop_entries(cfg)
    if training:
        problems += check_rollout_size(cfg, where) + check_trainer_mode(cfg, where)
        problems += check_nodes(cfg, where, entries, resolve)
        problems += [p for p in (attention_problem(cfg, where), critic_attention_problem(cfg, where)) if p]
    problems += composed_stop_string_problems(cfg, entries, where, resolve)
    return problems + check_reward(cfg, where) + check_validation_oracles(cfg, where)


def check_validation_oracles(cfg: DictConfig, where: str) -> list[str]:
    """Held-out accuracy never has an oracle in the loop: validation offers no tool that knows the answer.

    A tool class that knows the answer says so (``knows_answer = True``, e.g. ``check_answer``). The
    default loop offers its ``tool_selection``, or every tool of the tool config when it has none.
    """
    trainer = cfg.get("trainer") or {}
    validates = bool(trainer.get("val_before_train")) or int(trainer.get("test_freq") or -1) > 0
    path = cfg.actor_rollout_ref.rollout.multi_turn.tool_config_path
    file = resolve(str(path)) if validates and path else None
    if file is None:
        return []
    try:
        entries = (yaml.safe_load(file.read_text()) or {}).get("tools") or []
    except (yaml.YAMLError, AttributeError):
        return []  # check_tools reports an unreadable tool file
    loop = cfg.actor_rollout_ref.rollout.agent.default_agent_loop
    selection = (agent_loop_entries(cfg).get(loop) or {}).get("tool_selection")
    problems = []
    for entry in entries:
        name = _oracle_tool_name(entry)
        if name is not None and (selection is None or name in selection):
            problems.append(
                f"{where}: validation (trainer.val_before_train / trainer.test_freq) would offer the tool {name!r} "
                f"of {path}, which knows the answer: held-out accuracy must not have an oracle in the loop. Give "
                f"the agent loop {loop!r} a tool_selection without it, or validate with a tool config without it"
            )
    return problems


def _oracle_tool_name(entry: Any) -> str | None:
    """The tool's name if its class knows the answer (``knows_answer``), else None."""
    module, _, attr = str((entry or {}).get("class_name") or "").rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError):
        return None  # check_tools reports it
    if not getattr(cls, "knows_answer", False):
        return None
    return cls(config=dict(entry.get("config") or {}), tool_schema=None).name


def _is_folding(cfg: DictConfig, name: str) -> bool:
    """Whether loop ``name`` (from agent_loop_config_path or the pack's registry) folds its context."""
    from extensions.verl_compat import agent_loop_registry

    entry = agent_loop_entries(cfg).get(name) or agent_loop_registry().get(name) or {}
    return str(entry.get("_target_", "")).endswith("FoldingWorkflowAgent")


def agent_loop_names(cfg: DictConfig) -> set[str]:
    """verl's registered loops, the pack's, and the names in agent_loop_config_path (if it loads)."""
    import extensions.plugin  # noqa: F401  (registers the pack's loops)
    from extensions.verl_compat import agent_loop_registry

    names = set(agent_loop_registry())
    return names | set(agent_loop_entries(cfg))


def agent_loop_entries(cfg: DictConfig) -> dict[str, dict[str, Any]]:
    """The entries of the config's agent_loop_config_path by name ({} if unset or unreadable)."""
    path = cfg.actor_rollout_ref.rollout.agent.agent_loop_config_path
    file = resolve(str(path)) if path else None
    try:
        data = yaml.safe_load(file.read_text()) if file else None
    except yaml.YAMLError:
        return {}
    if not isinstance(data, list):
        return {}
    return {str(e["name"]): e for e in data if isinstance(e, dict) and "name" in e}


def check_reward(cfg: DictConfig, where: str) -> list[str]:
    """The custom reward function loads, and its reward_kwargs bind (the pack's are fully validated)."""
    from verl.utils.import_utils import load_extern_object

    fn_config = cfg.reward.get("custom_reward_function") or {}
    path, name = fn_config.get("path"), fn_config.get("name")
    if not path:
        return []
    key = "reward.custom_reward_function"
    try:
        fn = load_extern_object(module_path=str(path), object_name=str(name))
    except Exception as exc:
        return [f"{where}: {key}: cannot load {name!r} from {path!r}: {type(exc).__name__}: {exc}"]
    kwargs = OmegaConf.to_container(fn_config.get("reward_kwargs") or OmegaConf.create({}), resolve=True)
    if getattr(fn, "__module__", None) == "extensions.custom_rewards":
        from extensions.rewards.settings import parse_reward_kwargs

        try:
            parse_reward_kwargs(kwargs)
        except ConfigError as exc:
            return [f"{where}: {key}.{line}" for line in str(exc).splitlines()]
        return []
    try:
        inspect.signature(fn).bind(data_source=None, solution_str=None, ground_truth=None, extra_info=None, **kwargs)
    except TypeError as exc:
        return [f"{where}: {key}.reward_kwargs do not fit {name}{inspect.signature(fn)}: {exc}"]
    return []


def resolve(path: str) -> Path | None:
    """An existing file: absolute, else relative to the working directory, else to the pack's checkout."""
    candidate = Path(path).expanduser()
    for option in (candidate, Path.cwd() / candidate, ROOT / candidate):
        if option.is_file():
            return option
    return None


def _parser_names() -> set[str]:
    import extensions.plugin  # noqa: F401  (registers the pack's parsers)
    from extensions.verl_compat import tool_parser_registry

    return set(tool_parser_registry())


def _is_experiment(path: Path, data: Any) -> bool:
    if path.parent.parent.name == "experiments" and path.name == "config.yaml":
        return True
    defaults = data.get("defaults") if isinstance(data, dict) else None
    return isinstance(defaults, list) and "ppo_trainer" in defaults


def check_file(path: Path, *, explicit: bool = False, overrides: tuple[str, ...] = ()) -> list[str]:
    """Every problem of one YAML file; ``explicit``: a file of a shape we do not know is a problem too.
    ``overrides``: Hydra overrides for an experiment config."""
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        return [f"{path}: not valid YAML: {exc}"]
    if _is_experiment(path, data):
        return check_experiment(path, overrides)
    if isinstance(data, list) and data and all(isinstance(e, dict) and "_target_" in e for e in data):
        return check_agent_loops(data, str(path))
    if isinstance(data, dict) and "tools" in data:
        return check_tools(path)
    if isinstance(data, dict) and "interaction" in data:
        return check_interactions(path)
    if explicit:
        return [
            f"{path}: not a config this checker knows (an agent-loop list of '- name: … _target_: …', "
            "a tool file with 'tools:', an interaction file with 'interaction:', or an experiment config)"
        ]
    return []


def check_paths(paths: list[Path], overrides: tuple[str, ...] = ()) -> tuple[list[Path], list[str]]:
    """Check files (any shape must be known) and folders (their YAML files); problems de-duplicated.
    ``overrides`` apply to the experiment configs among them."""
    files, problems = [], []
    for path in paths:
        if path.is_dir():
            found = repo_yaml_files(path)
            files += found
            problems += [p for f in found for p in check_file(f, overrides=overrides)]
        elif path.is_file():
            files.append(path)
            problems += check_file(path, explicit=True, overrides=overrides)
        else:
            problems.append(f"{path}: no such file or folder")
    return files, list(dict.fromkeys(problems))


def check_repo(root: Path = ROOT) -> tuple[list[Path], list[str]]:
    return check_paths([root])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m extensions.config_check",
        description="Validate agent-loop, tool, interaction and experiment YAML; list every problem at once.",
        epilog="Exit status: 0 if every file is valid; 1 if any problem was found (or a path does not exist).",
    )
    parser.add_argument(
        "paths",
        nargs="*",
        help="YAML files or folders to check (default: every YAML of the pack's checkout), then any Hydra overrides "
        "(key=value, +key=value) for the experiment configs among them, as the run gets them",
    )
    args = parser.parse_args(argv)
    is_override = [not Path(a).exists() and ("=" in a or a.startswith("~")) for a in args.paths]  # ~key deletes
    overrides = tuple(a for a, o in zip(args.paths, is_override, strict=True) if o)
    paths = [Path(a) for a, o in zip(args.paths, is_override, strict=True) if not o]
    if overrides and not paths:
        parser.error(f"overrides {' '.join(overrides)} need the experiment config they apply to (a file or folder)")
    files, problems = check_paths(paths or [ROOT], overrides)
    for problem in problems:
        print(problem)
    print(f"{len(files)} YAML file(s) checked, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
