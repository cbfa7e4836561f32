"""experiments/rescore/rescore.py: every kind of committed dump, rescored with the current rules, exact outputs."""

from __future__ import annotations

import gzip
import json
import lzma
from pathlib import Path

from experiments.rescore.rescore import main
from tests.scripts import write_val_dumps

TERMS = ("error", "final_answer", "max_segments", "response_budget")


def val_row(uid: str, output: str, gts: str, acc: float, reason: str = "final_answer") -> dict:
    return {"input": "system\n...", "output": output, "gts": gts, "score": acc, "acc": acc, "uid": uid} | {
        f"term_{name}": float(name == reason) for name in TERMS
    }


def record(index: int, last: dict, truth: str, acc: float, reason: str = "final_answer") -> dict:
    return {
        "schema": "verl-longflow/trajectory/v1",
        "index": index,
        "data_source": "longflow/ledger",
        "ground_truth": truth,
        "turns": [{"role": "assistant", "text": "reading", "tool_calls": [{"name": "read_page"}]}, last],
        "termination_reason": reason,
        "reward_extra_info": {"acc": acc},
    }


def test_rescoring_every_kind_of_dump(tmp_path: Path) -> None:
    results = tmp_path / "results"
    # a ledger training run's validation dump: a folded trajectory (2 segment rows), a submitted answer, a cut-off
    ledger = [
        val_row("a_0_0", "page 1 says 5", "7", 1.0, "folded"),
        val_row(
            "a_0_1",
            'x\nassistant\n<tool_call>\n{"name": "submit_answer", "arguments": {"answer": 7}}\n</tool_call>',
            "7",
            1.0,
        ),
        val_row("b_0_0", "so far 7 and\n#### 7", "7", 1.0, "response_budget"),
        val_row("c_0_0", 'asked\n<tool_call>\n{"name": "read_page", "arguments": {"page": 7}}\n</tool_call>', "7", 1.0),
    ]
    (results / "ledger-run" / "fold_grpo").mkdir(parents=True)
    with lzma.open(results / "ledger-run" / "fold_grpo" / "val_step30.jsonl.xz", "wt") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in ledger)
    # a GSM8K A/B arm's val.tar.gz: a boxed answer, a number only in code, an identifier, a cut-off reply
    gsm8k = [
        val_row("d_0_0", "So \\boxed{18} dollars, at 2 an hour", "18", 0.0),
        val_row("e_0_0", "```python\nprint(6*7)\n```\n```output\n42\n```\nDone.", "42", 1.0),
        val_row("f_0_0", "so the total is in 20_hours", "20", 1.0),
        val_row("g_0_0", "total = 5\ncost = 5 *", "5", 1.0, "response_budget"),
        val_row("h_0_0", "So 9 apples.\n#### 9", "9", 1.0),
    ]
    write_val_dumps(results / "gsm8k-ab" / "tools", {40: gsm8k})
    # a run scored in training by the current rules (they reproduce 3 of its 4 verdicts, the old last-number rule 0):
    # only the row the current rules do not reproduce is flagged
    current = [
        val_row("i_0_0", "#### 7\nThat is 7 apples, not 8.", "7", 1.0),
        val_row("j_0_0", "so 7 and", "7", 0.0, "response_budget"),
        val_row("k_0_0", "#### 7\nNot 3.", "7", 1.0),
        val_row("l_0_0", "#### 5", "7", 1.0),
    ]
    write_val_dumps(results / "gsm8k-new" / "tools", {10: current})
    # a rollout CLI file: a submit_answer call, a reply with its answer in inline code
    records = [
        record(
            0,
            {"role": "assistant", "text": "x", "tool_calls": [{"name": "submit_answer", "arguments": '{"answer": 3}'}]},
            "3",
            1.0,
        ),
        record(1, {"role": "assistant", "text": "It is `3`.<|im_end|>", "tool_calls": []}, "3", 1.0),
    ]
    (results / "ledger-cpu").mkdir()
    with gzip.open(results / "ledger-cpu" / "trajectories.jsonl.gz", "wt") as handle:
        handle.writelines(json.dumps(r) + "\n" for r in records)
    (results / "ledger-run" / "fold_grpo" / "rollouts").mkdir()  # training rollouts are left out
    (results / "ledger-run" / "fold_grpo" / "rollouts" / "1.jsonl").write_text("not read\n")

    assert main(["--results", str(results)]) == 0
    table = (results / "rescoring.md").read_text().split("|---|---|---|---|---|\n")[1]
    assert table == (
        "| gsm8k-ab | [tools/val.tar.gz:val/40.jsonl](rescoring/gsm8k-ab__tools_val.tar.gz_val_40.jsonl.csv) | "
        "4/5 (0.8000) | 2/5 (0.4000) | 1 an answer form reads another number; 1 ended on response_budget: no answer; "
        "1 the number was inside a code or output block; 1 the number was part of an identifier |\n"
        "| gsm8k-new | [tools/val.tar.gz:val/10.jsonl](rescoring/gsm8k-new__tools_val.tar.gz_val_10.jsonl.csv) | "
        "3/4 (0.7500) | 2/4 (0.5000) | 1 a later answer form reads another number; recorded verdict not reproduced "
        "from the dumped text |\n"
        "| ledger-cpu | [trajectories.jsonl.gz](rescoring/ledger-cpu__trajectories.jsonl.gz.csv) | 2/2 (1.0000) | "
        "1/2 (0.5000) | 1 the number was inside a code or output block |\n"
        "| ledger-run | [fold_grpo/val_step30.jsonl.xz](rescoring/ledger-run__fold_grpo_val_step30.jsonl.xz.csv) | "
        "3/3 (1.0000) | 1/3 (0.3333) | 1 ended on response_budget: no answer; 1 the last turn asked for a tool: no "
        "answer text; recorded verdict not reproduced from the dumped text |\n"
    )
    assert (results / "rescoring" / "ledger-run__fold_grpo_val_step30.jsonl.xz.csv").read_text() == (
        "key,ground_truth,termination_reason,old_acc,new_acc,new_strict_acc,new_answer,why\n"
        "a_0,7,final_answer,1.0,1.0,1.0,7,\n"
        "b_0,7,response_budget,1.0,0.0,0.0,,ended on response_budget: no answer\n"
        "c_0,7,final_answer,1.0,0.0,0.0,,the last turn asked for a tool: no answer text; recorded verdict not "
        "reproduced from the dumped text\n"
    )
    assert sorted(p.name for p in (results / "rescoring").iterdir()) == [
        "gsm8k-ab__tools_val.tar.gz_val_40.jsonl.csv",
        "gsm8k-new__tools_val.tar.gz_val_10.jsonl.csv",
        "ledger-cpu__trajectories.jsonl.gz.csv",
        "ledger-run__fold_grpo_val_step30.jsonl.xz.csv",
    ]
