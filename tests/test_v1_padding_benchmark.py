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
    assert v1_padding.main(["--trajectories", "16", "--mini-batch", "4", "1", "--repeat", "1", "--json", str(out)]) == 0
    results = json.loads(out.read_text())
    # 18 rows (16 trajectories, two of them folded once): to 32 (4 x 8 rows a mini-batch), to 24 (1 x 8)
    assert [(r["mini_batch"], r["rows"], r["padded_rows"]) for r in results] == [(4, 18, 32), (1, 18, 24)]
    table = capsys.readouterr().out.splitlines()
    assert table[-2].startswith("| 4 x 8 | 18 | 32 |") and table[-1].startswith("| 1 x 8 | 18 | 24 |")
