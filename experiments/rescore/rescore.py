"""Rescore every committed GSM8K and ledger per-sample dump under docs/results/ with the reward's current rules.

Run from the repository root (``PYTHONPATH=$PWD``: the checkout's ``extensions``, also from a worktree), ~1 minute:

    PYTHONPATH=$PWD python experiments/rescore/rescore.py     # writes docs/results/rescoring.md and rescoring/*.csv
    PYTHONPATH=$PWD python experiments/rescore/rescore.py --results DIR --out DIR

Dumps it reads:
- verl validation dumps (``trainer.validation_data_dir``): ``val_step<N>.jsonl.xz``, ``val.tar.gz`` (``val/<N>.jsonl``)
  and ``gpu-h100-run1/<N>.jsonl``: one row per output (a folded trajectory is a row per segment; its last segment
  counts). The answer text is the last assistant turn of ``output`` (no answer if a ``<tool_call>`` is in it, as the
  loop's ``final_answer_text`` is then empty); the reason comes from the ``term_<reason>`` columns.
- rollout CLI records (``trajectories.jsonl.gz|xz``, schema ``verl-longflow/trajectory/v1``): the last assistant
  turn's text (a ``submit_answer`` call: its ``#### <answer>``; another tool call: no answer).
Training rollouts (``rollouts/<step>.jsonl.xz``) are not validation figures and are left out.

The old figure is what the dump recorded (its ``acc``); the new one is ``extract_answer`` in ``flexible`` mode (every
committed config's mode) with the row's termination reason. Each changed row gets a reason (``why``); a row whose
recorded verdict the rule that scored its dump does not reproduce from the reconstructed text says so (a dump was
scored in training by the old rule or the current one: the one that reproduces more of its rows). Per dump, a CSV of every
trajectory goes to ``rescoring/<folder>__<dump>.csv``; ``rescoring.md`` has one line per dump.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import lzma
import re
import tarfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from extensions.rewards.gsm8k import NO_ANSWER_REASONS, extract_answer, is_correct, prose, strip_thinking
from extensions.rewards.numbers import normalize_number
from extensions.rewards.trajectory import last_assistant_segment
from extensions.tools.submit import answer_line

ROOT = Path(__file__).resolve().parents[2]
MODE = "flexible"
# The rule every committed figure was scored with: the last number after thinking is removed (the old regex).
_OLD_NUMBER = re.compile(r"(?<![\w.])[-+\u2212]?\$?-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?!\d)")
_VAL_MEMBER = re.compile(r"(?:^|/)(\d+)\.jsonl$")


@dataclass
class Row:
    """One trajectory of a dump, rescored."""

    key: str
    ground_truth: str
    termination_reason: str
    old_acc: float
    text: str
    new_answer: str | None = None
    new_acc: float = 0.0
    new_strict_acc: float = 0.0
    old_rule_acc: float = 0.0  # the old last-number rule's verdict on the text (not a CSV column)
    why: str = ""


def old_answer(text: str) -> str | None:
    """The old flexible rule: the last number of the text, thinking removed."""
    for token in reversed(_OLD_NUMBER.findall(strip_thinking(text))):
        number = normalize_number(token)
        if number is not None:
            return number
    return None


def rescore(row: Row) -> Row:
    """Fill the new verdicts and, where old and new differ, why."""
    truth = normalize_number(row.ground_truth) or row.ground_truth
    row.new_answer = extract_answer(row.text, MODE, row.termination_reason)
    row.new_acc = float(is_correct(row.new_answer, truth))
    row.new_strict_acc = float(is_correct(extract_answer(row.text, "strict", row.termination_reason), truth))
    old = old_answer(row.text)
    row.old_rule_acc = float(is_correct(old, truth))
    if row.new_acc != row.old_acc:
        row.why = why_changed(row, old, truth)
    return row


def flag_unreproduced(rows: list[Row]) -> None:
    """Mark the rows whose recorded verdict the rule that scored their dump does not give. A dump was scored in
    training by one rule, the old one or the current one: the one that reproduces more of its rows."""
    by_old = sum(r.old_rule_acc == r.old_acc for r in rows)
    by_new = sum(r.new_acc == r.old_acc for r in rows)
    for row in rows:
        if (row.old_rule_acc if by_old >= by_new else row.new_acc) != row.old_acc:
            row.why = "; ".join(filter(None, [row.why, "recorded verdict not reproduced from the dumped text"]))


def why_changed(row: Row, old: str | None, truth: str) -> str:
    if row.old_acc and row.termination_reason in NO_ANSWER_REASONS:
        return f"ended on {row.termination_reason}: no answer"
    if row.old_acc and not row.text:
        return "the last turn asked for a tool: no answer text"
    if row.old_acc:
        visible = prose(row.text)
        if old is not None and old_answer(visible) != old:
            return "the number was inside a code or output block"
        if row.new_answer is None:
            return "the number was part of an identifier"
        return f"a later answer form reads {row.new_answer}"
    if row.new_answer is not None and old != row.new_answer:
        return f"an answer form reads {row.new_answer}; the last number was {old}"
    return "other"


# -- reading dumps -----------------------------------------------------------------------------


def _open_text(path: Path) -> io.TextIOBase:
    if path.suffix == ".xz":
        return io.TextIOWrapper(lzma.open(path), encoding="utf-8")
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path), encoding="utf-8")
    return path.open(encoding="utf-8")


def _termination(values: dict[str, Any]) -> str:
    reasons = [key[5:] for key, value in values.items() if key.startswith("term_") and float(value or 0) == 1.0]
    return reasons[0] if reasons else ""


def validation_rows(lines: Iterator[str]) -> list[Row]:
    """A verl validation dump's trajectories: the last segment of each ``{uid}_{session}`` (or each row)."""
    finals: dict[str, tuple[int, dict[str, Any]]] = {}
    for n, line in enumerate(lines):
        if not line.strip():
            continue
        data = json.loads(line)
        uid = str(data.get("uid") or n)
        key, index = (uid.rsplit("_", 1)[0], int(uid.rsplit("_", 1)[1])) if uid.count("_") >= 2 else (uid, 0)
        if key not in finals or finals[key][0] < index:
            finals[key] = (index, data)
    rows = []
    for key, (_, data) in finals.items():
        text = _final_of_output(last_assistant_segment(str(data.get("output", ""))))
        rows.append(Row(key, str(data["gts"]), _termination(data), float(data.get("acc", data["score"])), text))
    return rows


def current_acc(data: dict[str, Any]) -> float:
    """One verl validation dump row (one segment) scored by the current rules, as this script rescores it."""
    text = _final_of_output(last_assistant_segment(str(data.get("output", ""))))
    return rescore(Row("", str(data["gts"]), _termination(data), float(data.get("acc", 0.0)), text)).new_acc


_SUBMIT = re.compile(r'"name"\s*:\s*"submit_answer"\s*,\s*"arguments"\s*:\s*(\{[^{}]*\})')


def _final_of_output(segment: str) -> str:
    """The loop's ``final_answer_text`` from a dumped last assistant turn: a ``submit_answer`` call's ``#### <answer>``
    (``extensions/tools/submit.py``), nothing after another ``<tool_call>``, else the turn."""
    submitted = _SUBMIT.search(segment)
    if submitted is not None:
        try:
            return answer_line(json.loads(submitted.group(1)).get("answer", ""))
        except (ValueError, AttributeError):
            return ""
    return "" if "<tool_call>" in segment else segment


def record_rows(lines: Iterator[str]) -> list[Row]:
    """A rollout CLI file's trajectories (GSM8K and ledger samples)."""
    rows = []
    for line in lines:
        if not line.strip():
            continue
        data = json.loads(line)
        if not str(data.get("data_source") or "").startswith(("longflow/gsm8k", "openai/gsm8k", "longflow/ledger")):
            continue
        old = float((data.get("reward_extra_info") or {}).get("acc", 0.0))
        rows.append(Row(str(data["index"]), str(data["ground_truth"]), data["termination_reason"], old, _final(data)))
    return rows


def _final(record: dict[str, Any]) -> str:
    """The loop's ``final_answer_text`` from a record: a submitted answer, no text after a tool call, else the text."""
    assistant = [t for t in record.get("turns") or [] if t["role"] == "assistant" and not t.get("summary")]
    if not assistant:
        return ""
    last = assistant[-1]
    for call in last.get("tool_calls") or []:
        if call.get("name") == "submit_answer":
            try:
                return answer_line(json.loads(call.get("arguments") or "{}").get("answer", ""))
            except (ValueError, AttributeError):
                return ""
    if last.get("tool_calls") or last.get("malformed_tool_calls"):
        return ""
    return str(last.get("text") or "").replace("<|im_end|>", "").replace("<|endoftext|>", "")


def dumps(results: Path) -> Iterator[tuple[Path, str, list[Row]]]:
    """(result folder, dump name, rows) of every GSM8K/ledger dump under ``results``, in path order."""
    for path in sorted(results.rglob("*")):
        rel = path.relative_to(results)
        if not path.is_file() or "rollouts" in rel.parts or "rescoring" in rel.parts:
            continue
        folder = rel.parts[0]
        if path.name.endswith(".tar.gz") and path.name.startswith("val"):
            with tarfile.open(path) as tar:
                members = sorted((m for m in tar.getmembers() if _VAL_MEMBER.search(m.name)), key=_step)
                for member in members:
                    handle = tar.extractfile(member)
                    if handle is not None:
                        lines = io.TextIOWrapper(handle, encoding="utf-8")
                        yield results / folder, f"{'/'.join(rel.parts[1:])}:{member.name}", validation_rows(lines)
        elif re.fullmatch(r"val_step\d+\.jsonl(?:\.xz|\.gz)?", path.name) or (
            _VAL_MEMBER.search(path.name) and path.parent.name.startswith("gpu-h100-run")
        ):
            with _open_text(path) as handle:
                yield results / folder, "/".join(rel.parts[1:]), validation_rows(handle)
        elif re.fullmatch(r"trajectories\.jsonl(?:\.xz|\.gz)?", path.name):
            with _open_text(path) as handle:
                rows = record_rows(handle)
            if rows:
                yield results / folder, "/".join(rel.parts[1:]), rows


def _step(member: tarfile.TarInfo) -> int:
    match = _VAL_MEMBER.search(member.name)
    return int(match.group(1)) if match else 0


# -- writing -----------------------------------------------------------------------------------

CSV_FIELDS = ("key", "ground_truth", "termination_reason", "old_acc", "new_acc", "new_strict_acc", "new_answer", "why")


def csv_name(folder: Path, dump: str) -> str:
    return f"{folder.name}__{re.sub(r'[^A-Za-z0-9_.-]+', '_', dump)}.csv"


def write_csv(rows: list[Row], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(CSV_FIELDS)
        for row in rows:
            values = [getattr(row, field) for field in CSV_FIELDS]
            writer.writerow(["" if value is None else value for value in values])


def summary_line(folder: Path, dump: str, rows: list[Row], csv_path: str) -> str:
    old, new = sum(r.old_acc for r in rows), sum(r.new_acc for r in rows)
    reasons = Counter(
        re.sub(r" reads -?[\d./]+(?:; the last number was [^;]*)?", " reads another number", r.why)
        for r in rows
        if r.why
    )
    why = "; ".join(f"{n} {reason}" for reason, n in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))) or "-"
    n = len(rows)
    return (
        f"| {folder.name} | [{dump}](rescoring/{csv_path}) | {old:.0f}/{n} ({old / n:.4f}) | "
        f"{new:.0f}/{n} ({new / n:.4f}) | {why} |"
    )


HEADER = """# Rescoring of the committed GSM8K and ledger dumps

**Claim:** every committed GSM8K and ledger figure, rescored with the reward's current answer rules; most move by a few trajectories.

**Reproduce:** `PYTHONPATH=$PWD python experiments/rescore/rescore.py`

Written by `PYTHONPATH=$PWD python experiments/rescore/rescore.py` (its docstring says what it reads and how). Old: the figure each
dump recorded (the last number of the reply, thinking removed). New: the reward's current rules
(`extensions/rewards/gsm8k.py`, `flexible` mode as every committed config): a `####` line or `\\boxed{}` first,
never a number inside code, an output block, inline code or an identifier, and no answer for a reply that ended on
`response_budget` or `error`. One row per trajectory (a folded one counted once); each dump's CSV
lists every trajectory with its old and new verdicts (`new_strict_acc`: strict mode) and why they differ.

| result folder | dump | old | new | why it differs (trajectories) |
|---|---|---|---|---|
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=ROOT / "docs" / "results")
    parser.add_argument("--out", type=Path, default=None, help="where rescoring.md goes (default: --results)")
    args = parser.parse_args(argv)
    out = args.out or args.results
    lines = []
    for folder, dump, rows in dumps(args.results):
        for row in rows:
            rescore(row)
        flag_unreproduced(rows)
        name = csv_name(folder, dump)
        write_csv(rows, out / "rescoring" / name)
        lines.append(summary_line(folder, dump, rows, name))
    (out / "rescoring.md").write_text(HEADER + "\n".join(lines) + "\n", encoding="utf-8")
    print(f"rescored {len(lines)} dumps; wrote {out / 'rescoring.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
