"""``--backend vllm|sglang``: the backend's name becomes verl's ``actor_rollout_ref.rollout.name`` (so
verl builds its vLLMReplica or SGLangReplica, as the trainer does), and a missing engine stops the
driver with exit 2 and the install recipe before Ray or any model starts.

CPU only: neither vllm nor sglang is installed here, which is exactly the missing-engine case.
    PYTHONPATH=$PWD .venv/bin/python -m pytest -q tests/rollout/test_engine_backends.py
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from extensions.data.gsm8k import main as prepare_main
from extensions.rollout import backends, cli
from extensions.verl_compat import rollout_replica_registry
from tests.conftest import EXPERIMENTS

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENT = str(ROOT / "experiments" / "gsm8k_code_verify")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("engines")
    (tmp / "in.jsonl").write_text(json.dumps({"question": "What is 3 + 4?", "answer": "3 + 4 = 7\n#### 7"}) + "\n")
    assert (
        prepare_main(["--input", str(tmp / "in.jsonl"), "--output-dir", str(tmp), "--interaction", "code_verify"]) == 0
    )
    return tmp / "train.parquet"


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_a_missing_engine_exits_2_naming_the_install_recipe_before_ray_starts(
    engine: str,
    data: Path,
    tmp_path: Path,
    qwen_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if importlib.util.find_spec(engine) is not None:
        pytest.skip(f"{engine} is installed here")
    import ray

    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("LONGFLOW_MODEL_PATH", str(qwen_dir))
    out = tmp_path / "out"
    argv = [EXPERIMENT, "--backend", engine, "--data", str(data), "--limit", "1", "--out", str(out)]
    assert cli.main(argv) == cli.EXIT_INVALID
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == (
        f"error: --backend {engine}: the {engine!r} package is not installed in this Python "
        f"({backends.sys.executable}). Install it with: {backends.ENGINE_INSTALL[engine]}; "
        "or choose another backend: hf, vllm, sglang"
    )
    assert not ray.is_initialized()
    assert not out.exists()


def test_the_drivers_checks_see_the_engine_it_will_start(
    tmp_path: Path, qwen_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A code-fence experiment with rollout.name=sglang is refused by check_composed (skip_tokenizer_init=true),
    but --backend sglang sets skip_tokenizer_init=false before the checks: here it gets as far as the engine."""
    if importlib.util.find_spec("sglang") is not None:
        pytest.skip("sglang is installed here")
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("LONGFLOW_MODEL_PATH", str(qwen_dir))
    learn = str(ROOT / "experiments" / "gsm8k_learn")
    (tmp_path / "in.jsonl").write_text(json.dumps({"question": "What is 3 + 4?", "answer": "#### 7"}) + "\n")
    fence = ["--tools", "python_exec", "--tool-format", "code_fence"]  # as experiments/gsm8k_learn/prepare_data.sh
    assert prepare_main(["--input", str(tmp_path / "in.jsonl"), "--output-dir", str(tmp_path), *fence]) == 0
    data = tmp_path / "train.parquet"
    argv = [learn, "--backend", "sglang", "--data", str(data), "--limit", "1", "--out", str(tmp_path / "out")]
    assert cli.main([*argv, "actor_rollout_ref.rollout.name=sglang"]) == cli.EXIT_INVALID
    err = capsys.readouterr().err
    assert "skip_tokenizer_init" not in err, err  # the preflight passed
    assert err.splitlines()[-1].startswith("error: --backend sglang: the 'sglang' package is not installed"), err


def test_the_sglang_recipe_names_the_override_file_that_exists() -> None:
    recipe = backends.ENGINE_INSTALL["sglang"]
    assert "--override scripts/gpu/overrides-sglang.txt" in recipe
    assert (ROOT / "scripts/gpu/overrides-sglang.txt").read_text().split("\n")[-2] == "transformers==5.9.0"


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_set_engine_points_verl_rollout_at_the_engine_with_real_weights(engine: str) -> None:
    config, _ = cli.compose_experiment(EXPERIMENT, ["actor_rollout_ref.rollout.nnodes=0"])
    assert config.actor_rollout_ref.rollout.name == "vllm"  # the experiment's own choice
    backends.set_engine(config, engine)
    rollout = config.actor_rollout_ref.rollout
    assert (rollout.name, rollout.load_format, rollout.nnodes) == (engine, "auto", 1)
    # SGLang gets its tokenizer: code fences and the policy user send stop strings (extensions/engine_rules.py)
    assert rollout.skip_tokenizer_init is (engine != "sglang")
    assert engine in rollout_replica_registry()  # verl builds SGLangReplica / vLLMReplica from it


def test_unknown_backend_names_the_choices() -> None:
    config, _ = cli.compose_experiment(EXPERIMENT, [])
    with pytest.raises(ValueError, match=r"^unknown backend 'trt'; choose one of hf, vllm, sglang, demo$"):
        backends.make_backend("trt", config)


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_starts_one_server_replica_on_one_gpu(experiment: str) -> None:
    """verl's default tensor_model_parallel_size is 2: an experiment that keeps it starts no server on one GPU
    (the paged ledger did, on an H100: every sample failed with 'No available servers in load balancer')."""
    config, _ = cli.compose_experiment(str(ROOT / "experiments" / experiment), [])
    backends.set_engine(config, "vllm")
    assert backends.check_server_replicas(config) == 1


def test_a_config_that_would_start_no_server_is_refused_naming_the_keys() -> None:
    config, _ = cli.compose_experiment(EXPERIMENT, ["actor_rollout_ref.rollout.tensor_model_parallel_size=2"])
    backends.set_engine(config, "vllm")
    with pytest.raises(backends.ConfigError) as err:
        backends.check_server_replicas(config)
    assert str(err.value) == (
        "actor_rollout_ref.rollout: one server replica needs tensor_model_parallel_size 2 x data_parallel_size 1 x "
        "pipeline_model_parallel_size 1 = 2 GPUs, but n_gpus_per_node 1 x nnodes 1 = 1; no server would start. "
        "Lower these sizes so that their product is at most 1 (on one GPU: all 1), or run on 2 GPUs"
    )
