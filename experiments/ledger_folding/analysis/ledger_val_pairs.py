"""Per-ledger held-out results of a ledger_folding training run, its validation with or without ReAct (``VAL_ALSO``).

    python experiments/ledger_folding/analysis/ledger_val_pairs.py docs/results/ledger-fold-grpo30-h100/fold_grpo

Reads ``RUN/val_step<N>.jsonl(.xz)`` (verl's validation dumps, renamed from ``val/<N>.jsonl``). With
``VAL_ALSO=truncated`` each dump holds every held-out ledger twice, once per loop, under the same prompt (the
flagged question's text is the same for every ledger), so ``scripts/val_compare.py`` cannot pair them. Here a
trajectory is keyed by the first page its first turn read and the expected answer. Of a ledger's two trajectories,
the one with more rows (segments) is the folding one; on a tie (no fold happened) the one that did not end on
``response_budget``. The ReAct one is always a single row. Two single rows with the same ending are the same run
of the same turns in both loops; they must score alike (the script stops if not), and either is taken as folding.

A folding trajectory whose first segment read no page 1 (a malformed first call) names no ledger: it counts in its
step's score, is left out of the pairs, and then the difference is also given unpaired. (A ``VAL_ALSO`` dump in which
no trajectory read page 1 cannot be told from a folding-only one.)

Prints, per step, how many ledgers each loop got right; between the first and last step, how the folding
results moved (right->wrong and wrong->right), the paired difference with its standard error; and, for each
wrong folding trajectory of the last step, whether it was shown the flagged line (``| DISPUTED``) and read on;
and, at the first and last step, how folding did by where the flagged page came in its segment (``flag_place``).
Writes ``RUN/val_pairs.csv``: one row per ledger and step (``ledger`` numbers the ledgers known by their first
page, the same number at every step; blank for a trajectory that read no page 1).
"""

from __future__ import annotations

import math
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
from rollout_dump_report import read_trajectories, write_csv  # noqa: E402  (scripts/rollout_dump_report.py)

FIRST_PAGE = re.compile(r"Ledger page 1 of \d+\n(.*?)\n(?:End of page|\.\.\.)", re.S)
FLAG_LINE = "| DISPUTED"


def ledger_key(trajectory: list[dict]) -> tuple[str, str]:
    match = FIRST_PAGE.search(trajectory[0]["output"])
    return (match.group(1) if match else "", str(trajectory[0]["gts"]))


UNREAD = "(no page 1 read) #"  # the key of a trajectory whose first segment read no page 1 (its ledger is unknown)


def known_ledgers(keys) -> set[tuple[str, str]]:
    """The keys of ``pair_loops`` that name a ledger (not ``UNREAD``)."""
    return {key for key in keys if not key[0].startswith(UNREAD)}


def pair_loops(trajectories: list[list[dict]], path: Path) -> dict[tuple[str, str], dict[str, list[dict] | None]]:
    """{ledger: {"fold": rows, "react": rows or None}}. A dump of a run with ``VAL_ALSO=truncated`` has exactly one
    trajectory of each loop per ledger; a run without it, exactly one folding trajectory per ledger (react None).
    A folding trajectory that read no page 1 in its first segment (a malformed first call, say) cannot be told from
    another ledger's: it is kept under its own key, ``UNREAD`` and its place in the dump."""
    by_ledger: dict[tuple[str, str], list[list[dict]]] = {}
    unread = []
    for trajectory in trajectories:
        key = ledger_key(trajectory)
        if key[0]:
            by_ledger.setdefault(key, []).append(trajectory)
        else:
            unread.append(trajectory)
    expected = 2 if any(len(found) > 1 for found in by_ledger.values()) else 1
    if unread and expected == 2:
        raise SystemExit(
            f"{path}: {len(unread)} trajectories read no page 1 in their first segment, so neither their ledger nor "
            "their loop can be told (answers " + ", ".join(str(t[0]["gts"]) for t in unread) + "); pairing needs "
            "every trajectory of a VAL_ALSO=truncated dump to have read page 1 first"
        )
    pairs = {(f"{UNREAD}{i}", str(t[0]["gts"])): {"fold": t, "react": None} for i, t in enumerate(unread)}
    for key, found in by_ledger.items():
        if len(found) != expected:
            raise SystemExit(
                f"{path}: {len(found)} trajectories of one ledger (answer {key[1]}), expected {expected} as for the "
                "others: one folding and one ReAct per ledger (a run with VAL_ALSO=truncated), or one folding only"
            )
        if expected == 1:
            pairs[key] = {"fold": found[0], "react": None}
            continue
        rank = [(len(t), float(t[-1]["term_response_budget"]) == 0) for t in found]
        if rank[0] == rank[1] and right(found[0]) != right(found[1]):
            raise SystemExit(
                f"{path}: the two trajectories of one ledger (answer {key[1]}) cannot be told apart (one row each, "
                "same ending) and scored differently"
            )
        fold = 0 if rank[0] >= rank[1] else 1
        pairs[key] = {"fold": found[fold], "react": found[1 - fold]}
    return pairs


def right(trajectory: list[dict]) -> int:
    return int(float(trajectory[-1]["score"]) == 1.0)


FULL_PAGE = re.compile(r"Ledger page (\d+) of \d+\n(.*?)End of page", re.S)


def flag_place(trajectory: list[dict]) -> str:
    """Where the first full page showing the flagged line came in its segment: ``first`` (the segment's first full
    page: page 1, or the page read again after a fold), ``later``, or ``never`` (not shown in full)."""
    for row in trajectory:
        pages = [FLAG_LINE in m[2] for m in FULL_PAGE.finditer(row["output"])]
        if any(pages):
            return "first" if pages[0] else "later"
    return "never"


def failure(trajectory: list[dict]) -> str:
    """Why a wrong trajectory is wrong: was it shown the flagged line, and how did it end."""
    ended = next((k[len("term_") :] for k, v in trajectory[-1].items() if k.startswith("term_") and float(v) == 1), "?")
    shown = any(FLAG_LINE in row["output"] for row in trajectory)
    return f"{'shown the flagged line' if shown else 'never shown the flagged line'}, ended {ended}"


def compare(run: Path, steps: dict, first: int, last: int) -> None:
    """Folding at the first and last step: paired over the ledgers known at both; where some read no page 1 (their
    ledger unknown), also the unpaired difference over all of them."""
    a, b = steps[first], steps[last]
    known_a, known_b = known_ledgers(a), known_ledgers(b)
    known = sorted(known_a & known_b)
    # a ledger known at one step only must be among the other step's unread ones
    if (
        len(a) != len(b)
        or len(known_a - known_b) > len(b) - len(known_b)
        or len(known_b - known_a) > len(a) - len(known_a)
    ):
        raise SystemExit(f"{run}: steps {first} and {last} validated different ledgers")
    diffs = [right(b[k]["fold"]) - right(a[k]["fold"]) for k in known]
    n, unknown = len(diffs), len(a) - len(diffs)
    left_out = f" ({unknown} left out: they read no page 1 at step {first} or {last})" if unknown else ""
    if n > 1:
        mean = sum(diffs) / n
        se = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1) / n)
        print(
            f"folding, step {first} -> {last}, {n} ledgers{left_out}: right->wrong {diffs.count(-1)}, wrong->right "
            f"{diffs.count(1)}, paired difference {100 * mean:+.1f} ± {100 * se:.1f} points (standard error)"
        )
    else:
        print(f"folding, step {first} -> {last}: {n} ledgers known at both steps{left_out}, no paired difference")
    if unknown:
        p, q = (sum(right(t["fold"]) for t in s.values()) / len(s) for s in (a, b))
        se_all = math.sqrt(p * (1 - p) / len(a) + q * (1 - q) / len(b))
        print(
            f"folding, step {first} -> {last}, all {len(a)} ledgers, unpaired: {100 * p:.1f} % -> {100 * q:.1f} %, "
            f"{100 * (q - p):+.1f} ± {100 * se_all:.1f} points (standard error)"
        )


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    run = Path(argv[0])
    dumps = sorted(run.glob("val_step*.jsonl*"), key=lambda p: int(re.search(r"val_step(\d+)", p.name).group(1)))
    if not dumps:
        print(f"{run}: no val_step<N>.jsonl(.xz) files")
        return 1
    steps = {int(re.search(r"val_step(\d+)", p.name).group(1)): pair_loops(read_trajectories(p), p) for p in dumps}
    number = {key: i for i, key in enumerate(sorted(known_ledgers(k for pairs in steps.values() for k in pairs)))}
    rows = []
    for step, pairs in steps.items():
        fold = sum(right(p["fold"]) for p in pairs.values())
        react = [right(p["react"]) for p in pairs.values() if p["react"] is not None]
        react_text = f"ReAct (truncated) right {sum(react)}" if react else "ReAct not validated (no VAL_ALSO)"
        print(f"step {step}: {len(pairs)} ledgers, folding right {fold}, {react_text}")
        for key, pair in sorted(pairs.items(), key=lambda item: (item[0] not in number, number.get(item[0], 0))):
            kind = "" if right(pair["fold"]) else failure(pair["fold"])
            rows.append(
                {
                    "step": step,
                    "ledger": number.get(key, ""),
                    "answer": key[1],
                    "fold_right": right(pair["fold"]),
                    "fold_segments": len(pair["fold"]),
                    "react_right": "" if pair["react"] is None else right(pair["react"]),
                    "fold_failure": kind,
                    "flag_place": flag_place(pair["fold"]),
                }
            )
    first, last = min(steps), max(steps)
    if first != last:
        compare(run, steps, first, last)
    for step in sorted({first, last}):
        places = Counter((flag_place(p["fold"]), right(p["fold"])) for p in steps[step].values())
        print(
            f"step {step}, folding right/shown by where the flagged page came in its segment: "
            + ", ".join(
                f"{place} {places[place, 1]}/{places[place, 0] + places[place, 1]}"
                for place in ("first", "later", "never")
            )
        )
    wrong = Counter(failure(p["fold"]) for p in steps[last].values() if not right(p["fold"]))
    for kind, count in wrong.most_common():
        print(f"step {last}, wrong folding trajectories {kind}: {count}")
    write_csv(run / "val_pairs.csv", rows)
    print(f"wrote {run / 'val_pairs.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
