"""Every YAML of the repo composes, imports and binds; bad files report every problem at once."""

from __future__ import annotations

from pathlib import Path

from extensions.config_check import check_file, check_repo

ROOT = Path(__file__).resolve().parents[1]


def test_every_yaml_in_the_repo_is_valid():
    files, problems = check_repo()
    assert problems == []
    names = {str(f.relative_to(ROOT)) for f in files}
    assert {
        "extensions/custom_rollouts.yaml",
        "experiments/gsm8k_code_verify/config.yaml",
        "experiments/long_workflow_15/config.yaml",
        "interaction_configs/default.yaml",
    } <= names


def test_bad_agent_loop_file_reports_every_problem(tmp_path):
    path = tmp_path / "loops.yaml"
    path.write_text(
        "- name: a\n  _target_: extensions.custom_rollouts.LongWorkflowAgent\n  max_turns: 3\n"
        "- name: b\n  _target_: extensions.nowhere.Loop\n"
        "- name: c\n  _target_: verl.experimental.agent_loop.tool_agent_loop.ToolAgentLoop\n"
        "- name: d\n  _target_: extensions.custom_rollouts.LongWorkflowAgent\n  interaction_config_path: nope.yaml\n"
    )
    problems = check_file(path)
    assert len(problems) == 3
    assert problems[0].startswith(f"{path}[0]: agent loop 'a': unknown key 'max_turns'; valid keys: ")
    assert problems[1].startswith(f"{path}[1]._target_: cannot import 'extensions.nowhere.Loop'")
    assert problems[2].startswith(f"{path}[3]: interaction config 'nope.yaml' not found")


def test_bad_experiment_reports_missing_files(tmp_path):
    exp = tmp_path / "experiments" / "broken"
    exp.mkdir(parents=True)
    (exp / "config.yaml").write_text(
        "hydra:\n  searchpath: [pkg://verl.trainer.config]\ndefaults: [ppo_trainer, _self_]\n"
        "actor_rollout_ref:\n  rollout:\n    name: vllm\n    multi_turn: {format: nosuch, tool_config_path: no/tools.yaml}\n"
    )
    problems = check_file(exp / "config.yaml")
    assert problems == [
        f"{exp / 'config.yaml'}: actor_rollout_ref.rollout.multi_turn.tool_config_path='no/tools.yaml' does not exist "
        "(paths are relative to the repo root)",
        f"{exp / 'config.yaml'}: multi_turn.format='nosuch' is not a registered tool parser",
    ]
