"""Fixtures for the backend tests: a tiny random Qwen2 model directory with the real offline tokenizer."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from extensions.qwen_tokenizer import TINY_QWEN2_CONFIG, write_qwen_model_dir

TINY_CONFIG = {
    **TINY_QWEN2_CONFIG,
    "num_hidden_layers": 2,
    "max_position_embeddings": 1024,
    "pad_token_id": 151643,
    "initializer_range": 0.2,  # larger than the default 0.02 so greedy choices are not near-ties
}


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory, qwen_dir: Path) -> Path:
    """hidden 64, 2 layers, vocab 151936, seeded random weights, saved with the offline Qwen tokenizer."""
    out = tmp_path_factory.mktemp("tiny-qwen2")
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        if (qwen_dir / name).is_file():
            shutil.copy(qwen_dir / name, out / name)
    write_qwen_model_dir(out, TINY_CONFIG)
    torch.manual_seed(0)
    Qwen2ForCausalLM(Qwen2Config(**TINY_CONFIG)).save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def tiny_model(tiny_model_dir: Path) -> Any:
    return Qwen2ForCausalLM.from_pretrained(tiny_model_dir).eval()


@pytest.fixture
def run_slow(request: pytest.FixtureRequest) -> None:
    """Skip real-model tests unless asked for: ``pytest -m slow tests/backends`` or ``LONGFLOW_SLOW=1``."""
    if request.config.getoption("markexpr") != "slow" and os.environ.get("LONGFLOW_SLOW") != "1":
        pytest.skip("loads the real embedded model (minutes on 2 cores): run `pytest -m slow` or set LONGFLOW_SLOW=1")
