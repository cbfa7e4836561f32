"""GSM8K answer extraction: normalisation, strict vs flexible, thinking, last assistant turn."""

from __future__ import annotations

import pytest

from extensions.custom_rewards import compute_score
from extensions.rewards.gsm8k import extract_answer, extract_flexible, extract_strict, strip_thinking
from extensions.rewards.numbers import normalize_number
from extensions.rewards.trajectory import last_assistant_segment


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("72", "72"),
        ("1,000", "1000"),
        ("$1,000.00", "1000"),
        ("72.0", "72"),
        ("72.00", "72"),
        ("+5", "5"),
        ("-$5", "-5"),
        ("$-5", "-5"),
        ("\u22125", "-5"),
        ("**72**", "72"),
        ("\\boxed{72}", "72"),
        ("**\\boxed{$1,080}**", "1080"),
        ("72.", "72"),
        ("3.50", "3.5"),
        ("0.5", "0.5"),
        ("-0.0", "0"),
        ("  18 ", "18"),
        ("$ 5", "5"),
        ("- 5", "-5"),
    ],
)
def test_normalize_number(text: str, expected: str) -> None:
    assert normalize_number(text) == expected


@pytest.mark.parametrize("text", ["", "seventy", "72 apples", "7 2", "1 000", "1/2", "7.2.1", "$", "--5", "\\boxed{}"])
def test_normalize_number_rejects(text: str) -> None:
    assert normalize_number(text) is None


def test_strict_needs_a_hash_line_and_takes_the_last() -> None:
    assert extract_strict("First #### 5 inline\nso the answer is 72") is None
    assert extract_strict("#### 5\nOn second thought:\n#### 72") == "72"
    assert extract_strict("Work.\n  **#### $1,234.00**  ") == "1234"
    assert extract_strict("#### about 72") is None
    assert extract_strict("no answer") is None


def test_flexible_takes_the_last_number() -> None:
    assert extract_flexible("I got 12, then 6, so 72 muffins.") == "72"
    assert extract_flexible("Total: $1,250.50 and that's it") == "1250.5"
    assert extract_flexible("5-3 = 2") == "2"
    assert extract_flexible("step 1: 3,4,5 triangle") == "5"
    assert extract_flexible("x2 is a name; the answer is \\boxed{-7}") == "-7"
    assert extract_flexible("nothing here") is None


def test_strict_and_flexible_differ_on_the_same_text() -> None:
    text = "The answer is 72"
    assert compute_score("openai/gsm8k", text, "72", mode="strict")["score"] == 0.0
    assert compute_score("openai/gsm8k", text, "72", mode="flexible")["score"] == 1.0


def test_strip_thinking() -> None:
    assert strip_thinking("<think>maybe 5</think>So 72") == "So 72"
    assert strip_thinking("a<think>b</think>c<think>d</think>e") == "ace"
    assert strip_thinking("So 72<think>unfinished 9") == "So 72"
    assert strip_thinking("opened by the template 9</think>#### 72") == "#### 72"
    assert strip_thinking("plain") == "plain"


def test_numbers_inside_thinking_are_ignored() -> None:
    assert extract_answer("<think>#### 72</think>I am not sure.", "strict") is None
    assert extract_answer("<think>it is 72</think>I am not sure.", "flexible") is None
    assert extract_answer("The answer:\n#### 5\n<think>or #### 72", "strict") == "5"
    assert compute_score("openai/gsm8k", "<think>\n#### 72\n</think>\n#### 71", "72")["score"] == 0.0


def test_last_assistant_segment_skip_special_spelling() -> None:
    response = (
        "<think>t</think>Let me check.\n<tool_call>\n{}\n</tool_call>\nuser\n<tool_response>\n#### 99\n"
        "</tool_response>\nassistant\nSo:\n#### 72\n"
    )
    assert last_assistant_segment(response) == "So:\n#### 72"


def test_last_assistant_segment_special_tokens_kept() -> None:
    response = "A\n#### 1<|im_end|>\n<|im_start|>user\nCheck it<|im_end|>\n<|im_start|>assistant\n#### 2<|im_end|>"
    assert last_assistant_segment(response) == "#### 2"


def test_last_assistant_segment_when_the_response_ends_on_a_tool_turn() -> None:
    response = "I think\n#### 7\n<tool_call>{}</tool_call>\nuser\n<tool_response>\n#### 8\n</tool_response>\n"
    assert last_assistant_segment(response) == "I think\n#### 7\n<tool_call>{}</tool_call>"


def test_single_turn_response_is_one_segment() -> None:
    assert last_assistant_segment("#### 72<|im_end|>") == "#### 72"


def test_final_answer_text_beats_solution_str() -> None:
    extra_info = {"extras": {"final_answer_text": "<think>#### 1</think>#### 72"}}
    result = compute_score("openai/gsm8k", "whole transcript\n#### 1", "72", extra_info)
    assert (result["acc"], result["answer_found"]) == (1.0, 1.0)
    empty_final = {"extras": {"final_answer_text": ""}}
    result = compute_score("openai/gsm8k", "#### 72", "72", empty_final)
    assert (result["acc"], result["answer_found"]) == (0.0, 0.0)
