"""Weight settings of the hf backend: float32 / bfloat16 / int8 loading, the env var, errors.

.venv/bin/python -m pytest tests/backends/test_weights.py -q
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from extensions.backends.hf_server import HFServer
from extensions.backends.weights import ENV_VAR, load_model, weights_setting
from extensions.errors import ConfigError

PROMPT = list(range(1000, 1040, 2))


def test_weights_setting_reads_the_env_var_and_names_the_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert weights_setting() == "float32"
    monkeypatch.setenv(ENV_VAR, "int8")
    assert weights_setting() == "int8"
    assert weights_setting("bfloat16") == "bfloat16"
    with pytest.raises(
        ConfigError, match=r"LONGFLOW_HF_WEIGHTS='fp8' is not a weights setting; valid: float32, bfloat16, int8"
    ):
        weights_setting("fp8")


def test_int8_quantizes_every_linear_and_keeps_embeddings(tiny_model_dir: Path) -> None:
    model = load_model(tiny_model_dir, "int8")
    from torch.ao.nn.quantized.dynamic import Linear as DynamicInt8Linear

    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear | DynamicInt8Linear)]
    assert len(linears) == 7 * 2 + 1  # q, k, v, o, gate, up, down per layer; lm_head
    assert all(type(m) is DynamicInt8Linear and m.weight().dtype == torch.qint8 for m in linears)
    assert model.model.embed_tokens.weight.dtype == torch.float32
    assert load_model(tiny_model_dir, "bfloat16").dtype == torch.bfloat16


@pytest.mark.parametrize("weights", ["int8", "bfloat16"])
async def test_server_runs_cheaper_weights_close_to_float32(
    tiny_model_dir: Path, tiny_model: Any, weights: str
) -> None:
    params = {"temperature": 0, "max_tokens": 6, "logprobs": True}
    servers = [HFServer.from_pretrained(tiny_model_dir, weights=w, num_threads=1) for w in ("float32", weights)]
    try:
        ref, cheap = [await s.generate("r", prompt_ids=PROMPT, sampling_params=params) for s in servers]
    finally:
        for s in servers:
            s.close()
    assert len(cheap.token_ids) == 6
    assert cheap.token_ids[0] == ref.token_ids[0]  # the first greedy choice survives the rounding on this model


async def test_float32_linears_are_column_major_with_the_same_greedy_output(tiny_model_dir: Path) -> None:
    from transformers import AutoModelForCausalLM

    model = load_model(tiny_model_dir, "float32")
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert len(linears) == 7 * 2 + 1
    assert all(m.weight.t().is_contiguous() and not m.weight.is_contiguous() for m in linears)
    row_major = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    assert all(
        torch.equal(a.weight, b.weight)
        for a, b in zip(linears, (m for m in row_major.modules() if isinstance(m, torch.nn.Linear)), strict=True)
    )
    params = {"temperature": 0, "max_tokens": 8, "logprobs": True}
    servers = [HFServer(m, num_threads=1) for m in (model, row_major)]
    try:
        ours, ref = [await s.generate("r", prompt_ids=PROMPT, sampling_params=params) for s in servers]
    finally:
        for s in servers:
            s.close()
    assert ours.token_ids == ref.token_ids
    assert max(abs(a - b) for a, b in zip(ours.log_probs, ref.log_probs, strict=True)) < 1e-4
