"""Every YAML of the repo composes, imports and binds; bad files report every problem at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from extensions.config_check import check_file, check_repo, main

ROOT = Path(__file__).resolve().parents[1]


def test_every_yaml_in_the_repo_is_valid():
    files, problems = check_repo()
    assert problems == []
    names = {str(f.relative_to(ROOT)) for f in files}
    assert {
        "extensions/custom_rollouts.yaml",
        "experiments/gsm8k_code_verify/config.yaml",
        "experiments/long_workflow_15/config.yaml",
        "experiments/mcp_units_search/config.yaml",
        "experiments/mcp_units_search/tools.yaml",
        "tool_configs/mcp_verl08.yaml",
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


def test_bad_experiment_reports_every_problem(tmp_path):
    exp = tmp_path / "experiments" / "broken"
    exp.mkdir(parents=True)
    (tmp_path / "loops.yaml").write_text(BAD_LOOPS)
    (exp / "config.yaml").write_text(
        "hydra:\n  searchpath: [pkg://verl.trainer.config]\ndefaults: [ppo_trainer, _self_]\n"
        "algorithm: {adv_estimator: grpo}\n"  # verl's default, gae, trains a critic, which needs flash_attn
        "actor_rollout_ref:\n  model: {override_config: {attn_implementation: sdpa}}\n  rollout:\n    name: vllm\n"
        "    multi_turn: {format: nosuch, tool_config_path: no/tools.yaml}\n"
        f"    agent: {{agent_loop_config_path: {tmp_path / 'loops.yaml'}, default_agent_loop: nosuch_loop}}\n"
        "reward:\n  custom_reward_function:\n    path: pkg://extensions.custom_rewards\n    name: compute_score\n"
        "    reward_kwargs: {w_turns: 0.2, mode: loose}\n"
    )
    config = exp / "config.yaml"
    problems = check_file(config)
    loops = tmp_path / "loops.yaml"
    assert problems[0].startswith(
        f"{config}: actor_rollout_ref.rollout.multi_turn.format='nosuch' is not a registered "
    )
    assert "valid: 'auto', " in problems[0]
    assert problems[1] == (
        f"{config}: actor_rollout_ref.rollout.multi_turn.tool_config_path='no/tools.yaml' does not exist "
        f"(looked in the working directory and {ROOT})"
    )
    assert problems[2] == f"{loops}[0]: {FIFTEEN}"
    assert problems[3].startswith(f"{loops}[0]: agent loop 'long_workflow': unknown key 'max_tool_round'; valid keys: ")
    assert problems[4].startswith(
        f"{config}: actor_rollout_ref.rollout.agent.default_agent_loop='nosuch_loop' is not a registered agent loop; "
        "valid: "
    )
    assert {"'long_workflow'", "'single_turn_agent'", "'tool_agent'"} <= set(
        problems[4].split("valid: ")[1].split(", ")
    )
    assert problems[5].startswith(
        f"{config}: reward.custom_reward_function.reward_kwargs: key 'mode': Input should be 'strict' or 'flexible'"
    )
    assert problems[6].startswith(
        f"{config}: reward.custom_reward_function.reward_kwargs: unknown key 'w_turns'; valid keys: "
    )
    assert len(problems) == 7


BAD_LOOPS = (
    "- name: long_workflow\n  _target_: extensions.custom_rollouts.LongWorkflowAgent\n"
    '  max_assistant_turns: "fifteen"\n  max_tool_round: 3\n'
)
FIFTEEN = "agent loop 'long_workflow': key 'max_assistant_turns': Input should be a valid integer (got 'fifteen')"


def test_cli_checks_the_files_and_folders_given(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD_LOOPS)
    (tmp_path / "notes.yaml").write_text("just: notes\n")
    assert main([str(bad)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{bad}[0]: {FIFTEEN}"
    assert lines[1].startswith(f"{bad}[0]: agent loop 'long_workflow': unknown key 'max_tool_round'")
    assert lines[2:] == ["1 YAML file(s) checked, 2 problem(s)"]

    assert main([str(tmp_path / "notes.yaml"), str(tmp_path / "missing.yaml")]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{tmp_path / 'notes.yaml'}: not a config this checker knows (an agent-loop list of '- name: … _target_: …', "
        "a tool file with 'tools:', an interaction file with 'interaction:', or an experiment config)",
        f"{tmp_path / 'missing.yaml'}: no such file or folder",
        "1 YAML file(s) checked, 2 problem(s)",
    ]

    assert main([str(tmp_path)]) == 1  # a folder: its YAML files, unknown shapes ignored
    assert capsys.readouterr().out.splitlines()[-1] == "2 YAML file(s) checked, 2 problem(s)"

    assert main([str(ROOT / "experiments" / "gsm8k_code_verify")]) == 0
    assert capsys.readouterr().out.splitlines() == ["4 YAML file(s) checked, 0 problem(s)"]


def test_cli_help_names_the_exit_codes(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m extensions.config_check [-h] [paths ...]")
    assert "Exit status: 0 if every file is valid; 1 if any problem was found" in " ".join(out.split())


def test_unknown_advantage_estimator_lists_the_registered_ones(tmp_path):
    from verl.trainer.ppo import core_algos

    from extensions.errors import choices

    exp = tmp_path / "experiments" / "bad_estimator"
    exp.mkdir(parents=True)
    (exp / "config.yaml").write_text(
        "hydra:\n  searchpath: [pkg://verl.trainer.config]\ndefaults: [ppo_trainer, _self_]\n"
        "algorithm: {adv_estimator: turn_gpro}\n"
        "actor_rollout_ref: {model: {override_config: {attn_implementation: sdpa}}}\n"
    )
    problems = check_file(exp / "config.yaml")
    assert problems == [
        f"{exp / 'config.yaml'}: algorithm.adv_estimator='turn_gpro' is not a registered advantage estimator; "
        f"choose one of: {choices(core_algos.ADV_ESTIMATOR_REGISTRY)}"
    ]
    assert "'turn_grpo'" in problems[0] and "'gigpo_turn'" in problems[0]


def test_bad_mcp_tool_file_names_the_file_and_key(tmp_path):
    servers = tmp_path / "servers.json"
    servers.write_text('{"mcpServers": {"s": {"comand": "python"}}}')
    path = tmp_path / "tools.yaml"
    path.write_text(
        "tools:\n  - class_name: extensions.tools.mcp.MCPTool\n"
        f"    config: {{type: native, mcp_servers_config_path: {servers}, tool: t}}\n"
    )
    assert check_file(path) == [
        f"{path}: tools do not load: ConfigError: {servers}: mcpServers.s: unknown key(s) 'comand'; valid keys: "
        "'args', 'command', 'cwd', 'disabled', 'env', 'headers', 'type', 'url'"
    ]


def test_a_validation_that_offers_an_oracle_tool_is_rejected(tmp_path):
    exp = tmp_path / "experiments" / "oracle_val"
    exp.mkdir(parents=True)
    tools = ROOT / "experiments" / "gsm8k_code_verify" / "tools.yaml"  # python_exec, calculator, check_answer
    loops = ROOT / "experiments" / "gsm8k_code_verify" / "agent_loops.yaml"  # long_workflow: no tool_selection
    body = (
        "hydra:\n  searchpath: [pkg://verl.trainer.config]\ndefaults: [ppo_trainer, _self_]\n"
        "algorithm: {adv_estimator: grpo}\n"
        "actor_rollout_ref:\n  model: {override_config: {attn_implementation: sdpa}}\n"
        "  rollout:\n    multi_turn: {tool_config_path: %s}\n"
        "    agent: {default_agent_loop: long_workflow, agent_loop_config_path: %s}\n"
        "trainer: {val_before_train: %s, test_freq: -1}\n"
    )
    (exp / "config.yaml").write_text(body % (tools, loops, "true"))
    assert check_file(exp / "config.yaml") == [
        f"{exp / 'config.yaml'}: validation (trainer.val_before_train / trainer.test_freq) would offer the tool "
        f"'check_answer' of {tools}, which knows the answer: held-out accuracy must not have an oracle in the "
        "loop. Give the agent loop 'long_workflow' a tool_selection without it, or validate with a tool config "
        "without it"
    ]
    (exp / "config.yaml").write_text(body % (tools, loops, "false"))  # no validation: nothing to protect
    assert check_file(exp / "config.yaml") == []
    # the A/B experiment validates with python_exec only
    assert check_file(ROOT / "experiments" / "gsm8k_learn" / "config.yaml") == []
