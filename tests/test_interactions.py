"""Interactions: the environment wrapper and code-verify, through the loop and directly."""

from __future__ import annotations

import pytest

from extensions.errors import ConfigError, SampleError
from extensions.interactions.code_verify import VERIFY_PROMPT, CodeVerifyInteraction
from extensions.interactions.environment import EnvironmentInteraction
from tests.conftest import ROOT, Row, register_loop, run_batch, sample
from tests.test_long_workflow import user_span_text


async def test_environment_drives_the_user_side(worker, tokenizer):
    loop = register_loop("lw_env", interaction_config_path=str(ROOT / "interaction_configs" / "guess_number.yaml"))
    ikwargs = {"name": "guess_number", "env_kwargs": {"secret": 42}}
    out = await run_batch(worker, {"GN": ["50", "42"]}, [sample("GN", loop, interaction_kwargs=ikwargs)])
    row = Row(out, 0)
    assert tokenizer.decode(row.prompt_ids).endswith(
        "<|im_start|>user\nGN<|im_end|>\n<|im_start|>user\nI picked an integer between 1 and 100. "
        "Guess it: answer with one number. You have 7 guesses.<|im_end|>\n<|im_start|>assistant\n"
    )
    user_turn = row.extras["turns"][1]
    assert tokenizer.decode(row.span(user_turn)[0]) == user_span_text("No, go lower.")
    assert row.turn_scores == [0.0, 1.0]
    assert row.reason == "interaction_done" and row.extras["turns"][-1]["text"] == "Correct!"


def test_environment_config_errors():
    with pytest.raises(ConfigError, match=r"lacks method\(s\) \['reset', 'step'\]"):
        EnvironmentInteraction({"env": "extensions.errors.ConfigError"})
    with pytest.raises(ConfigError, match="config.env_kwargs does not fit GuessNumberEnv: got an unexpected keyword"):
        EnvironmentInteraction({"env": "extensions.envs.guess_number.GuessNumberEnv", "env_kwargs": {"colour": 1}})


async def test_code_verify_asks_then_scores_then_ends():
    interaction = CodeVerifyInteraction({"name": "code_verify"})
    iid = await interaction.start_interaction(None, ground_truth="18")
    first = await interaction.generate_response(iid, [{"role": "assistant", "content": "<think>9*2</think>#### 17"}])
    assert first == (False, VERIFY_PROMPT, 0.0, {"answer": "17", "correct": False, "round": 0})
    second = await interaction.generate_response(iid, [{"role": "assistant", "content": "I was wrong. #### 18"}])
    assert second == (True, "Thank you.", 1.0, {"answer": "18", "correct": True, "round": 1})
    assert await interaction.calculate_score(iid) == 1.0
    await interaction.finalize_interaction(iid)


async def test_code_verify_needs_ground_truth():
    with pytest.raises(SampleError, match=r"needs interaction_kwargs.ground_truth .* has keys \['name'\]"):
        await CodeVerifyInteraction({}).start_interaction(None, name="code_verify")


class DuckUser:
    """A verl 0.7-style interaction that does not subclass the pack's BaseInteraction."""

    def __init__(self, config):
        self.config = config

    async def start_interaction(self, instance_id=None, **kwargs):
        return instance_id or "duck"

    async def opening_message(self, instance_id):
        return f"hello from {instance_id}"

    async def generate_response(self, instance_id, messages, **kwargs):
        return True, "bye", 1.0, {}

    async def finalize_interaction(self, instance_id=None, **kwargs):
        return None


async def test_a_duck_interaction_is_wrapped_into_the_base_contract():
    from extensions.interactions.base import BaseInteraction, DuckInteraction
    from extensions.interactions.registry import build_interactions

    entries = [{"name": "duck", "class_name": f"{__name__}.DuckUser", "config": {"x": 1}}]
    duck = build_interactions(entries, source="test")["duck"]
    assert isinstance(duck, DuckInteraction) and isinstance(duck, BaseInteraction)
    assert duck.uses_policy_server is False and duck.config == {"x": 1, "name": "duck"}
    assert await duck.start_interaction("r1") == "r1"
    assert await duck.opening_message("r1") == "hello from r1"
    assert await duck.generate_response("r1", []) == (True, "bye", 1.0, {})
    assert await duck.calculate_score("r1") == 0.0
