"""Dataset preparation: turn raw problems into verl-ready parquet.

- ``gsm8k``: the CLI, ``python -m extensions.data.gsm8k --input ... --output-dir ...``.
- ``prompts``: the system prompt and the tools it describes.
- ``sources``: read rows from .jsonl/.json/.parquet files or a Hugging Face dataset id.
"""
