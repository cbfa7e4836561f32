"""What does the model do across one fold of a flagged ledger, and does the summary's opening change it?

    python experiments/ledger_folding/analysis/ledger_fold_probe.py --count 8     # the loop's own prefix
    python experiments/ledger_folding/analysis/ledger_fold_probe.py --count 8 --prefix $'<summary>\nPages read so far: 1 to'

The folding loop's step, greedy, on the embedded CPU model: the ReAct conversation of a flagged 30-page ledger
(``LEDGER_QUESTION=flagged``) up to page ``--read`` (the flag is later), then the fold request of
``experiments/ledger_folding/agent_loops.yaml``'s ``folding_flagged`` with its reply opened by ``--prefix`` (default:
that entry's ``summary_prefix``), then the next segment's prompt as the loop builds it (the task, the summary, the
last page). Prints the summary, whether it closed its tag, and what the first turn after the fold does: read the
next page (``next``), the same page again (``same``), another page, submit an answer, or something else. On the
H200 the loop's own prefix gave 0 closed summaries in 369, and 228 of 238 reads after a fold asked for the same
page again (docs/results/ledger-flagged-h200).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections import Counter
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
LOOPS = ROOT / "experiments" / "ledger_folding" / "agent_loops.yaml"


def loop_fold_settings(name: str = "folding_flagged") -> dict:
    entry = next(e for e in yaml.safe_load(LOOPS.read_text()) if e["name"] == name)
    return entry["fold"]


def first_turn(reply: str, page: int) -> str:
    """What the first turn after the fold does, relative to the last page read before it."""
    if "submit_answer" in reply:
        return "submit"
    if (m := re.search(r'"read_page",\s*"arguments":\s*\{"page":\s*(\d+)', reply)) is None:
        return "other"
    asked = int(m[1])
    return "next" if asked == page + 1 else "same" if asked == page else "another page"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="an HF model folder (default: the embedded CPU model)")
    parser.add_argument("--count", type=int, default=8)
    parser.add_argument("--read", type=int, default=4, help="pages read before the fold (the flag is on a later one)")
    parser.add_argument("--prefix", help="the reply's opening (default: folding_flagged's summary_prefix)")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(Path(__file__).resolve().parent))  # ledger_needle_probe.py beside it
    from ledger_needle_probe import load_greedy, react_messages, tool_schemas

    from extensions.data.ledger import LedgerSpec, make_ledger
    from extensions.folding import carry_message, read_summary

    if args.model is None:
        from extensions.backends.embedded_model import ensure_embedded_model

        args.model = str(ensure_embedded_model())
    fold = loop_fold_settings()
    prefix = fold["summary_prefix"] if args.prefix is None else args.prefix
    greedy, tools = load_greedy(args.model), tool_schemas(answer_tool=True)

    spec = LedgerSpec(pages=30, per_page=4, question="lookup", ref_style="flag", footer="submit", answer_tool=True)
    counts, closed, seed = Counter(), 0, 0
    for i in range(args.count):
        while True:  # ledgers whose flag comes after the pages read
            ledger = make_ledger(random.Random(f"fold-probe/{seed}"), spec)
            seed += 1
            if ledger.needle[2] > args.read:
                break
        messages = react_messages(ledger, args.read, answer_tool=True, footer="submit")
        task = messages[:2]  # the system prompt and the question: where the next segment starts
        written = greedy([*messages, {"role": "user", "content": fold["instruction"]}], fold["summary_max_tokens"],
                         tools, opening=prefix)  # fmt: skip
        summary, tagged = read_summary(prefix + written)
        closed += tagged
        after = greedy([*task, carry_message(summary, ledger.pages[args.read - 1])], 48, tools)
        what = first_turn(after, args.read)
        counts[what] += 1
        print(f"  {i:2d} {what:12s} tagged={tagged!s:5s} summary {json.dumps(summary[:90])} -> {json.dumps(after[:60])}",
              flush=True)  # fmt: skip
    print(f"prefix {json.dumps(prefix)}: {dict(counts)} of {args.count}, {closed} summaries closed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
