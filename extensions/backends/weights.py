"""How ``HFServer`` holds the model's weights on CPU: ``float32`` (default), ``bfloat16`` or ``int8``.

    model = load_model(path, "int8")                        # or weights_setting() to read $LONGFLOW_HF_WEIGHTS
    LONGFLOW_HF_WEIGHTS=int8 bash scripts/main_job.sh        # the rollout driver's hf backend reads the variable

- ``float32``: the converted embedded model's values (dequantized GGUF values are exact in float32), with
  every ``nn.Linear`` weight stored column-major (``column_major_linears``): same values, faster decoding.
- ``bfloat16``: weights and activations in bf16 (needs ``avx512_bf16`` or AMX to be fast; rounds weights).
- ``int8``: torch's dynamic quantization of every ``nn.Linear`` (int8 weights, one scale per output channel,
  activations quantized per batch on the fly); embeddings and norms stay float32. A decode step reads ~4x fewer
  weight bytes. ``torch.ao.quantization`` is deprecated in favour of torchao but still ships with torch 2.13.

Accuracy and speed of each: ``docs/benchmarks/embedded_backend.md`` (``python -m benchmarks.embedded_accuracy``).
float32 stays the default because int8 and bf16 change greedy outputs.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any, Literal

import torch

from extensions.errors import ConfigError

Weights = Literal["float32", "bfloat16", "int8"]
WEIGHTS: tuple[Weights, ...] = ("float32", "bfloat16", "int8")
ENV_VAR = "LONGFLOW_HF_WEIGHTS"


def weights_setting(value: str | None = None) -> Weights:
    """``value``, else ``$LONGFLOW_HF_WEIGHTS``, else ``float32``; a ConfigError names the valid choices."""
    value = value or os.environ.get(ENV_VAR) or "float32"
    if value not in WEIGHTS:
        raise ConfigError(f"{ENV_VAR}={value!r} is not a weights setting; valid: {', '.join(WEIGHTS)}")
    return value  # type: ignore[return-value]


def cpu_flags() -> set[str]:
    """The CPU's feature flags from /proc/cpuinfo (empty where it is not readable)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    line = next((ln for ln in text.splitlines() if ln.startswith("flags")), "")
    return set(line.partition(":")[2].split())


def quantize_int8(model: Any) -> Any:
    """Dynamic int8 quantization (per output channel) of every ``nn.Linear`` of ``model``, in place."""
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    with warnings.catch_warnings():  # torch.ao.quantization's deprecation notices (torchao is its successor)
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        return quantize_dynamic(model, {torch.nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8, inplace=True)


def load_model(path: str | Path, weights: Weights = "float32") -> Any:
    """Load a Hugging Face causal LM directory with ``weights`` (see the module docstring), in eval mode."""
    from transformers import AutoModelForCausalLM

    weights = weights_setting(weights)
    dtype = torch.bfloat16 if weights == "bfloat16" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).eval()
    if weights == "int8":
        return quantize_int8(model)
    return column_major_linears(model) if weights == "float32" else model


def column_major_linears(model: Any) -> Any:
    """Store every ``nn.Linear`` weight column-major (its transpose contiguous), in place; values unchanged.

    ``F.linear(x, W)`` then multiplies by a contiguous ``W.T``, which torch's CPU GEMM runs faster for
    the few rows of a decode step. Embedded model, one thread, quiet 2-core AMD EPYC: a decode step took
    0.089 s instead of 0.114 s at batch 1 (0.183 s instead of 0.199 s at batch 4), a 512-token prefill
    4.18 s instead of 3.80 s, and the main job's rollout 97.1 s instead of 124.8 s, token-identical
    (logprobs within 2e-5; docs/benchmarks/embedded_backend.md).
    """
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            module.weight.data = module.weight.data.t().contiguous().t()
    return model
