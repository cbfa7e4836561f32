"""GSM8K where one given quantity is missing and only the (simulated) user knows it: verl-ready parquet.

    python -m extensions.data.gsm8k_ask_user --input "$LONGFLOW_GSM8K_DIR/test.jsonl" \\
        --output-dir outputs/data/gsm8k_ask_user --limit 256

From each GSM8K row, ``extensions.data.masking`` removes one quantity by rule (checked so the
answer depends on it) and the removed sentence becomes the user's private fact. Rows where no
quantity passes the checks are left out and counted. Three files of the same problems, in order:

- ``ask_user.parquet``: the masked question; the system prompt allows asking the user;
  ``interaction_kwargs = {name: llm_user, ground_truth, user_facts: [<sentence with the number>]}``.
- ``full.parquet``: the original question, no user (the accuracy without a user).
- ``masked.parquet``: the masked question, no user (a control: the problem cannot be solved).
- ``ask_hinted.parquet``: as ``ask_user``, and the question itself says a number is missing and
  asks to be asked (``HINT_LINE``): what the 0.5B model, which does not ask on ``ask_user``, needs.

Tools: ``python_exec`` only. Columns are those of ``extensions.data.gsm8k`` (``data_source``
``longflow/gsm8k``, scored by ``extensions/custom_rewards.py``), with ``extra_info.masking``
holding the removed text, its value, its replacement, the fact and the original question.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from extensions.data.gsm8k import build_row, find_problems, ground_truth_of, report_problems, write_parquet
from extensions.data.masking import Masked, mask_quantity
from extensions.data.prompts import system_prompt
from extensions.data.sources import read_rows
from extensions.errors import ConfigError, LongflowError, SampleError
from extensions.rewards.gsm8k import LONGFLOW_GSM8K

logger = logging.getLogger(__name__)

TOOLS = ("python_exec",)
VARIANTS = ("ask_user", "full", "masked", "ask_hinted")
INTERACTION = "llm_user"
ASK_LINE = (
    "The problem may leave out a number you need. Then do not guess: ask the user one short question "
    "about it and wait for the answer (write no #### line in that message)."
)

HINT_LINE = "One number you need is missing from this problem. Ask me for it before you solve it."


def ask_system_prompt() -> str:
    """The agent's system prompt when a user can be asked."""
    return system_prompt(TOOLS) + "\n" + ASK_LINE


def build_variants(row: dict[str, Any], masked: Masked, *, index: int, split: str, agent_name: str) -> dict[str, Any]:
    """The samples (ask_user, full, masked, ask_hinted) of one problem."""
    base = build_row(
        row, index=index, split=split, tools=TOOLS, agent_name=agent_name, interaction=None, data_source=LONGFLOW_GSM8K
    )
    truth = base["reward_model"]["ground_truth"]
    masking = {
        "removed_text": masked.text,
        "removed_value": masked.value,
        "replacement": masked.replacement,
        "fact": masked.fact,
        "original_question": base["extra_info"]["question"],
    }

    def variant(question: str, system: str, interaction_kwargs: dict[str, Any] | None) -> dict[str, Any]:
        extra_info = {**base["extra_info"], "question": question, "masking": masking}
        if interaction_kwargs:
            extra_info["interaction_kwargs"] = interaction_kwargs
        prompt = [{"role": "system", "content": system}, {"role": "user", "content": question}]
        return {**base, "prompt": prompt, "extra_info": extra_info}

    plain = system_prompt(TOOLS)
    user = {"name": INTERACTION, "ground_truth": truth, "user_facts": [masked.fact]}
    return {
        "ask_user": variant(masked.question, ask_system_prompt(), user),
        "full": variant(base["extra_info"]["question"], plain, None),
        "masked": variant(masked.question, plain, None),
        "ask_hinted": variant(masked.question + "\n\n" + HINT_LINE, ask_system_prompt(), user),
    }


def prepare(
    source: str,
    output_dir: str | Path,
    *,
    split: str = "test",
    limit: int | None = None,
    agent_name: str = "long_workflow",
    hf_config: str | None = "main",
    skip_bad_rows: bool = False,
    loader: Callable[..., Any] | None = None,
) -> dict[str, Any]:
    """Write ``<output_dir>/{ask_user,full,masked,ask_hinted}.parquet``; returns counts and the written paths."""
    if limit is not None and limit < 1:
        raise ConfigError(f"--limit {limit}: must be at least 1")
    rows = read_rows(source, split=split, hf_config=hf_config, loader=loader)
    problems = find_problems(rows, source)
    if problems:
        message = report_problems(problems, len(rows), source)
        if not skip_bad_rows:
            raise SampleError(message + "; fix them or pass --skip-bad-rows to drop them")
        logger.warning("dropping bad rows: %s", message)
    bad = {index for index, _ in problems}
    samples: dict[str, list[dict[str, Any]]] = {name: [] for name in VARIANTS}
    no_quantity = []
    for index, row in enumerate(rows):
        if index in bad:
            continue
        if limit is not None and len(samples["ask_user"]) >= limit:
            break
        truth, _ = ground_truth_of(row["answer"])
        masked = mask_quantity(row["question"].strip(), row["answer"], truth)
        if masked is None:
            no_quantity.append(index)
            continue
        for name, sample in build_variants(row, masked, index=index, split=split, agent_name=agent_name).items():
            samples[name].append(sample)
    if not samples["ask_user"]:
        raise SampleError(f"{source}: no row has a quantity that can be removed by the rule (of {len(rows)} rows)")
    out_dir = Path(output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = {name: str(write_parquet(rows_, out_dir / f"{name}.parquet")) for name, rows_ in samples.items()}
    report = {"problems": len(samples["ask_user"]), "no_quantity": len(no_quantity), "bad_rows": len(bad)}
    logger.info("wrote %s; %s (rows without a removable quantity: %s)", written, report, no_quantity[:10])
    return {**report, "written": written}


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point: 0 on success, 2 on a reported input or option error."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    parser = argparse.ArgumentParser(
        prog="python -m extensions.data.gsm8k_ask_user", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--input", required=True, help=".jsonl/.json/.parquet file or Hugging Face dataset id")
    parser.add_argument("--output-dir", required=True, help="directory for ask_user/full/masked.parquet")
    parser.add_argument("--split", default="test", help="split to read from a dataset id; extra_info.split")
    parser.add_argument("--limit", type=int, default=None, help="stop after N usable problems")
    parser.add_argument("--agent-name", default="long_workflow", help="agent loop for the agent_name column")
    parser.add_argument("--hf-config", default="main", help="Hugging Face dataset config (GSM8K: main)")
    parser.add_argument("--skip-bad-rows", action="store_true", help="drop rows without '#### <number>' (logged)")
    args = parser.parse_args(argv)
    try:
        report = prepare(
            args.input,
            args.output_dir,
            split=args.split,
            limit=args.limit,
            agent_name=args.agent_name,
            hf_config=args.hf_config or None,
            skip_bad_rows=args.skip_bad_rows,
        )
    except LongflowError as exc:
        logger.error("%s", exc)
        return 2
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
