"""Where GSM8K comes from without ``--input``: ``$LONGFLOW_GSM8K_DIR/<split>.jsonl``, else the public
``openai/gsm8k``; and no path of our build machines is left in the product."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from extensions.data.gsm8k import main, prepare
from extensions.data.sources import GSM8K_DIR_ENV, default_gsm8k_source

ROOT = Path(__file__).resolve().parents[2]
# Where a local path of ours may appear: CI setting LONGFLOW_GSM8K_DIR, and logs/figures recorded as they were.
ALLOWED = ("scripts/test.sh", ".ci/run", "docs/results/")
RECORDED = ("docs/benchmarks/", (".json", ".txt", ".log"))  # benchmark outputs: the arguments they ran with, raw logs


def test_default_source_is_the_env_dir_else_the_public_dataset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(GSM8K_DIR_ENV, raising=False)
    assert default_gsm8k_source("train") == "openai/gsm8k"
    monkeypatch.setenv(GSM8K_DIR_ENV, "/data/gsm8k")
    assert default_gsm8k_source("test") == "/data/gsm8k/test.jsonl"


def test_prepare_without_input_reads_the_public_dataset(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(GSM8K_DIR_ENV, raising=False)
    asked = []

    def load_dataset(dataset_id: str, config: str, *, split: str) -> list[dict[str, Any]]:  # stands in for the hub
        asked.append((dataset_id, config, split))
        return [{"question": "What is 2 + 3?", "answer": "2 + 3 = 5\n#### 5"}]

    written = prepare(default_gsm8k_source("train"), tmp_path, loader=load_dataset)
    assert asked == [("openai/gsm8k", "main", "train")]
    assert pq.read_table(written["train"]).column("reward_model").to_pylist() == [
        {"ground_truth": "5", "style": "rule"}
    ]


def test_main_without_input_reads_longflow_gsm8k_dir(tmp_path: Path) -> None:
    local = os.environ.get(GSM8K_DIR_ENV)
    if not local:
        pytest.skip(f"set {GSM8K_DIR_ENV} to a folder with GSM8K's test.jsonl")
    assert main(["--split", "test", "--limit", "3", "--output-dir", str(tmp_path)]) == 0
    with (Path(local) / "test.jsonl").open() as f:
        questions = [json.loads(next(f))["question"] for _ in range(3)]
    extra = pq.read_table(tmp_path / "test.parquet").column("extra_info").to_pylist()
    assert [e["question"] for e in extra] == questions


def test_no_path_of_our_machines_in_the_product() -> None:
    try:
        tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    found = []
    for name in tracked.splitlines():
        path = ROOT / name
        recorded = name.startswith(RECORDED[0]) and name.endswith(RECORDED[1])
        if name.startswith(ALLOWED) or recorded or name == "tests/data/test_gsm8k_defaults.py" or not path.is_file():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        found += [
            f"{name}:{n}" for n, line in enumerate(text.splitlines(), 1) if "/work/" in line or "../shared" in line
        ]
    assert found == []
