"""The actor's attention implementation: verl asks for FlashAttention-2 unless the config names another, and
without the flash_attn package every worker died loading the model, minutes into a GPU run (the code-verify
experiment on the pack's GPU stack). config_check says so before any model loads."""

from __future__ import annotations

import importlib.util
import inspect

import pytest
import verl.workers.config.model as verl_model_config

from extensions.config_check import check_composed
from extensions.engine_rules import VERL_DEFAULT_ATTN, attention_problem, critic_attention_problem
from tests.conftest import EXPERIMENTS
from tests.test_experiment_configs_validate import composed

DROP_ATTN = "~actor_rollout_ref.model.override_config.attn_implementation"


def installed(flash_attn: bool):
    real = importlib.util.find_spec

    def find_spec(name: str, *args: object):
        if name in ("flash_attn", "flash_attn_interface"):
            return real("json") if flash_attn else None  # any spec stands for "installed"
        return real(name, *args)

    return find_spec


def test_verl_still_defaults_to_flash_attention_2() -> None:
    assert f'override_config.get("attn_implementation", "{VERL_DEFAULT_ATTN}")' in inspect.getsource(verl_model_config)


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_names_an_attention_that_needs_no_flash_attn(experiment: str) -> None:
    cfg = composed(experiment)
    assert cfg.actor_rollout_ref.model.override_config.attn_implementation == "sdpa"


def test_verl_default_attention_without_flash_attn_is_a_config_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", installed(False))
    assert check_composed(composed("gsm8k_code_verify", DROP_ATTN), "gsm8k_code_verify") == [
        "gsm8k_code_verify: actor_rollout_ref.model.override_config.attn_implementation is verl's default "
        "'flash_attention_2', which needs the flash_attn package, and it is not installed here (the actor would "
        "fail to load); set actor_rollout_ref.model.override_config.attn_implementation=sdpa or install it"
    ]


def test_flash_attention_passes_where_flash_attn_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", installed(True))
    assert check_composed(composed("gsm8k_code_verify", DROP_ATTN), "gsm8k_code_verify") == []


def test_the_rollout_driver_check_leaves_the_actor_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    # the driver loads no actor: training=False skips the rule
    monkeypatch.setattr(importlib.util, "find_spec", installed(False))
    assert check_composed(composed("gsm8k_code_verify", DROP_ATTN), "x", training=False) == []


@pytest.mark.parametrize(
    ("implementation", "package"), [("flash_attention_2", "flash_attn"), ("flash_attention_3", "flash_attn_interface")]
)
def test_a_named_flash_attention_without_its_package_is_a_config_problem(
    monkeypatch: pytest.MonkeyPatch, implementation: str, package: str
) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", installed(False))
    cfg = composed("gsm8k_learn", f"actor_rollout_ref.model.override_config.attn_implementation={implementation}")
    assert check_composed(cfg, "x") == [
        f"x: actor_rollout_ref.model.override_config.attn_implementation is '{implementation}', which needs the "
        f"{package} package, and it is not installed here (the actor would fail to load); set "
        "actor_rollout_ref.model.override_config.attn_implementation=sdpa or install it"
    ]


def test_an_actor_on_another_engine_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", installed(False))
    cfg = composed("gsm8k_code_verify", DROP_ATTN, "actor_rollout_ref.actor.strategy=megatron")
    assert attention_problem(cfg, "x") is None


CRITIC = (
    "x: the critic (critic.enable, or algorithm.adv_estimator=gae) would not load: verl loads an FSDP critic with "
    "flash_attention_2 whatever the config says, and the flash_attn package is not installed here; install "
    "flash-attn, or train without a critic (grpo, turn_grpo and the other critic-free estimators)"
)


@pytest.mark.parametrize(
    ("overrides", "problems"),
    [
        (["algorithm.adv_estimator=gae"], [CRITIC]),
        (["critic.enable=true"], [CRITIC]),
        (["algorithm.adv_estimator=gae", "critic.enable=false"], []),
        ([], []),  # grpo: no critic
    ],
)
def test_a_critic_without_flash_attn_is_a_config_problem(
    monkeypatch: pytest.MonkeyPatch, overrides: list[str], problems: list[str]
) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", installed(False))
    cfg = composed("gsm8k_learn", *overrides)
    assert [p for p in check_composed(cfg, "x") if "critic" in p and "flash" in p] == problems


def test_a_critic_passes_where_flash_attn_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", installed(True))
    assert critic_attention_problem(composed("gsm8k_learn", "algorithm.adv_estimator=gae"), "x") is None
