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

KEYS = ["trajectories", "errors", "trajectories_per_s", "generated_tokens_per_s", "generated_tokens", "wall_s",
        "accuracy", "mean_assistant_turns", "termination_reasons"]  # fmt: skip


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
