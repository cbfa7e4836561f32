"""SGLang cannot apply stop strings with skip_tokenizer_init=true (its scheduler died on the GPU,
docs/results/sglang-h100/): the composed-config check, the agent loop at start-up and the rollout
driver each deal with it before any model loads."""

from __future__ import annotations

from typing import Any

import pytest

from extensions.config_check import check_composed
from extensions.errors import ConfigError
from tests.conftest import ROOT, build_worker, register_loop, run_batch, sample
from tests.test_experiment_configs_validate import composed

FENCE_PROBLEM = (
    "gsm8k_learn: agent loop 'long_workflow': code-fence tool calls (tool_parser: code_fence) pause at closing "
    "fences, so its generations send stop strings, which SGLang cannot apply with "
    "actor_rollout_ref.rollout.skip_tokenizer_init=true (its scheduler has no tokenizer and dies on the first "
    "one: AttributeError: 'NoneType' object has no attribute 'decode'); set "
    "actor_rollout_ref.rollout.skip_tokenizer_init=false"
)


def test_a_code_fence_experiment_on_sglang_with_verl_default_is_a_config_problem() -> None:
    cfg = composed("gsm8k_learn", "actor_rollout_ref.rollout.name=sglang")
    assert cfg.actor_rollout_ref.rollout.skip_tokenizer_init is True  # verl's default
    assert check_composed(cfg, "gsm8k_learn") == [FENCE_PROBLEM]


@pytest.mark.parametrize(
    "overrides",
    [
        ["actor_rollout_ref.rollout.name=sglang", "actor_rollout_ref.rollout.skip_tokenizer_init=false"],
        ["actor_rollout_ref.rollout.name=vllm"],
    ],
)
def test_code_fences_pass_where_the_engine_can_apply_stop_strings(overrides: list[str]) -> None:
    assert check_composed(composed("gsm8k_learn", *overrides), "gsm8k_learn") == []


def test_a_json_tool_format_on_sglang_is_no_problem() -> None:
    # gsm8k_code_verify's long_workflow uses hermes tool calls: no stop strings
    assert check_composed(composed("gsm8k_code_verify", "actor_rollout_ref.rollout.name=sglang"), "x") == []


SGLANG = ("actor_rollout_ref.rollout.name=sglang",)  # verl's default skip_tokenizer_init: true


@pytest.fixture(scope="module")
def sglang_worker(qwen_dir: Any) -> Any:
    """The code-fence experiment's worker, its config naming SGLang (no server: the loop fails at construction)."""
    learn = ROOT / "experiments" / "gsm8k_learn"
    return build_worker(
        qwen_dir, tools=learn / "tools.yaml", agent_loops=learn / "agent_loops.yaml", tool_format="auto",
        overrides=SGLANG,
    )  # fmt: skip


async def _construction_error(worker: Any, loop: str) -> ConfigError:
    with pytest.raises(Exception) as err:
        await run_batch(worker, {"E": ["never generated"]}, [sample("E", loop)])
    assert isinstance(err.value.__cause__, ConfigError)  # hydra wraps what the constructor raised
    return err.value.__cause__


async def test_a_code_fence_loop_refuses_to_start_on_sglang_without_its_tokenizer(sglang_worker) -> None:
    loop = register_loop("er_fence", tool_parser="code_fence", interaction_config_path=None)
    err = await _construction_error(sglang_worker, loop)
    assert str(err) == FENCE_PROBLEM.replace("gsm8k_learn: agent loop 'long_workflow'", "agent loop 'er_fence'")


async def test_a_policy_played_user_refuses_to_start_on_sglang_without_its_tokenizer(sglang_worker) -> None:
    path = str(ROOT / "experiments" / "gsm8k_ask_user" / "interactions.yaml")
    loop = register_loop("er_user", interaction_config_path=path)
    err = await _construction_error(sglang_worker, loop)
    assert str(err) == (
        "agent loop 'er_user', interaction 'llm_user': the policy-played user (backend: policy) stops at a turn "
        "marker written as text, so its replies send stop strings, which SGLang cannot apply with "
        "actor_rollout_ref.rollout.skip_tokenizer_init=true (its scheduler has no tokenizer and dies on the first "
        "one: AttributeError: 'NoneType' object has no attribute 'decode'); set "
        "actor_rollout_ref.rollout.skip_tokenizer_init=false"
    )


async def test_a_loop_without_stop_strings_starts_on_sglang(sglang_worker) -> None:
    loop = register_loop("er_plain", interaction_config_path=None)
    out = await run_batch(sglang_worker, {"P": ["The answer is 4."]}, [sample("P", loop)])
    assert out.non_tensor_batch["extras"][0]["termination_reason"] != "error"


def test_a_policy_played_user_on_sglang_with_verl_default_is_a_config_problem() -> None:
    cfg = composed("gsm8k_ask_user", "actor_rollout_ref.rollout.name=sglang")
    assert check_composed(cfg, "gsm8k_ask_user") == [
        "gsm8k_ask_user: agent loop 'long_workflow', interaction 'llm_user': the policy-played user (backend: policy) "
        "stops at a turn marker written as text, so its replies send stop strings, which SGLang cannot apply with "
        "actor_rollout_ref.rollout.skip_tokenizer_init=true (its scheduler has no tokenizer and dies on the first "
        "one: AttributeError: 'NoneType' object has no attribute 'decode'); set "
        "actor_rollout_ref.rollout.skip_tokenizer_init=false"
    ]
    assert (
        check_composed(composed("gsm8k_ask_user", *SGLANG, "actor_rollout_ref.rollout.skip_tokenizer_init=false"), "x")
        == []
    )


def test_a_user_the_policy_plays_by_default_is_found_too(tmp_path) -> None:
    """LLMUserInteraction's backend defaults to the policy: an interaction file that names no backend is one."""
    import yaml

    users = tmp_path / "users.yaml"
    users.write_text(
        yaml.safe_dump(
            {"interaction": [{"name": "plain", "class_name": "extensions.interactions.llm_user.LLMUserInteraction"}]}
        )
    )
    loops = tmp_path / "loops.yaml"
    entry = {"name": "asks", "_target_": "extensions.custom_rollouts.LongWorkflowAgent"}
    loops.write_text(yaml.safe_dump([{**entry, "interaction_config_path": str(users)}]))
    cfg = composed("gsm8k_ask_user", *SGLANG, f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loops}")
    assert check_composed(cfg, "x") == [
        "x: agent loop 'asks', interaction 'plain': the policy-played user (backend: policy) stops at a turn marker "
        "written as text, so its replies send stop strings, which SGLang cannot apply with "
        "actor_rollout_ref.rollout.skip_tokenizer_init=true (its scheduler has no tokenizer and dies on the first "
        "one: AttributeError: 'NoneType' object has no attribute 'decode'); set "
        "actor_rollout_ref.rollout.skip_tokenizer_init=false"
    ]
