"""How sure the policy was of each tool choice on the flagged ledgers, from the rollout driver's records.

    python experiments/ledger_folding/analysis/ledger_decisions.py docs/results/ledger-fold-grpo30-h100/fold/trajectories.jsonl.xz

For every page a trajectory read in full (the tool result ends with ``End of page``), takes the assistant turn
that follows it and the log-prob the engine gave to the first token of the tool name it chose (``submit`` or
``read``; the records keep each generated token's log-prob). The pages are split in two: the page that shows
the flagged line (``| DISPUTED``), where the right call is ``submit_answer``, and every other page, where it is
``read_page``. Prints, for each, the choices and the chosen token's probability (minimum, 10th percentile,
median, and how many fell below 0.9 and 0.99). Writes ``decisions.csv`` next to the records: one row per
decision. A probability near 1 at a decision means small weight changes cannot flip it; a near-tie means they can.
"""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
from rollout_dump_report import read_dump, write_csv  # noqa: E402  (scripts/rollout_dump_report.py: any .jsonl(.gz|.xz))

FLAG_LINE = "| DISPUTED"
NAME_PREFIX = '"name": "'


def segments(record: dict) -> list[dict]:
    """The record's segments in order: the earlier ones, then the last (the record's own fields)."""
    return [*(record.get("segments") or []), record]


def name_token(tokenizer, ids: list[int]) -> int | None:
    """Index in ``ids`` of the first token of the tool name (the one after ``"name": "``), if any."""
    for j in range(len(ids) - 1):
        if tokenizer.decode(ids[: j + 1], skip_special_tokens=False).endswith(NAME_PREFIX):
            return j + 1
    return None


def decisions(record: dict, tokenizer) -> list[dict]:
    rows = []
    for number, segment in enumerate(segments(record)):
        turns = segment["turns"]
        for i, turn in enumerate(turns):
            text = turn.get("text") or ""
            if turn["role"] != "tool" or "End of page" not in text:
                continue
            reply = next((t for t in turns[i + 1 :] if t["role"] == "assistant"), None)
            if reply is None:
                continue
            start, end = reply["span"]
            ids = segment["response_ids"][start:end]
            k = name_token(tokenizer, ids)
            if k is None:
                continue
            rows.append(
                {
                    "index": record["index"],
                    "segment": number,
                    "page": "flagged" if FLAG_LINE in text else "other",
                    "chosen": tokenizer.decode([ids[k]]),
                    "probability": math.exp(segment["logprobs"][start + k]),
                    "reward": record["reward"],
                }
            )
    return rows


def summary(rows: list[dict], page: str) -> str:
    ps = sorted(r["probability"] for r in rows if r["page"] == page)
    if not ps:
        return f"{page} pages: none"
    chosen: dict[str, int] = {}
    for r in rows:
        if r["page"] == page:
            chosen[r["chosen"]] = chosen.get(r["chosen"], 0) + 1
    picks = ", ".join(f"{name} {n}" for name, n in sorted(chosen.items()))
    return (
        f"{page} pages: {len(ps)} decisions ({picks}); probability of the choice: min {ps[0]:.4f}, "
        f"p10 {ps[len(ps) // 10]:.4f}, median {statistics.median(ps):.6f}; "
        f"below 0.9: {sum(p < 0.9 for p in ps)}, below 0.99: {sum(p < 0.99 for p in ps)}"
    )


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    from extensions.qwen_tokenizer import build_qwen_tokenizer

    path, tokenizer = Path(argv[0]), build_qwen_tokenizer()
    rows = [row for record in read_dump(path) for row in decisions(record, tokenizer)]
    if not rows:
        print(f"{path}: no tool choice after a full page (records of experiments/ledger_folding with log-probs?)")
        return 1
    print(summary(rows, "flagged"))
    print(summary(rows, "other"))
    out = path.parent / "decisions.csv"
    write_csv(out, rows)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
