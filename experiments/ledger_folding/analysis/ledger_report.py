"""What the agent did on the paged ledger, per variant, from the rollout driver's trajectories.

    python experiments/ledger_folding/analysis/ledger_report.py docs/results/ledger-folding-h100 truncated fold

Reads ``RESULTS/VARIANT/trajectories.jsonl`` (or ``.jsonl.gz`` / ``.jsonl.xz``) and writes
``RESULTS/variants.csv`` (one row per variant: accuracy, answers given, pages read, highest page reached,
segments, fold requests and what the policy wrote when asked for a summary: inside ``<summary>`` tags, or,
untagged, a ``read_page`` call) and ``RESULTS/pages.png``
(how far each variant read, and how its fold requests were answered). For ``--question lookup`` ledgers,
how many trajectories read the page holding the asked transaction, their accuracy, and that accuracy by the
transaction's line on its page (``accuracy_by_needle_line``: "line: right/reached"). Accuracy is the reward's ``acc``;
everything else is counted from the recorded turns, earlier segments included.
"""

from __future__ import annotations

import csv
import gzip
import json
import lzma
import re
import sys
from collections import Counter
from pathlib import Path
from statistics import mean
from typing import Any

from extensions.data.ledger_text import FLAG
from extensions.folding import read_summary

FIELDS = ["variant", "trajectories", "accuracy", "answered", "distinct_pages_mean", "highest_page_mean",
          "read_all_pages", "segments_mean", "summary_turns", "summaries_tagged", "summaries_calling_a_tool",
          "needle_reached", "accuracy_when_reached", "accuracy_by_needle_line", "termination_reasons"]  # fmt: skip
NEEDLE = re.compile(r"has the memo reference ref ([0-9a-z-]+)\.")  # --ref-style number or word
FLAGGED = f"is marked {FLAG} at the end of its line"  # --ref-style flag
TRANSACTION = re.compile(r"^T\d+ \|")  # a transaction's line on a page


def read_records(path: Path) -> list[dict[str, Any]]:
    for suffix, opener in ((".jsonl", open), (".jsonl.gz", gzip.open), (".jsonl.xz", lzma.open)):
        file = path / f"trajectories{suffix}"
        if file.is_file():
            with opener(file, "rt") as f:
                return [json.loads(line) for line in f if line.strip()]
    raise SystemExit(f"{path}: no trajectories.jsonl(.gz|.xz)")


def ledger_pages(record: dict[str, Any]) -> int:
    """How many pages this sample's ledger has (ledgers of one run may differ: ``--min-pages``)."""
    return len(record["tools_kwargs"]["read_page"]["create_kwargs"]["pages"])


def pages_read(record: dict[str, Any]) -> list[int]:
    """The pages of every read_page call that ran and returned a page, in order, over all segments: the calls of
    the tool turns (the records also copy each call onto the assistant turn that made it, so those are not
    counted again); a call for a page the ledger does not have is not a page read."""
    n, pages = ledger_pages(record), []
    for turn in all_turns(record):
        if turn["role"] != "tool":
            continue
        for call in turn.get("tool_calls", []):
            if call["name"] != "read_page":
                continue
            try:
                page = json.loads(call["arguments"]).get("page")
            except (json.JSONDecodeError, AttributeError):
                continue
            if isinstance(page, int) and 1 <= page <= n:
                pages.append(page)
    return pages


def needle_place(record: dict[str, Any]) -> tuple[int, int] | None:
    """(page, line) of the asked transaction of a lookup ledger, both from 1 (the line among the page's
    transaction lines), from the question and the pages; None for other ledgers."""
    question = next((m["content"] for m in record.get("raw_prompt") or [] if m["role"] == "user"), "")
    if FLAGGED in question:  # --ref-style flag: the transaction's line ends with the flag
        needle = re.compile(rf"^T\d+ \|.* \| {FLAG}$")
    elif (match := NEEDLE.search(question)) is not None:
        needle = re.compile(rf"^T\d+ \|.* ref {match[1]}$")  # a transaction's line, not a footer naming it
    else:
        return None
    pages = record["tools_kwargs"]["read_page"]["create_kwargs"]["pages"]
    for k, page in enumerate(pages, start=1):
        lines = [line for line in page.splitlines() if TRANSACTION.match(line)]
        found = next((n for n, line in enumerate(lines, start=1) if needle.match(line)), None)
        if found is not None:
            return k, found
    return None


def all_turns(record: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for s in record.get("segments", []) for t in s["turns"]] + record["turns"]


def tagged(turn: dict[str, Any]) -> bool:
    """A summary closed inside ``<summary>`` tags: the loop's record (``summary_tagged``) where it has one;
    older records (before it was recorded) by the turn's text, read as the loop reads it."""
    if turn.get("summary_tagged") is not None:
        return bool(turn["summary_tagged"])
    return read_summary(turn["text"])[1]


def answered(text: str, reason: str) -> bool:
    """The last assistant turn answered: a ``####`` line, or a ``submit_answer`` call that ended the trajectory
    (``extensions/tools/submit.py``)."""
    return "####" in text or (reason == "final_answer" and '"submit_answer"' in text)


def figures(record: dict[str, Any]) -> dict[str, Any]:
    """One trajectory: pages, segments, and the summary turns (tagged, or a tool call instead)."""
    pages = pages_read(record)
    summaries = [t for t in all_turns(record) if t.get("summary")]
    last = [t for t in record["turns"] if t["role"] == "assistant"]
    return {
        "acc": float(record.get("reward_extra_info", {}).get("acc", (record.get("reward") or 0) > 0)),
        "answered": bool(last) and answered(last[-1]["text"], record["termination_reason"]),
        "pages": ledger_pages(record),
        "distinct_pages": len(set(pages)),
        "highest_page": max(pages, default=0),
        "segments": len(record.get("segments", [])) + 1,
        "summary_turns": len(summaries),
        "summaries_tagged": sum(tagged(t) for t in summaries),
        "summaries_calling_a_tool": sum(
            not tagged(t) and '"name"' in t["text"] and "read_page" in t["text"] for t in summaries
        ),
        "reason": record["termination_reason"],
        "needle_page": (needle := place[0] if (place := needle_place(record)) else None),
        "needle_line": place[1] if place else None,
        "reached_needle": needle in pages,
    }


def variant_row(name: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One variant's CSV row from its trajectories' ``figures``."""
    return {
        "variant": name,
        "trajectories": len(rows),
        "accuracy": round(mean(r["acc"] for r in rows), 4),
        "answered": sum(r["answered"] for r in rows),
        "distinct_pages_mean": round(mean(r["distinct_pages"] for r in rows), 3),
        "highest_page_mean": round(mean(r["highest_page"] for r in rows), 3),
        "read_all_pages": sum(r["distinct_pages"] == r["pages"] for r in rows),
        "segments_mean": round(mean(r["segments"] for r in rows), 3),
        "summary_turns": sum(r["summary_turns"] for r in rows),
        "summaries_tagged": sum(r["summaries_tagged"] for r in rows),
        "summaries_calling_a_tool": sum(r["summaries_calling_a_tool"] for r in rows),
        **needle_figures(rows),
        "termination_reasons": "; ".join(f"{k} {v}" for k, v in Counter(r["reason"] for r in rows).most_common()),
    }


def needle_figures(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Lookup ledgers: trajectories that read the asked transaction's page, and their accuracy ("" otherwise)."""
    if any(r["needle_page"] is None for r in rows):
        return {"needle_reached": "", "accuracy_when_reached": "", "accuracy_by_needle_line": ""}
    reached = [r for r in rows if r["reached_needle"]]
    lines = sorted({r["needle_line"] for r in reached})
    return {
        "needle_reached": len(reached),
        "accuracy_when_reached": round(mean(r["acc"] for r in reached), 4) if reached else "",
        # right / reached, by the transaction's line on its page: copying the wrong line shows here
        "accuracy_by_needle_line": "; ".join(
            f"{n}: {sum(r['acc'] for r in reached if r['needle_line'] == n):g}/"
            f"{sum(r['needle_line'] == n for r in reached)}"
            for n in lines
        ),
    }


def plot(results: Path, variants: dict[str, list[dict[str, Any]]], rows: list[dict[str, Any]]) -> Path:
    """``variants``: each variant's trajectories' ``figures``; ``rows``: the CSV rows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.8 / max(len(variants), 1)
    pages = max(f["pages"] for figs in variants.values() for f in figs)
    for k, (name, figs) in enumerate(variants.items()):
        counts = Counter(f["highest_page"] for f in figs)
        xs = range(pages + 1)
        left.bar([x + k * width for x in xs], [counts.get(x, 0) for x in xs], width=width, label=name)
    left.set(
        xlabel="highest page read", ylabel="trajectories", title=f"How far each trajectory read (of up to {pages})"
    )
    left.legend()
    folded = [r for r in rows if r["summary_turns"]]
    if folded:
        names = [r["variant"] for r in folded]
        tool = [r["summaries_calling_a_tool"] for r in folded]
        tagged = [r["summaries_tagged"] for r in folded]
        other = [r["summary_turns"] - a - b for r, a, b in zip(folded, tool, tagged, strict=True)]
        right.bar(names, tool, label="a read_page call instead")
        right.bar(names, tagged, bottom=tool, label="inside <summary> tags")
        right.bar(names, other, bottom=[a + b for a, b in zip(tool, tagged, strict=True)], label="other text")
        right.legend()
    right.set(ylabel="fold requests", title="What the policy wrote when asked to summarize")
    fig.tight_layout()
    out = results / "pages.png"
    fig.savefig(out, dpi=110)
    return out


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    results, names = Path(argv[0]), argv[1:]
    variants = {name: [figures(r) for r in read_records(results / name)] for name in names}
    rows = [variant_row(name, figs) for name, figs in variants.items()]
    with open(results / "variants.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    for row in rows:
        print(", ".join(f"{k} {v}" for k, v in row.items()))
    print(f"wrote {results / 'variants.csv'} and {plot(results, variants, rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
