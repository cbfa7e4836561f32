"""Fixtures for the data tests: hand-written GSM8K rows and a real Qwen2.5 tokenizer built offline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def qwen_tokenizer(qwen_dir: Path) -> Any:
    """Qwen2.5's tokenizer from the session's offline model dir (``qwen_dir``, tests/conftest.py)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(qwen_dir)


# Hand-written problems in GSM8K's row format (not taken from the dataset).
PROBLEMS = [
    {
        "question": "A baker fills 6 trays with 12 muffins each. How many muffins does she bake?",
        "answer": "6 trays * 12 = <<6*12=72>>72 muffins.\n#### 72",
    },
    {
        "question": "Tom has $1,250 and spends $250 on a bike. How many dollars are left?",
        "answer": "1,250 - 250 = <<1250-250=1000>>1000\n#### 1,000",
    },
    {
        "question": "A 7.5 m rope is cut into 3 equal pieces. How long is each piece, in meters?",
        "answer": "7.5 / 3 = <<7.5/3=2.5>>2.5\n#### 2.50",
    },
]


@pytest.fixture
def problems() -> list[dict[str, str]]:
    """Three hand-written GSM8K-style rows; ground truths 72, 1000 and 2.5."""
    return [dict(row) for row in PROBLEMS]


@pytest.fixture
def problems_jsonl(tmp_path: Path, problems: list[dict[str, str]]) -> str:
    """The three hand-written problems as a .jsonl file."""
    path = tmp_path / "problems.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in problems))
    return str(path)
