"""extensions/placement_check.py through ``python -m extensions.config_check`` with the run's overrides: on several
nodes, a tool or user endpoint on a loopback address is a problem before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from extensions import config_check
from extensions.placement_check import check_rollout_size, loopback_endpoints, node_span

ASK_USER = "experiments/gsm8k_ask_user/config.yaml"
OPENAI_LOOPS = (
    "actor_rollout_ref.rollout.agent.agent_loop_config_path=experiments/gsm8k_ask_user/agent_loops_openai.yaml"
)


def test_a_loopback_user_model_on_two_nodes_is_named_by_file_and_key(capsys: pytest.CaptureFixture[str]):
    assert config_check.main([ASK_USER, "trainer.nnodes=2", OPENAI_LOOPS]) == 1
    problem, summary = capsys.readouterr().out.splitlines()
    assert problem == (
        f"{ASK_USER} (trainer.nnodes=2 {OPENAI_LOOPS}): experiments/gsm8k_ask_user/interactions_openai.yaml: "
        "interaction[0].config.openai.base_url='http://127.0.0.1:8001/v1' is a loopback address, but trainer.nnodes=2 "
        "puts agent-loop workers on other nodes, which cannot reach it; give an address every node can reach (this "
        "host's name or IP)"
    )
    assert summary == "1 YAML file(s) checked, 1 problem(s)"


def test_on_one_node_the_same_config_passes(capsys: pytest.CaptureFixture[str]):
    assert config_check.main([ASK_USER, OPENAI_LOOPS]) == 0
    assert capsys.readouterr().out == "1 YAML file(s) checked, 0 problem(s)\n"


def test_overrides_need_a_config_and_must_compose(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit):
        config_check.main(["trainer.nnodes=2"])
    assert "overrides trainer.nnodes=2 need the experiment config they apply to (a file or folder)" in (
        capsys.readouterr().err
    )
    assert config_check.main([ASK_USER, "trainer.nodes=2"]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"{ASK_USER}: Hydra cannot compose it on verl's ppo_trainer with trainer.nodes=2: ")
    assert "Could not override 'trainer.nodes'" in out


def test_separate_async_rollout_nodes_count_too():
    def cfg(mode: str, trainer_nodes: int, rollout_nodes: int):
        return OmegaConf.create(
            {
                "trainer": {"nnodes": trainer_nodes, "v1": {"trainer_mode": mode}},
                "actor_rollout_ref": {"rollout": {"nnodes": rollout_nodes}},
            }
        )

    assert node_span(cfg("sync", 1, 1)) is None and node_span(cfg("sync", 1, 2)) is None  # sync: rollout colocated
    assert node_span(cfg("separate_async", 1, 2)) == "actor_rollout_ref.rollout.nnodes=2 (separate_async)"
    assert node_span(cfg("colocate_async", 4, 1)) == "trainer.nnodes=4"


def test_mcp_servers_files_are_read_and_only_loopback_hosts_count(tmp_path: Path):
    servers = tmp_path / "servers.json"
    servers.write_text(
        '{"mcpServers": {"a": {"url": "http://localhost:8765/mcp"}, "b": {"url": "http://10.0.0.5:8765/mcp"},'
        ' "c": {"url": "https://[::1]/mcp"}, "d": {"url": "http://0.0.0.0:9/mcp"}, "e": {"command": "python"},'
        ' "f": {"url": "grpc://localhost.:50051"}, "g": {"url": "http://[::ffff:127.0.0.1]:80/"},'
        ' "h": {"url": "http://[::1/mcp"}, "i": {"url": "http://127.0.0.1:1/", "disabled": true}}}'
    )
    tools = tmp_path / "tools.yaml"
    tools.write_text(
        "tools:\n"
        "  - class_name: x.Y\n"
        f"    config: {{mcp_servers_config_path: {servers}, note: 'served on 127.0.0.1:8000', url: 'http://127.0.0.2:1/'}}\n"
    )
    found = list(loopback_endpoints(tools, lambda p: Path(p) if Path(p).is_file() else None))
    assert found == [
        (servers, "mcpServers.a.url", "http://localhost:8765/mcp"),
        (servers, "mcpServers.c.url", "https://[::1]/mcp"),
        (servers, "mcpServers.d.url", "http://0.0.0.0:9/mcp"),
        (servers, "mcpServers.f.url", "grpc://localhost.:50051"),
        (servers, "mcpServers.g.url", "http://[::ffff:127.0.0.1]:80/"),
        (tools, "tools[0].config.url", "http://127.0.0.2:1/"),
    ]


def test_a_path_with_an_equals_sign_is_a_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    odd = tmp_path / "lr=1e-6" / "notes.yaml"
    odd.parent.mkdir()
    odd.write_text("a: 1\n")
    assert config_check.main([str(odd)]) == 1
    assert capsys.readouterr().out.startswith(f"{odd}: not a config this checker knows")


def test_separate_async_replicas_are_sized_against_the_rollout_gpus():
    cfg = OmegaConf.create(
        {
            "trainer": {"nnodes": 1, "n_gpus_per_node": 2, "v1": {"trainer_mode": "separate_async"}},
            "actor_rollout_ref": {"rollout": {"nnodes": 1, "n_gpus_per_node": 3, "tensor_model_parallel_size": 2}},
        }
    )
    assert check_rollout_size(cfg, "x") == [
        "x: one rollout replica needs actor_rollout_ref.rollout.tensor_model_parallel_size=2 x "
        "actor_rollout_ref.rollout.data_parallel_size=1 x actor_rollout_ref.rollout.pipeline_model_parallel_size=1 = 2 "
        "GPUs, which does not divide actor_rollout_ref.rollout.n_gpus_per_node x actor_rollout_ref.rollout.nnodes = 3; "
        "set actor_rollout_ref.rollout.tensor_model_parallel_size=1 on one GPU"
    ]
    cfg.trainer.v1.trainer_mode = "sync"  # colocated: the trainer's 2 GPUs hold one replica
    assert check_rollout_size(cfg, "x") == []
