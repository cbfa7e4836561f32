"""Do two runs of the same folding policy on the same held-out ledgers give the same greedy outputs?

    python experiments/ledger_folding/analysis/ledger_engine_agree.py A B

A and B are each the rollout driver's ``trajectories.jsonl(.xz)`` or a verl validation dump
(``val_step<N>.jsonl(.xz)``, one row per segment; of a run with ``VAL_ALSO=truncated``, its folding trajectories). The driver's records are decoded with the embedded model's
tokenizer the way verl decodes its dumps (special tokens skipped), so the two are compared as text. A ledger is
keyed by its first page and its answer (``ledger_val_pairs.ledger_key``); both sides must hold the same ledgers.

Prints how many ledgers each side got right, how many both did, and on how many every segment's text (the model's
turns and the tool results between them) is the same on both sides; for each ledger where they differ, the first
segment that differs and both sides' scores. Written for the question of docs/results/ledger-fold-grpo30-mb96-h100:
does the trainer's step-30 validation score the weights the trainer saved?
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[2] / "scripts")]  # ledger_val_pairs.py here; rollout_dump_report.py
from ledger_val_pairs import FIRST_PAGE, known_ledgers, pair_loops, right  # noqa: E402
from rollout_dump_report import read_dump, read_trajectories  # noqa: E402

Ledger = tuple[str, str]  # (first page, answer)
Run = dict[Ledger, tuple[int, list[str]]]  # ledger -> (right, every segment's response text)


def from_dump(path: Path) -> Run:
    """verl's validation dump: each ledger's folding trajectory (``ledger_val_pairs.pair_loops``), segments in order."""
    pairs = pair_loops(read_trajectories(path), path)
    return {key: (right(pair["fold"]), [row["output"] for row in pair["fold"]]) for key, pair in pairs.items()}


def from_driver(path: Path, records: list[dict]) -> Run:
    """The driver's records (extensions.rollout): earlier segments, then the record's own (the last)."""
    from extensions.qwen_tokenizer import build_qwen_tokenizer

    tokenizer = build_qwen_tokenizer(qwen3_tokens=False)  # the embedded Qwen2.5 model's
    run: Run = {}
    for record in records:
        pages = record["tools_kwargs"]["read_page"]["create_kwargs"]["pages"]
        match = FIRST_PAGE.search(pages[0])
        if not match:
            raise SystemExit(f"{path}: record {record['index']}: page 1 has no ledger lines: {pages[0][:80]!r}")
        segments = [*record["segments"], record]
        texts = [tokenizer.decode(s["response_ids"], skip_special_tokens=True) for s in segments]
        run[(match.group(1), str(record["ground_truth"]))] = (int(record["reward"] == 1.0), texts)
    return run


def load(path: Path) -> Run:
    rows = read_dump(path)
    if rows and rows[0].get("schema", "").startswith("verl-longflow/trajectory"):
        return from_driver(path, rows)
    return from_dump(path)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    paths = [Path(arg) for arg in argv]
    a, b = (load(path) for path in paths)
    if a.keys() != b.keys():
        unread = [len(run) - len(known_ledgers(run)) for run in (a, b)]
        why = (
            f"; {unread[0]} and {unread[1]} of their trajectories read no page 1, so their ledgers cannot be told"
            if any(unread)
            else " (expected the same held-out ledgers on both sides)"
        )
        raise SystemExit(
            f"{paths[0]} and {paths[1]} hold different ledgers: {len(a.keys() - b.keys())} only in the first, "
            f"{len(b.keys() - a.keys())} only in the second{why}"
        )
    same = [key for key in a if a[key][1] == b[key][1]]
    print(f"A {paths[0]}\nB {paths[1]}")
    print(
        f"{len(a)} ledgers: A right {sum(r for r, _ in a.values())}, B right {sum(r for r, _ in b.values())}, "
        f"both right {sum(a[k][0] and b[k][0] for k in a)}; every segment's text the same on {len(same)}"
    )
    for key in sorted(a.keys() - set(same), key=lambda k: k[1]):
        (right_a, texts_a), (right_b, texts_b) = a[key], b[key]
        pairs = enumerate(zip(texts_a, texts_b, strict=False))  # unequal lengths: differs where the shorter ends
        first = next((i for i, (x, y) in pairs if x != y), min(len(texts_a), len(texts_b)))
        print(
            f"  answer {key[1]}: segments A {len(texts_a)}, B {len(texts_b)}; first differs at segment {first + 1}; "
            f"right A {right_a}, B {right_b}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
