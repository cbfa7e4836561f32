"""scripts/gpu/carry_plan.py: every call's parts fit beside the working tree (a 36M part and a 3.6M remainder in
one call went over 64 MiB with a 26 MiB tree)."""

from __future__ import annotations

from pathlib import Path

from tests.scripts import load_script

MIB = 1024 * 1024


def test_parts_are_packed_under_what_the_working_tree_leaves(tmp_path: Path) -> None:
    cp = load_script("gpu/carry_plan")
    for name, size in (("wheels.tar.part-00", 36 * MIB), ("wheels.tar.part-01", int(3.6 * MIB)),
                       ("MANIFEST.sha256", 4676), ("WHOLE.sha256", 185)):  # fmt: skip
        (tmp_path / name).write_bytes(b"\0" * size)
    cap = cp.call_cap(int(25.95 * MIB))
    assert cap == 64 * MIB - int(25.95 * MIB) - MIB // 2
    calls = cp.make_plan(tmp_path, cap, None, gguf_first=False, install=False)
    assert [[p.name for p in c["files"]] for c in calls] == [
        ["MANIFEST.sha256", "WHOLE.sha256", "wheels.tar.part-00"],
        ["wheels.tar.part-01"],
    ]
    assert all(c["bytes"] + int(25.95 * MIB) <= 64 * MIB for c in calls)
    # the old fixed 60 MiB cap put both parts in one call: 39.6 MiB, over the limit with the tree
    assert len(cp.make_plan(tmp_path, 60 * MIB, None, gguf_first=False, install=False)) == 1
