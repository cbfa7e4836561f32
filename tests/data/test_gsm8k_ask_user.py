"""The ask-user task's data: one quantity removed by rule, checked, and given to the user as a fact."""

from __future__ import annotations

import json
import os
from fractions import Fraction
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from omegaconf import OmegaConf
from verl.utils.dataset.rl_dataset import RLHFDataset

from extensions.data.gsm8k import ground_truth_of
from extensions.data.gsm8k_ask_user import ASK_LINE, prepare
from extensions.data.masking import _QUANTITY as QUANTITY
from extensions.data.masking import Masked, depends_on, mask_quantity
from extensions.data.prompts import system_prompt

ROOT = Path(__file__).resolve().parents[2]
GSM8K_DIR = Path(os.environ.get("LONGFLOW_GSM8K_DIR", ROOT.parent / "shared" / "data" / "gsm8k"))


def test_first_used_quantity_is_removed_and_its_sentence_is_the_fact():
    question = "A baker fills 6 trays with 12 muffins each. How many muffins does she bake?"
    assert mask_quantity(question, "6 trays * 12 = <<6*12=72>>72 muffins.\n#### 72", "72") == Masked(
        question="A baker fills some trays with 12 muffins each. How many muffins does she bake?",
        fact="A baker fills 6 trays with 12 muffins each.",
        value="6",
        text="6",
        replacement="some",
    )


@pytest.mark.parametrize(
    ("question", "answer", "final", "masked_question", "value"),
    [
        (  # a repeated value gives itself away: the next quantity is taken
            "James runs 3 sprints 3 times a week. He runs 60 meters each sprint. How far does he run?",
            "<<3*3=9>>9 sprints; <<9*60=540>>540\n#### 540",
            "540",
            "James runs 3 sprints 3 times a week. He runs some meters each sprint. How far does he run?",
            "60",
        ),
        (  # a year the solution does not use is skipped; $ with thousands commas
            "In 2019 Tom had $1,250 and spent $250. How many dollars are left?",
            "1,250 - 250 = <<1250-250=1000>>1000\n#### 1,000",
            "1000",
            "In 2019 Tom had a certain amount and spent $250. How many dollars are left?",
            "1250",
        ),
        (
            "A shirt costs $40 and is 25% off. What does it cost now?",
            "<<40*25/100=10>>10 off, <<40-10=30>>30\n#### 30",
            "30",
            "A shirt costs a certain amount and is 25% off. What does it cost now?",
            "40",
        ),
        (
            "Carla downloads a 200 GB file at 2 GB/minute. How many minutes does it take?",
            "<<200/2=100>>100\n#### 100",
            "100",
            "Carla downloads a certain GB file at 2 GB/minute. How many minutes does it take?",
            "200",
        ),
        (  # at the start of a sentence
            "Bo has 4 pens. 7 pencils are in his bag. How many does he have?",
            "<<4+7=11>>11\n#### 11",
            "11",
            "Bo has some pens. 7 pencils are in his bag. How many does he have?",
            "4",
        ),
    ],
)
def test_masking_rule(question: str, answer: str, final: str, masked_question: str, value: str):
    masked = mask_quantity(question, answer, final)
    assert masked is not None and (masked.question, masked.value) == (masked_question, value)


def test_a_quantity_the_answer_does_not_depend_on_is_never_removed():
    # 7 cancels out (7 - 7 + 3): changing it leaves the answer, so the problem stays solvable without it
    assert not depends_on("<<7-7+3=3>>3\n#### 3", Fraction(7), Fraction(3))
    masked = mask_quantity("Ann has 7 boxes of 0 pens and 3 pens.", "<<7*0+3=3>>3\n#### 3", "3")
    assert masked is not None and masked.value == "0"  # 7 is skipped: the answer does not depend on it
    # no <<...>> arithmetic: nothing can be checked, nothing is removed
    assert mask_quantity("Ann has 5 apples and 4 pears.", "5 + 4 = 9\n#### 9", "9") is None


def test_prepare_writes_four_variants_of_the_same_problems(tmp_path: Path, problems_jsonl: str, qwen_tokenizer: Any):
    report = prepare(problems_jsonl, tmp_path)
    assert {k: report[k] for k in ("problems", "no_quantity", "bad_rows")} == {
        "problems": 3,
        "no_quantity": 0,
        "bad_rows": 0,
    }
    names = ("ask_user", "full", "masked", "ask_hinted")
    rows = {name: pq.read_table(tmp_path / f"{name}.parquet").to_pylist() for name in names}
    ask, full, masked, hinted = (rows[n][0] for n in names)
    original = "A baker fills 6 trays with 12 muffins each. How many muffins does she bake?"
    hidden = "A baker fills some trays with 12 muffins each. How many muffins does she bake?"
    assert ask["prompt"] == [
        {"role": "system", "content": system_prompt(["python_exec"]) + "\n" + ASK_LINE},
        {"role": "user", "content": hidden},
    ]
    assert ask["extra_info"]["interaction_kwargs"] == {
        "name": "llm_user",
        "ground_truth": "72",
        "user_facts": ["A baker fills 6 trays with 12 muffins each."],
    }
    assert full["prompt"][1]["content"] == original and masked["prompt"][1]["content"] == hidden
    assert hinted["prompt"] == [
        ask["prompt"][0],
        {"role": "user", "content": hidden + "\n\nOne number you need is missing from this problem. Ask me for it "
         "before you solve it."},
    ]  # fmt: skip
    assert hinted["extra_info"]["interaction_kwargs"] == ask["extra_info"]["interaction_kwargs"]
    assert full["prompt"][0]["content"] == masked["prompt"][0]["content"] == system_prompt(["python_exec"])
    assert "interaction_kwargs" not in full["extra_info"] and "interaction_kwargs" not in masked["extra_info"]
    assert ask["reward_model"] == full["reward_model"] == {"style": "rule", "ground_truth": "72"}
    assert ask["extra_info"]["masking"]["removed_text"] == "6"
    assert [r["extra_info"]["index"] for r in rows["ask_user"]] == [r["extra_info"]["index"] for r in rows["full"]]
    # verl's RLHFDataset hands the interaction kwargs to the agent loop
    config = OmegaConf.create(
        {"prompt_key": "prompt", "filter_overlong_prompts": False, "cache_dir": str(tmp_path / "c")}
    )
    item = RLHFDataset(data_files=str(tmp_path / "ask_user.parquet"), tokenizer=qwen_tokenizer, config=config)[0]
    assert list(item["interaction_kwargs"]["user_facts"]) == ["A baker fills 6 trays with 12 muffins each."]
    assert item["raw_prompt"][1]["content"] == hidden


@pytest.mark.skipif(not (GSM8K_DIR / "test.jsonl").is_file(), reason="GSM8K not found (set LONGFLOW_GSM8K_DIR)")
def test_on_gsm8k_test_every_removed_value_is_gone_and_needed():
    rows = [json.loads(line) for line in (GSM8K_DIR / "test.jsonl").read_text().splitlines()]
    kept = 0
    for row in rows:
        truth, _ = ground_truth_of(row["answer"])
        masked = mask_quantity(row["question"], row["answer"], truth)
        if masked is None:
            continue
        kept += 1
        left = [Fraction(m.group(2).replace(",", "") + (m.group(3) or "")) for m in QUANTITY.finditer(masked.question)]
        assert Fraction(masked.value) not in left
        assert masked.fact in row["question"] and masked.text in masked.fact
        assert depends_on(row["answer"], Fraction(masked.value), Fraction(truth))
    assert (kept, len(rows)) == (1135, 1319)
