#!/usr/bin/env python3
"""Side-by-side table of the rollout driver's summaries, one column per engine (engines_side_by_side.sh).

    python3 scripts/gpu/engines_table.py outputs/gpu/engines sglang vllm
        -> side_by_side.json and side_by_side.md in that folder (also printed)

Reads RES/ENGINE/{summary.json,rc,driver.log}; an engine with no summary gets the last 25 lines of
its driver.log, so a failure shows its error text.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

KEYS = ["trajectories", "errors", "backend_start_s", "trajectories_per_s", "generated_tokens_per_s", "generated_tokens",
        "wall_s", "accuracy", "mean_assistant_turns", "termination_reasons"]  # fmt: skip


def responses(path: Path) -> dict[int, list[int]]:
    """Sample index -> every response token of the trajectory (earlier segments first); trajectories that
    ended in ``error`` are left out (a failed batch records no tokens, which would compare as identical)."""
    out: dict[int, list[int]] = {}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if r.get("termination_reason") != "error":
            out[r["index"]] = [t for s in r.get("segments", []) for t in s["response_ids"]] + r["response_ids"]
    return out


def agreement(res: Path, engines: list[str]) -> dict[str, Any] | None:
    """Greedy outputs of the first two engines, sample by sample: how many are token-identical, and where the
    others first part (the median index of the first differing response token)."""
    files = [res / e / "trajectories.jsonl" for e in engines[:2]]
    if len(files) < 2 or not all(f.is_file() for f in files):
        return None
    a, b = (responses(f) for f in files)
    common = sorted(set(a) & set(b))
    firsts = []
    for i in common:
        if a[i] != b[i]:
            firsts.append(
                next((k for k, (x, y) in enumerate(zip(a[i], b[i], strict=False)) if x != y), min(len(a[i]), len(b[i])))
            )
    firsts.sort()
    return {"engines": engines[:2], "compared": len(common), "identical": len(common) - len(firsts),
            "median_first_difference": firsts[len(firsts) // 2] if firsts else None}  # fmt: skip


def cell(v: Any) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{a} {b}" for a, b in v.items())
    return "-" if v is None else str(v)


def table(res: Path, engines: list[str]) -> tuple[dict[str, dict[str, Any]], str]:
    rows: dict[str, dict[str, Any]] = {}
    for e in engines:
        d = res / e
        row: dict[str, Any] = {"exit": int((d / "rc").read_text()) if (d / "rc").is_file() else None}
        if (d / "summary.json").is_file():
            s = json.loads((d / "summary.json").read_text())
            row.update({k: s.get(k) for k in KEYS})
        else:  # the engine failed before writing outputs: keep its error text
            log = (d / "driver.log").read_text(errors="replace").splitlines() if (d / "driver.log").is_file() else []
            row["error_tail"] = log[-25:]
        rows[e] = row
    md = ["| metric | " + " | ".join(engines) + " |", "|---" * (len(engines) + 1) + "|"]
    for k in ["exit", *KEYS]:
        md.append(f"| {k} | " + " | ".join(cell(rows[e].get(k)) for e in engines) + " |")
    same = agreement(res, engines)
    if same is not None:
        rows["agreement"] = same
        first = same["median_first_difference"]
        md += ["", f"Greedy agreement ({' vs '.join(same['engines'])}, trajectories that ended in error left out): "
               f"{same['identical']} of {same['compared']} token-identical; median first differing response token "
               f"{'-' if first is None else first}."]  # fmt: skip
    for e in engines:
        if "error_tail" in rows[e]:
            md += ["", f"**{e} failed** (last lines of driver.log):", "```", *rows[e]["error_tail"], "```"]
    return rows, "\n".join(md) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    res, engines = Path(argv[0]), argv[1:]
    rows, md = table(res, engines)
    (res / "side_by_side.json").write_text(json.dumps(rows, indent=2) + "\n")
    (res / "side_by_side.md").write_text(md)
    print(md, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
