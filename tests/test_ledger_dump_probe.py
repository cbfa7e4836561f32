"""experiments/ledger_folding/analysis/ledger_dump_probe.py: a training-rollout dump's text back to the chat template's, and its decision point."""

from __future__ import annotations

import json

from transformers import AutoTokenizer

from tests.scripts import LEDGER_ANALYSIS, load_script

PAGE = (
    "<tool_response>\nLedger page {k} of 30\nT1 | 5 |{flag}\nEnd of page {k} of 30. If the DISPUTED transaction is on "
    "this page, call submit_answer with its amount; if not, call read_page with page {n}.\n</tool_response>"
)


def call(name: str, args: dict) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': args})}\n</tool_call>"


def test_the_dumps_text_gets_its_chat_markers_back_and_the_decision_after_the_flag_is_found(qwen_dir) -> None:
    probe = load_script("ledger_dump_probe", LEDGER_ANALYSIS)
    tok = AutoTokenizer.from_pretrained(qwen_dir)
    messages = [
        {"role": "system", "content": "You are a careful bookkeeper."},
        {"role": "user", "content": "The ledger has 30 pages."},
        {"role": "assistant", "content": call("read_page", {"page": 1})},
        {"role": "user", "content": PAGE.format(k=1, n=2, flag="")},
        {"role": "assistant", "content": call("read_page", {"page": 2})},
        {"role": "user", "content": PAGE.format(k=2, n=3, flag=" DISPUTED")},
        {"role": "assistant", "content": call("read_page", {"page": 3})},
    ]
    prompt = tok.apply_chat_template(messages[:2], add_generation_prompt=True, tokenize=False)
    whole = tok.apply_chat_template(messages, tokenize=False)
    assert whole.startswith(prompt)

    def dumped(text: str) -> str:  # what verl's rollout dump writes: the tokens decoded without special tokens
        return tok.decode(tok.encode(text, add_special_tokens=False), skip_special_tokens=True)

    row = {"uid": "u_0_0", "input": dumped(prompt), "output": dumped(whole[len(prompt) :])}
    assert "<|im_start|>" not in row["input"] + row["output"]
    assert probe.with_markers(row["input"]) == prompt
    text, chosen = probe.decision_point([row])
    cut = whole.index("<|im_start|>assistant\n", whole.index("| DISPUTED")) + len("<|im_start|>assistant\n")
    assert text == whole[:cut] + '<tool_call>\n{"name": "'
    assert chosen == "read"
    assert probe.decision_point([{**row, "output": row["output"].replace("| DISPUTED", "|")}]) is None
