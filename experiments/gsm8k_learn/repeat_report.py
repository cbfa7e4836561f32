"""What ``code_fence.end_after_repeats`` would have done to recorded held-out replies (a code-fence run's dumps).

    python experiments/gsm8k_learn/repeat_report.py RUN_DIR [RUN_DIR ...] [--bounds 1 2 3]

Each ``RUN_DIR`` holds ``val.tar.gz`` (``val/<step>.jsonl``, one row per held-out problem: ``output``, the decoded
response, and ``acc``), as ``scripts/gpu/ab_hold.sh`` writes it. For each dump and bound ``k``, a reply whose ``k``-th
code block was refused as a repeat ("Not run: this exact code already ran above") would have ended right after that
refusal's output block. The table gives how many replies that is, how many of them were right anyway (the accuracy
the bound costs), and the response tokens after the cut (what it saves), out of all the dump's response tokens
(the decoded text encoded again with the offline Qwen tokenizer, ``.[embedded]``), and the replies that ran to the
response budget (``is_response_budget``) before and with the bound: a synchronous step waits for the longest reply,
so while one such reply is left the bound saves tokens but not the step's generation time.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the checkout's extensions/ (also from a worktree)

from extensions.code_fence_loop import REPEATED_MESSAGE  # noqa: E402

_SPEC = importlib.util.spec_from_file_location("val_compare", ROOT / "scripts" / "val_compare.py")
val_compare = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(val_compare)

FENCE = "```"
OUTPUT_FENCE = "```output"
TOOL_RESPONSE = "user\n<tool_response>"  # a tool message in the decoded text (Qwen's template, roles as words)


class Cut(NamedTuple):
    """One dump under one bound."""

    run: str
    step: int
    bound: int
    replies: int
    ended: int
    right_among_ended: int
    tokens: int
    tokens_saved: int
    at_budget: int
    at_budget_left: int


def cut_at(output: str, bound: int) -> int | None:
    """Characters of ``output`` kept when it ends after its ``bound``-th refused repeat; None if it has fewer.

    A refusal inside a turn is an output block: the loop ends after it. A block that ended its turn was refused in
    a tool message (``user\n<tool_response>\nNot run: ...``): the loop ends with the turn, before that message."""
    position = -1
    for _ in range(bound):
        position = output.find(REPEATED_MESSAGE, position + 1)
        if position < 0:
            return None
    tool_message = output.rfind(TOOL_RESPONSE, 0, position)
    if tool_message > output.rfind(OUTPUT_FENCE, 0, position):
        return tool_message
    end = output.find(FENCE, position)
    return len(output) if end < 0 else end + len(FENCE)  # the end of the refusal's output block


def read_dumps(run_dir: Path) -> dict[int, list[dict]]:
    """``{step: rows}`` of ``run_dir``'s validation dumps (``scripts/val_compare.py``'s reader)."""
    dumps = val_compare.load(run_dir)
    if not dumps:
        raise SystemExit(f"{run_dir / 'val.tar.gz'}: no val/<step>.jsonl in it")
    return {step: list(rows.values()) for step, rows in sorted(dumps.items())}


def cuts(run_dir: Path, bounds: list[int], encode) -> list[Cut]:
    """Every dump of ``run_dir`` under every bound."""
    found = []
    for step, rows in read_dumps(run_dir).items():
        lengths = [len(encode(row["output"])) for row in rows]
        for bound in bounds:
            ended = right = saved = left = 0
            for row, length in zip(rows, lengths, strict=True):
                if (kept := cut_at(row["output"], bound)) is not None:
                    ended, right = ended + 1, right + int(row["acc"] > 0)
                    saved += length - len(encode(row["output"][:kept]))
                else:
                    left += int(row["is_response_budget"] > 0)
            budget = sum(int(row["is_response_budget"] > 0) for row in rows)
            found.append(Cut(run_dir.name, step, bound, len(rows), ended, right, sum(lengths), saved, budget, left))
    return found


def table(found: list[Cut]) -> str:
    lines = [
        "| run | step | bound | replies ended | right among them | tokens saved | at the response budget |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in found:
        share = f"{c.tokens_saved:,} of {c.tokens:,} ({100 * c.tokens_saved / c.tokens:.1f} %)"
        budget = f"{c.at_budget} -> {c.at_budget_left}"
        row = f"| {c.run} | {c.step} | {c.bound} | {c.ended} of {c.replies} | {c.right_among_ended} | {share} | {budget} |"
        lines.append(row)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders, each with val.tar.gz")
    parser.add_argument("--bounds", nargs="+", type=int, default=[1, 2, 3], help="values of end_after_repeats")
    args = parser.parse_args(argv)
    if any(bound < 1 for bound in args.bounds):
        parser.error(f"--bounds: end_after_repeats is at least 1, got {args.bounds}")
    from extensions.qwen_tokenizer import build_qwen_tokenizer

    tokenizer = build_qwen_tokenizer()
    print(table([c for run in args.runs for c in cuts(run, args.bounds, tokenizer.encode)]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
