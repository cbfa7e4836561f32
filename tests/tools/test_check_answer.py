"""check_answer: ground truth per instance, numeric comparison, exact rewards, limited attempts."""

from __future__ import annotations

import pytest

from extensions.errors import ConfigError
from extensions.tools.check_answer import CheckAnswerTool, check_answer


@pytest.mark.parametrize("answer", ["72", " 72 ", "72.0", "72.00", "$72", "72.", 72, 72.0, "**72**", "\\boxed{72}"])
def test_equal_numbers_match(answer: str | float) -> None:
    assert check_answer(answer, "72") is True


@pytest.mark.parametrize(("answer", "truth"), [("1000", "1,000"), ("$1,000.50", "1000.5"), (1e-05, "0.00001")])
def test_normalisation_applies_to_both_sides(answer: str | float, truth: str) -> None:
    assert check_answer(answer, truth) is True


@pytest.mark.parametrize("answer", ["73", "71.99", "seventy-two", "72 or 73", "", "-72"])
def test_other_answers_do_not_match(answer: str) -> None:
    assert check_answer(answer, "72") is False


def test_non_numeric_ground_truth_compares_text() -> None:
    assert check_answer("  paris ", "Paris") is True and check_answer("Lyon", "Paris") is False


async def execute(tool: CheckAnswerTool, instance_id: str, answer: object) -> tuple[str | None, float, dict]:
    response, reward, metrics = await tool.execute(instance_id, {"answer": answer})
    return response.text, reward, metrics


async def test_rewards_per_call_and_per_trajectory() -> None:
    tool = CheckAnswerTool({"type": "native"})
    right, _ = await tool.create(create_kwargs={"ground_truth": "72"})
    wrong, _ = await tool.create(create_kwargs={"ground_truth": 72})
    assert await execute(tool, right, "72.0") == ("correct", 1.0, {"correct": True, "attempts": 1})
    assert await execute(tool, wrong, "73") == ("incorrect", 0.0, {"correct": False, "attempts": 1})
    assert (await tool.calc_reward(right), await tool.calc_reward(wrong)) == (1.0, 0.0)
    assert await execute(tool, right, "72") == (
        "error: no attempts left (1 answer per problem)",
        0.0,
        {"error": "no_attempts_left", "attempts": 1},
    )
    await tool.release(right)
    assert await tool.calc_reward(right) == 0.0


async def test_more_attempts_say_how_many_are_left() -> None:
    tool = CheckAnswerTool({"type": "native", "max_attempts": 3})
    instance, _ = await tool.create(create_kwargs={"ground_truth": "1,000"})
    assert await execute(tool, instance, "seventy") == (
        "incorrect: 'seventy' is not a number (2 attempts left)",
        0.0,
        {"correct": False, "attempts": 1},
    )
    assert await execute(tool, instance, 999) == ("incorrect (1 attempt left)", 0.0, {"correct": False, "attempts": 2})
    assert await execute(tool, instance, "$1000") == ("correct", 1.0, {"correct": True, "attempts": 3})


async def test_missing_ground_truth_names_the_dataset_field() -> None:
    tool = CheckAnswerTool({"type": "native"})
    instance, _ = await tool.create(create_kwargs={})
    assert await execute(tool, instance, "72") == (
        "error: check_answer has no ground truth for this sample; "
        "the dataset must set tools_kwargs.check_answer.create_kwargs.ground_truth",
        0.0,
        {"error": "missing_ground_truth"},
    )


async def test_bad_arguments_do_not_use_an_attempt() -> None:
    tool = CheckAnswerTool({"type": "native"})
    instance, _ = await tool.create(create_kwargs={"ground_truth": "72"})
    response, reward, metrics = await tool.execute(instance, {"answer": True})
    assert (response.text, reward, metrics) == (
        "error: argument 'answer' must be number or string, got boolean. "
        "check_answer takes answer (number or string, required).",
        0.0,
        {"error": "bad_arguments"},
    )
    assert await execute(tool, instance, "72") == ("correct", 1.0, {"correct": True, "attempts": 1})


def test_schema_hides_the_ground_truth_and_config_is_checked() -> None:
    tool = CheckAnswerTool({"type": "native"})
    parameters = tool.tool_schema.function.parameters.model_dump(exclude_none=True)
    assert parameters == {
        "type": "object",
        "properties": {
            "answer": {
                "type": ["number", "string"],
                "description": 'Your final answer as a plain number, for example "72".',
            }
        },
        "required": ["answer"],
    }
    with pytest.raises(ConfigError, match=r"'max_attempts': Input should be greater than or equal to 1 \(got 0\)"):
        CheckAnswerTool({"type": "native", "max_attempts": 0})
