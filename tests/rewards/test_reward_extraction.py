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


def test_strict_needs_an_answer_form_and_takes_the_last() -> None:
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


# Each case the issue (41) lists, and the rule behind it: exact answers.
@pytest.mark.parametrize(
    ("text", "strict", "flexible"),
    [
        # the model ends with \boxed{N} far more often than with the prompt's #### line
        ("So she earns $18 a day.\n\n\\boxed{18}", "18", "18"),
        ("The total is \\(\\boxed{1,080}\\) dollars.", "1080", "1080"),
        ("\\[\n\\boxed{\\$72}\n\\]", "72", "72"),
        ("\\boxed{\\frac{7}{2}}", "3.5", "3.5"),
        ("\\boxed{\\frac{1}{3}}", "1/3", "1/3"),
        ("\\boxed{72 \\text{ apples}}", "72", "72"),
        ("\\boxed{x = 5}", None, None),  # an answer form that is not one number: no answer
        ("First \\boxed{5}, but then \\boxed{6}.", "6", "6"),
        ("#### 5\nChecking: \\boxed{6}", "6", "6"),  # the last answer form wins, whichever kind
        ("\\boxed{6}\n#### 7", "7", "7"),
        ("unclosed \\boxed{72", None, None),  # a box that never closes holds no number
        # the prompt's own example copied mid-reply, in backticks, is inline code: never the answer
        ("The format is `#### 72`. We get 3 + 4 = 7 apples.", None, "7"),
        ("The format is `#### 72`.\n#### 7", "7", "7"),
        # digits inside identifiers are never the answer
        ("so hours_after_20_hours is the total", None, None),
        ("x2 and v1.5b are names", None, None),
        ("with 5 apples, apples_5x", None, "5"),
        # a number inside a code block or an output block is never the answer
        ("Let me compute.\n```python\nprint(6 * 7)\n```\n```output\n42\n```\nDone.", None, None),
        ("```python\nx = sp.Eq(R + 9, 6 * S)\n```\nThe answer is 12.", None, "12"),
        ("The answer is 12.\n```python\ntotal = 20\nprint(total)\n```", None, "12"),
        ('```python\nprint("#### 9")\n```\n#### 8', "8", "8"),
        # inline code too
        ("Using `sp.Eq(R + 9, 6 * S)` we solve it.", None, None),
        # an unclosed fence (a reply cut off inside code) hides everything after it
        ("It is 5 apples.\n```python\nhours = 20\nrate = 3", None, "5"),
        ("```python\nprint(7)\n```\n```output\n7", None, None),
    ],
)
def test_issue_41_cases(text: str, strict: str | None, flexible: str | None) -> None:
    assert (extract_strict(text), extract_flexible(text)) == (strict, flexible)


@pytest.mark.parametrize("reason", ["response_budget", "error"])
def test_a_reply_that_ended_on_the_budget_or_an_error_has_no_answer(reason: str) -> None:
    text = "So far 6 * 12 = 72, and\n#### 72"
    assert extract_answer(text, "flexible", reason) is None and extract_answer(text, "strict", reason) is None
    assert extract_answer(text, "strict", "final_answer") == "72"
    info = {"extras": {"termination_reason": reason, "final_answer_text": text}}
    result = compute_score("longflow/gsm8k", "", "72", info, mode="flexible")
    assert (result["acc"], result["answer_found"], result["outcome"]) == (0.0, 0.0, 0.0)


def test_the_ledger_answer_follows_the_same_rules() -> None:
    def score(text: str, reason: str = "final_answer") -> tuple[float, float]:
        info = {"extras": {"termination_reason": reason, "final_answer_text": text}}
        result = compute_score("longflow/ledger", "", "1268", info, mode="flexible")
        return result["acc"], result["answer_found"]

    assert score("The balance is 1268.\n#### 1268") == (1.0, 1.0)
    assert score("\\boxed{1268}") == (1.0, 1.0)
    assert score("#### 1268", "response_budget") == (0.0, 0.0)
    assert score("#### 1268", "max_segments") == (1.0, 1.0)  # a fold was wanted and none was left: not cut off
    assert score('`{"page": 1268}` next') == (0.0, 0.0)
    assert score("```\nbalance = 1268\n```") == (0.0, 0.0)


def test_the_gsm8k_prompt_asks_for_the_forms_the_reward_reads() -> None:
    from extensions.data.prompts import system_prompt

    line = system_prompt(()).splitlines()[-1]
    assert line == (
        "When you are done, write the final answer on its own last line as #### followed by the number (a "
        "\\boxed{} number is read too): the number only, without units or words, and outside any code block."
    )
    assert "72" not in line  # no example number to copy
    assert extract_strict("Work.\n#### 42") == "42" and extract_strict("Work.\n\\boxed{42}") == "42"


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
