"""benchmarks/v1_padding.py: verl's real v1 padding of a folding-shaped batch, by mini-batch size."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import v1_padding


def test_rows_are_shaped_as_the_folding_runs() -> None:
    keys, fields, tags = v1_padding.folding_rows(128)
    assert len(keys) == 162 and len({key.rsplit("_", 1)[0] for key in keys}) == 128  # 1.27 segments a trajectory
    assert all(389 <= f["prompts"].numel() <= 790 and 8 <= f["responses"].numel() <= 1248 for f in fields)
    assert sum(f["extra_fields"]["extras"]["segment"] == 0 for f in fields) == 128  # each trajectory's first


def test_verl_pads_to_a_multiple_of_the_mini_batch_rows(tmp_path: Path, capsys) -> None:
    out = tmp_path / "padding.json"
    args = ["--trajectories", "16", "--mini-batch", "4", "1", "--padding-row-tokens", "128", "0", "--repeat", "1"]
    assert v1_padding.main([*args, "--json", str(out)]) == 0
    results = json.loads(out.read_text())
    # 18 rows (16 trajectories, two of them folded once) of 15,993 tokens: to 32 (4 x 8 rows a mini-batch), to
    # 24 (1 x 8); the padding rows of 128 tokens (verl's) or 2 (the pack's default on FSDP)
    assert [(r["mini_batch"], r["padding_row_tokens"], r["rows"], r["padded_rows"]) for r in results] == [
        (4, 128, 18, 32),
        (4, "default", 18, 32),
        (1, 128, 18, 24),
        (1, "default", 18, 24),
    ]
    assert [(r["tokens"], r["padding_tokens"]) for r in results] == [
        (15_993 + 14 * 128, 14 * 128),
        (15_993 + 14 * 2, 14 * 2),
        (15_993 + 6 * 128, 6 * 128),
        (15_993 + 6 * 2, 6 * 2),
    ]
    table = capsys.readouterr().out.splitlines()
    assert table[-4].startswith("| 4 x 8 | 128 | 18 | 32 | 17,785 | 1,792 (10.1%) |")
    assert table[-3].startswith("| 4 x 8 | default | 18 | 32 | 16,021 | 28 (0.2%) |")
    assert table[-1].startswith("| 1 x 8 | default | 18 | 24 | 16,005 | 12 (0.1%) |")


def test_the_whole_batch_is_padded_to_the_ranks_only(tmp_path: Path, capsys) -> None:
    out = tmp_path / "whole.json"
    args = ["--trajectories", "16", "--gpus", "4", "--mini-batch", "4", "--padding-row-tokens", "0", "--repeat", "1"]
    assert v1_padding.main([*args, "--whole-batch", "--json", str(out)]) == 0
    results = json.loads(out.read_text())
    # 64 trajectories (76 rows) on 4 ranks: a mini-batch of 16 x 8 rows pads them to 128; the whole batch needs none
    assert [(r["mini_batch"], r["rows"], r["padded_rows"], r["padding_tokens"]) for r in results] == [
        (16, 76, 128, 52 * 2),
        ("whole batch", 76, 76, 0),
    ]
    assert capsys.readouterr().out.splitlines()[-1].startswith("| whole batch | default | 76 | 76 |")
