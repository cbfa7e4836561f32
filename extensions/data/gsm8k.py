"""Prepare GSM8K for the long-workflow agent loop: verl-ready parquet files.

    python -m extensions.data.gsm8k --output-dir data/gsm8k \\
        --agent-name long_workflow --interaction code_verify --val-size 200   # openai/gsm8k: needs network
    LONGFLOW_GSM8K_DIR=path/to/gsm8k python -m extensions.data.gsm8k --split test --output-dir data/gsm8k
    python -m extensions.data.gsm8k --input my_problems.jsonl --output-dir data/mine

``--input`` is a .jsonl/.json/.parquet file of ``{"question": ..., "answer": "...#### 72"}`` rows
or a Hugging Face dataset id; without it, ``$LONGFLOW_GSM8K_DIR/<split>.jsonl`` if that variable
is set, else the public ``openai/gsm8k`` through ``datasets``. Writes ``<output-dir>/<split>.parquet`` and, with ``--val-size N``,
N seeded-random rows to ``<output-dir>/test.parquet`` (verl's ``data.val_files``). Columns,
as verl's RLHFDataset and the agent loop read them:

- ``data_source``: ``longflow/gsm8k`` (``--data-source openai/gsm8k`` for verl's name);
  ``extensions/custom_rewards.py`` scores both.
- ``agent_name``: the agent loop entry that runs the sample.
- ``prompt``: ``[{role: system, content: <tools + '#### <number>' format>}, {role: user, content: question}]``.
- ``ability``: ``math``; ``reward_model``: ``{style: rule, ground_truth: "72"}`` (normalised number).
- ``extra_info``: ``{split, index, question, answer, tools_kwargs, tool_selection, interaction_kwargs}``.
  RLHFDataset copies ``tools_kwargs`` and ``interaction_kwargs`` to top-level sample keys, which
  become the agent loop's kwargs; verl's ToolAgentLoop offers only ``tool_selection``'s tools.
  Parquet cannot store an empty struct, so ``tools_kwargs`` lists only tools with create
  kwargs (``check_answer: {create_kwargs: {ground_truth}}``) — verl gives the others ``{}`` —
  and keys with nothing to say are left out (RLHFDataset defaults them to ``{}``).

Held-out rows (``--split test`` or the ``--val-size`` hold-out) never offer a tool that knows the
answer (``check_answer``): the default tool list leaves it out there, and naming it in ``--tools`` is
an error. ``--tools ''`` offers no tools at all (``tool_selection: []``); ``--tool-format code_fence``
describes ``python_exec`` as fenced ```` ```python ```` blocks instead of listing tools.
A row whose answer has no ``#### <number>`` stops the run with the count and first indices;
``--skip-bad-rows`` drops such rows instead, logging the same report.
"""

from __future__ import annotations

import argparse
import logging
import random
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from extensions.data.prompts import DEFAULT_TOOLS, TOOL_FORMATS, TOOLS, parse_tools, system_prompt
from extensions.data.sources import GSM8K_DIR_ENV, Rows, default_gsm8k_source, read_rows
from extensions.errors import ConfigError, LongflowError, SampleError, choices
from extensions.rewards.gsm8k import LONGFLOW_GSM8K, OPENAI_GSM8K
from extensions.rewards.numbers import normalize_number

logger = logging.getLogger(__name__)

DATA_SOURCES = (LONGFLOW_GSM8K, OPENAI_GSM8K)
REQUIRED_COLUMNS = ("question", "answer")
VAL_SPLIT = "test"
SHOWN_BAD_ROWS = 5
_SPLIT_NAME = re.compile(r"[A-Za-z0-9_-]+")


def ground_truth_of(answer: Any) -> tuple[str | None, str]:
    """(normalised number after the last ``####``, "") or (None, why the answer is unusable)."""
    if not isinstance(answer, str):
        return None, f"answer is {type(answer).__name__}, not a string"
    if "####" not in answer:
        return None, "answer has no '#### <number>' line"
    tail = answer.rsplit("####", 1)[1].strip()
    number = normalize_number(tail)
    if number is None:
        return None, f"'#### {tail}' is not a number"
    return number, ""


def find_problems(rows: Rows, source: str) -> list[tuple[int, str]]:
    """(row index, problem) for every unusable row; a column missing from every row is a SampleError."""
    missing = [col for col in REQUIRED_COLUMNS if not any(col in row for row in rows)]
    if missing:
        found = sorted({key for row in rows for key in row})
        raise SampleError(
            f"{source}: missing column(s) {choices(missing)}; GSM8K rows need 'question' and 'answer' "
            f"(found: {choices(found)})"
        )
    problems = []
    for index, row in enumerate(rows):
        question = row.get("question")
        if not isinstance(question, str) or not question.strip():
            problems.append((index, "question is missing or empty"))
            continue
        _, why = ground_truth_of(row.get("answer"))
        if why:
            problems.append((index, why))
    return problems


def report_problems(problems: list[tuple[int, str]], total: int, source: str) -> str:
    """One message: how many rows are bad, and the first few with their reasons."""
    shown = "; ".join(f"row {index}: {why}" for index, why in problems[:SHOWN_BAD_ROWS])
    more = f"; and {len(problems) - SHOWN_BAD_ROWS} more" if len(problems) > SHOWN_BAD_ROWS else ""
    return (
        f"{source}: {len(problems)} of {total} rows are not usable GSM8K rows (0-based row indices): "
        f"{shown}{more}. Expected a non-empty 'question' and an 'answer' ending in '#### <number>'"
    )


def build_row(
    row: dict[str, Any],
    *,
    index: int,
    split: str,
    tools: Sequence[str],
    agent_name: str,
    interaction: str | None,
    data_source: str,
    tool_format: str = "json",
) -> dict[str, Any]:
    """One verl sample from a checked GSM8K row."""
    question = row["question"].strip()
    ground_truth, _ = ground_truth_of(row["answer"])
    extra_info: dict[str, Any] = {"split": split, "index": index, "question": question, "answer": row["answer"]}
    tools_kwargs = {
        name: {"create_kwargs": {"ground_truth": ground_truth}} for name in tools if TOOLS[name].needs_ground_truth
    }
    if tools_kwargs:
        extra_info["tools_kwargs"] = tools_kwargs
    extra_info["tool_selection"] = list(tools)  # [] = no tools (not "all of them")
    if interaction:
        extra_info["interaction_kwargs"] = {"name": interaction, "query": question, "ground_truth": ground_truth}
    return {
        "data_source": data_source,
        "agent_name": agent_name,
        "prompt": [
            {"role": "system", "content": system_prompt(tools, tool_format)},
            {"role": "user", "content": question},
        ],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": ground_truth},
        "extra_info": extra_info,
    }


def check_options(
    *,
    agent_name: str,
    split: str,
    limit: int | None,
    val_size: int,
    data_source: str,
    tools: Sequence[str] = (),
    tool_format: str = "json",
) -> None:
    """Every invalid option at once, as one ConfigError."""
    errors = []
    oracles = [name for name in tools if TOOLS[name].needs_ground_truth]
    if oracles and (split == VAL_SPLIT or val_size):
        errors.append(
            f"--tools {choices(oracles)}: an oracle tool (it knows the answer) is never offered on the "
            f"held-out {VAL_SPLIT!r} split; drop it from --tools for validation data"
        )
    if tool_format not in TOOL_FORMATS:
        errors.append(f"--tool-format {tool_format!r}: expected one of {choices(TOOL_FORMATS)}")
    if not agent_name:
        errors.append("--agent-name must not be empty")
    if not _SPLIT_NAME.fullmatch(split):
        errors.append(f"--split {split!r}: use letters, digits, '_' or '-' (it names the output file)")
    if limit is not None and limit < 1:
        errors.append(f"--limit {limit}: must be at least 1")
    if val_size < 0:
        errors.append(f"--val-size {val_size}: must be 0 or more")
    if val_size and split == VAL_SPLIT:
        errors.append(f"--val-size writes {VAL_SPLIT}.parquet, so --split must not be {VAL_SPLIT!r}")
    if data_source not in DATA_SOURCES:
        errors.append(f"--data-source {data_source!r}: expected one of {choices(DATA_SOURCES)}")
    if errors:
        raise ConfigError("\n".join(errors))


def prepare(
    source: str,
    output_dir: str | Path,
    *,
    agent_name: str = "long_workflow",
    interaction: str | None = None,
    split: str = "train",
    limit: int | None = None,
    tools: Sequence[str] | None = None,
    val_size: int = 0,
    seed: int = 0,
    data_source: str = LONGFLOW_GSM8K,
    hf_config: str | None = "main",
    skip_bad_rows: bool = False,
    loader: Callable[..., Any] | None = None,
    tool_format: str = "json",
) -> dict[str, Path]:
    """Write the parquet file(s); returns {split name: path}. ``loader`` replaces ``datasets.load_dataset``."""
    # 1. Options, then the raw rows.
    check_options(
        agent_name=agent_name,
        split=split,
        limit=limit,
        val_size=val_size,
        data_source=data_source,
        tools=tools or (),
        tool_format=tool_format,
    )
    rows = read_rows(source, split=split, hf_config=hf_config, loader=loader)
    if limit is not None:
        rows = rows[:limit]
    # 2. Every bad row is reported; none is dropped silently.
    problems = find_problems(rows, source)
    if problems:
        message = report_problems(problems, len(rows), source)
        if not skip_bad_rows:
            raise SampleError(message + "; fix them or pass --skip-bad-rows to drop them")
        logger.warning("dropping bad rows: %s", message)
    bad = {index for index, _ in problems}
    indices = [index for index in range(len(rows)) if index not in bad]
    if val_size >= len(indices):
        raise ConfigError(f"--val-size {val_size}: only {len(indices)} usable rows; leave some for {split!r}")
    # 3. Seeded hold-out, then build and write each split in input order.
    held_out = set(random.Random(seed).sample(indices, val_size)) if val_size else set()
    if held_out and split == VAL_SPLIT:
        raise ConfigError(f"--split {split!r} is the name of the --val-size hold-out; pick another split name")
    splits = {split: [i for i in indices if i not in held_out]}
    if held_out:
        splits[VAL_SPLIT] = sorted(held_out)
    out_dir = Path(output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for name, chosen in splits.items():
        if not chosen:
            continue
        samples = [
            build_row(
                rows[i],
                index=i,
                split=name,
                tools=split_tools(tools, held_out=name == VAL_SPLIT),
                agent_name=agent_name,
                interaction=interaction,
                data_source=data_source,
                tool_format=tool_format,
            )
            for i in chosen
        ]
        written[name] = write_parquet(samples, out_dir / f"{name}.parquet")
        logger.info("wrote %d rows to %s", len(samples), written[name])
    return written


def split_tools(tools: Sequence[str] | None, *, held_out: bool) -> tuple[str, ...]:
    """The tools a split's samples offer: ``tools``, or by default all but, on held-out rows, the oracles."""
    if tools is not None:
        return tuple(tools)
    return tuple(name for name in DEFAULT_TOOLS if not (held_out and TOOLS[name].needs_ground_truth))


def write_parquet(samples: list[dict[str, Any]], path: Path) -> Path:
    """Write samples with pyarrow (schema inferred; nested dicts become structs)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(samples), path)
    return path


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line; see the module docstring."""
    parser = argparse.ArgumentParser(prog="python -m extensions.data.gsm8k", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--input",
        help=".jsonl/.json/.parquet file or Hugging Face dataset id "
        f"(default: ${GSM8K_DIR_ENV}/<split>.jsonl if set, else openai/gsm8k)",
    )
    parser.add_argument("--output-dir", required=True, help="directory for <split>.parquet (and test.parquet)")
    parser.add_argument("--agent-name", default="long_workflow", help="agent loop name for the agent_name column")
    parser.add_argument("--interaction", default=None, help="interaction name for interaction_kwargs (none if unset)")
    parser.add_argument("--split", default="train", help="split name: output file and extra_info.split")
    parser.add_argument("--limit", type=int, default=None, help="use only the first N input rows")
    parser.add_argument(
        "--tools",
        default=None,
        help=f"comma list from {choices(TOOLS)}; '' = none (default: all; held-out rows never get check_answer)",
    )
    parser.add_argument(
        "--tool-format",
        default="json",
        help=f"one of {choices(TOOL_FORMATS)}: how the system prompt describes the tools (code_fence: python_exec only)",
    )
    parser.add_argument("--val-size", type=int, default=0, help=f"hold out N random rows as {VAL_SPLIT}.parquet")
    parser.add_argument("--seed", type=int, default=0, help="seed of the --val-size hold-out")
    parser.add_argument("--data-source", default=LONGFLOW_GSM8K, help=f"one of {choices(DATA_SOURCES)}")
    parser.add_argument("--hf-config", default="main", help="Hugging Face dataset config (GSM8K: main)")
    parser.add_argument("--skip-bad-rows", action="store_true", help="drop rows without '#### <number>' (logged)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point: 0 on success, 2 on a reported input or option error."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    args = parse_args(argv)
    try:
        prepare(
            args.input or default_gsm8k_source(args.split),
            args.output_dir,
            agent_name=args.agent_name,
            interaction=args.interaction,
            split=args.split,
            limit=args.limit,
            tools=None if args.tools is None else parse_tools(args.tools),
            tool_format=args.tool_format,
            val_size=args.val_size,
            seed=args.seed,
            data_source=args.data_source,
            hf_config=args.hf_config or None,
            skip_bad_rows=args.skip_bad_rows,
        )
    except LongflowError as exc:
        logger.error("%s", exc)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
