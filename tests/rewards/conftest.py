"""Fixtures for the reward tests: the real Qwen2.5 tokenizer (offline), loaded once per session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def qwen_tokenizer(qwen_dir: Path) -> Any:
    """Qwen2.5's tokenizer from the session's offline model dir (``qwen_dir``, tests/conftest.py)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(qwen_dir)
