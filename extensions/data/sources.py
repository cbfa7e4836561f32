"""Read raw rows from a .jsonl/.json/.parquet file or a Hugging Face dataset id.

``--input`` is a file when it ends in a known suffix or names an existing path; anything
else is taken as a Hugging Face dataset id and loaded with ``datasets.load_dataset``, which
needs network (or a warm cache): offline it fails with a message saying to pass a file.

Without ``--input``, GSM8K comes from ``default_gsm8k_source``: ``$LONGFLOW_GSM8K_DIR/<split>.jsonl``
when that variable names a local copy, else the public ``openai/gsm8k``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from extensions.errors import ConfigError

FILE_SUFFIXES = (".jsonl", ".json", ".parquet")

Rows = list[dict[str, Any]]
GSM8K_DIR_ENV = "LONGFLOW_GSM8K_DIR"
PUBLIC_GSM8K = "openai/gsm8k"


def default_gsm8k_source(split: str) -> str:
    """``$LONGFLOW_GSM8K_DIR/<split>.jsonl`` if that variable is set, else ``openai/gsm8k`` (Hugging Face)."""
    local = os.environ.get(GSM8K_DIR_ENV)
    return str(Path(local).expanduser() / f"{split}.jsonl") if local else PUBLIC_GSM8K


def read_rows(source: str, *, split: str, hf_config: str | None, loader: Callable[..., Any] | None = None) -> Rows:
    """Rows of ``source``; ``split``/``hf_config`` only matter for a Hugging Face id."""
    path = Path(source)
    if path.suffix in FILE_SUFFIXES or path.exists():
        return read_file(path)
    return read_hf(source, split=split, hf_config=hf_config, loader=loader)


def read_file(path: Path) -> Rows:
    """Rows of a local file; the error names the file (and line) and what was expected."""
    if not path.exists():
        raise ConfigError(
            f"--input {path}: no such file; pass a .jsonl, .json or .parquet file, "
            "or a Hugging Face dataset id such as 'openai/gsm8k'"
        )
    if path.is_dir():
        raise ConfigError(f"--input {path}: is a directory; pass a .jsonl, .json or .parquet file")
    if path.suffix == ".jsonl":
        return _read_jsonl(path)
    if path.suffix == ".json":
        return _read_json(path)
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    raise ConfigError(f"--input {path}: unsupported file type {path.suffix!r}; expected .jsonl, .json or .parquet")


def read_hf(dataset_id: str, *, split: str, hf_config: str | None, loader: Callable[..., Any] | None = None) -> Rows:
    """Rows of one split of a Hugging Face dataset; ``loader`` defaults to ``datasets.load_dataset``."""
    if loader is None:
        from datasets import load_dataset as loader
    try:
        dataset = loader(dataset_id, hf_config, split=split)
    except Exception as exc:  # network, auth, missing config/split: all mean "cannot use this id"
        raise ConfigError(
            f"--input {dataset_id!r}: could not load it as a Hugging Face dataset (config {hf_config!r}, "
            f"split {split!r}): {type(exc).__name__}: {exc}. Offline, download the data elsewhere and pass "
            "the .jsonl or .parquet file instead"
        ) from exc
    return [dict(row) for row in dataset]


def _read_jsonl(path: Path) -> Rows:
    rows: Rows = []
    with path.open(encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(
                    f"{path}:{line_number}: not valid JSON ({exc.msg}); "
                    'expected one object per line like {"question": "...", "answer": "... #### 72"}'
                ) from None
            if not isinstance(row, dict):
                raise ConfigError(f"{path}:{line_number}: expected a JSON object, got {type(row).__name__}")
            rows.append(row)
    return rows


def _read_json(path: Path) -> Rows:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, list) or not all(isinstance(row, dict) for row in data):
        raise ConfigError(f"{path}: expected a JSON list of objects; for one object per line use .jsonl")
    return data
