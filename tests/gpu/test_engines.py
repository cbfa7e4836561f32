"""One long_workflow trajectory through each installed rollout engine (vLLM, SGLang), on real weights.

On the GPU machine, after scripts/gpu/install_on_gpu.sh (the vLLM stack in /tmp/site, the SGLang
stack in /tmp/site-sglang; they cannot share a site):

    source /tmp/longflow-env.sh && python3 -m pytest -q -m gpu tests/gpu/test_engines.py

Each engine runs the real driver, ``python -m extensions.rollout experiments/gsm8k_code_verify
--backend ENGINE``, in a subprocess with that engine's environment: this interpreter's when it can
import the engine, else the env file install_on_gpu.sh wrote (``$LONGFLOW_VLLM_ENV``, default
/tmp/longflow-env.sh; ``$LONGFLOW_SGLANG_ENV``, default /tmp/longflow-env-sglang.sh). The model is
``$LONGFLOW_MODEL_DIR`` (the converted Qwen2.5-Coder-0.5B-Instruct). Skips without CUDA, without
the model, or without the engine; on CPU ``pytest -m gpu`` reports the skips.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV_FILES = {"vllm": ("LONGFLOW_VLLM_ENV", "/tmp/longflow-env.sh"),
             "sglang": ("LONGFLOW_SGLANG_ENV", "/tmp/longflow-env-sglang.sh")}  # fmt: skip
REASONS = {"final_answer", "interaction_done", "max_assistant_turns", "max_tool_rounds", "max_user_turns",
           "response_budget", "prompt_too_long"}  # fmt: skip
QUESTION = "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether in April and May?"  # noqa: E501

pytestmark = pytest.mark.gpu


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def engine_prefix(engine: str) -> str | None:
    """Shell prefix giving ``engine``'s environment, or None when it is not installed."""
    if importlib.util.find_spec(engine) is not None:
        return ""
    var, default = ENV_FILES[engine]
    env_file = os.environ.get(var, default)
    if not Path(env_file).is_file():
        return None
    probe = subprocess.run(
        ["bash", "-c", f"source {shlex.quote(env_file)} && {shlex.quote(sys.executable)} -c 'import {engine}'"],
        capture_output=True,
        text=True,
    )
    return f"source {shlex.quote(env_file)} && " if probe.returncode == 0 else None


@pytest.fixture(scope="module")
def gsm8k_one(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from extensions.data.gsm8k import main as prepare_main

    tmp = tmp_path_factory.mktemp("engines")
    row = {"question": QUESTION, "answer": "48 / 2 = 24 in May; 48 + 24 = 72\n#### 72"}
    (tmp / "in.jsonl").write_text(json.dumps(row) + "\n")
    args = ["--input", str(tmp / "in.jsonl"), "--output-dir", str(tmp)]
    assert prepare_main([*args, "--agent-name", "long_workflow", "--interaction", "code_verify"]) == 0
    return tmp / "train.parquet"


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_one_long_workflow_trajectory_per_installed_engine(engine: str, gsm8k_one: Path, tmp_path: Path) -> None:
    if not cuda_available():
        pytest.skip("no CUDA GPU")
    model = os.environ.get("LONGFLOW_MODEL_DIR", "")
    if not (Path(model) / "config.json").is_file():
        pytest.skip(f"LONGFLOW_MODEL_DIR={model!r} holds no model (run install_on_gpu.sh's model step)")
    prefix = engine_prefix(engine)
    if prefix is None:
        var, default = ENV_FILES[engine]
        pytest.skip(f"{engine} is not importable here nor through ${var} ({os.environ.get(var, default)})")
    out = tmp_path / engine
    driver = [sys.executable, "-m", "extensions.rollout", "experiments/gsm8k_code_verify", "--backend", engine,
              "--data", str(gsm8k_one), "--limit", "1", "--batch-size", "1", "--out", str(out), "--no-html",
              f"actor_rollout_ref.model.path={model}", "actor_rollout_ref.rollout.gpu_memory_utilization=0.4",
              "actor_rollout_ref.rollout.agent.num_workers=1"]  # fmt: skip
    cmd = prefix + " ".join(shlex.quote(a) for a in driver)
    res = subprocess.run(["bash", "-c", cmd], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, f"{engine}: exit {res.returncode}\n{res.stdout[-4000:]}\n{res.stderr[-8000:]}"
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["backend"], summary["model"], summary["errors"]) == (engine, model, 0)
    (line,) = (out / "trajectories.jsonl").read_text().splitlines()
    record = json.loads(line)
    assert record["agent_name"] == "long_workflow"
    assert record["termination_reason"] in REASONS
    assert len(record["response_ids"]) == len(record["response_mask"]) > 0
    assert sum(record["response_mask"]) > 0  # the engine generated tokens that are trained on
