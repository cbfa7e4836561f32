"""What a rollout engine's settings rule out, found before any model loads.

One rule so far, seen on the GPU (docs/results/sglang-h100/): SGLang cannot apply *stop strings*
when verl starts it with ``skip_tokenizer_init: true`` (verl's default). Its scheduler holds no
tokenizer, and the first request with a ``stop`` string kills it while checking the string
(sglang 0.5.12 ``schedule_batch.Req.tail_str``: ``AttributeError: 'NoneType' object has no
attribute 'decode'``); every later request of the step then fails. The pack sends stop strings in
two places: code-fence tool calls pause at closing fences (``tool_parser: code_fence``), and the
policy-played user stops at a chat-template turn marker written as text (``backend: policy``).
vLLM is not affected: it detokenizes as it generates.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from extensions.errors import ConfigError, LongflowError

SKIP_KEY = "actor_rollout_ref.rollout.skip_tokenizer_init"


def stop_strings_problem(rollout: Any, owner: str, why: str) -> str | None:
    """The problem with sending stop strings to this rollout's engine (``why`` says who sends them), or None."""
    if str(rollout.get("name", "")) != "sglang" or not bool(rollout.get("skip_tokenizer_init", True)):
        return None
    return (
        f"{owner}: {why} send stop strings, which SGLang cannot apply with {SKIP_KEY}=true (its scheduler has no "
        f"tokenizer and dies on the first one: AttributeError: 'NoneType' object has no attribute 'decode'); "
        f"set {SKIP_KEY}=false"
    )


def check_stop_strings(rollout: Any, owner: str, why: str) -> None:
    """Raise ConfigError when this rollout's engine cannot apply the stop strings ``owner`` sends."""
    if problem := stop_strings_problem(rollout, owner, why):
        raise ConfigError(problem)


FENCE_WHY = "code-fence tool calls (tool_parser: code_fence) pause at closing fences, so its generations"
POLICY_USER_WHY = "the policy-played user (backend: policy) stops at a turn marker written as text, so its replies"


def policy_users(interactions: dict[str, Any]) -> list[str]:
    """The interactions whose user the policy itself plays (``uses_policy_server``: its replies come from the
    rollout's server, with the stop strings)."""
    return [name for name, interaction in interactions.items() if getattr(interaction, "uses_policy_server", False)]


def check_loop_stop_strings(rollout: Any, loop: str, fence: Any, interactions: dict[str, Any]) -> None:
    """An agent loop's check at start-up: its code fences and its policy-played users."""
    if fence is not None:
        check_stop_strings(rollout, f"agent loop {loop!r}", FENCE_WHY)
    for name in policy_users(interactions):
        check_stop_strings(rollout, f"agent loop {loop!r}, interaction {name!r}", POLICY_USER_WHY)


def composed_stop_string_problems(
    cfg: Any, entries: dict[str, dict[str, Any]], where: str, resolve: Callable[[str], Path | None]
) -> list[str]:
    """Every code-fence agent loop and policy-played user of a composed config whose engine cannot apply stop
    strings; ``resolve`` finds an entry's interaction file."""
    rollout = cfg.actor_rollout_ref.rollout
    default_parser = rollout.multi_turn.get("format")
    problems = []
    for name, entry in entries.items():
        owner = f"{where}: agent loop {name!r}"
        if (entry.get("tool_parser") or default_parser) == "code_fence":
            problems.append(stop_strings_problem(rollout, owner, FENCE_WHY))
        for user in policy_users(entry_interactions(entry, resolve)):
            problems.append(stop_strings_problem(rollout, f"{owner}, interaction {user!r}", POLICY_USER_WHY))
    return [p for p in problems if p]


def entry_interactions(entry: dict[str, Any], resolve: Callable[[str], Path | None]) -> dict[str, Any]:
    """The interactions of an agent-loop entry's interaction file, built as the loop builds them (once per
    process); {} without one, or when it does not build (config_check reports that file's problems)."""
    from extensions.interactions.registry import load_interactions

    path = entry.get("interaction_config_path")
    file = resolve(str(path)) if path else None
    try:
        return load_interactions(str(file)) if file else {}
    except LongflowError:
        return {}


ATTN_KEY = "actor_rollout_ref.model.override_config.attn_implementation"
VERL_DEFAULT_ATTN = "flash_attention_2"  # verl/workers/config/model.py: override_config.get("attn_implementation", ...)


FLASH_PACKAGES = {"flash_attention_2": "flash_attn", "flash_attention_3": "flash_attn_interface"}
"""The package transformers needs for each flash attention (``is_flash_attn_2_available`` / ``_3_``)."""


def critic_attention_problem(cfg: Any, where: str) -> str | None:
    """The problem with a critic's attention, or None: verl loads an FSDP critic (a value model) with
    ``attn_implementation="flash_attention_2"`` whatever the config says (``verl/utils/model.py``
    ``load_valuehead_model``), so without ``flash_attn`` it cannot load."""
    import importlib.util

    from extensions.verl_compat import FSDP_STRATEGIES, uses_critic

    if not uses_critic(cfg) or cfg.critic.get("strategy") not in FSDP_STRATEGIES:
        return None
    if importlib.util.find_spec(FLASH_PACKAGES[VERL_DEFAULT_ATTN]) is not None:
        return None
    return (
        f"{where}: the critic (critic.enable, or algorithm.adv_estimator=gae) would not load: verl loads an FSDP "
        "critic with flash_attention_2 whatever the config says, and the flash_attn package is not installed here; "
        "install flash-attn, or train without a critic (grpo, turn_grpo and the other critic-free estimators)"
    )


def attention_problem(cfg: Any, where: str) -> str | None:
    """The problem with the actor's attention implementation, or None: verl asks transformers for FlashAttention-2
    unless the config names another, and without the ``flash_attn`` package every worker dies loading the model
    (``ImportError: FlashAttention2 has been toggled on, but it cannot be used``), minutes into the run. flash-attn
    has no wheel on PyPI for the pack's GPU stack, so the pack's experiments set sdpa. FSDP actors only: other
    engines take their attention from elsewhere."""
    import importlib.util

    from extensions.verl_compat import FSDP_STRATEGIES

    if cfg.actor_rollout_ref.actor.get("strategy") not in FSDP_STRATEGIES:
        return None
    override = cfg.actor_rollout_ref.model.get("override_config") or {}
    implementation = str(override.get("attn_implementation", VERL_DEFAULT_ATTN))
    package = FLASH_PACKAGES.get(implementation)
    if package is None or importlib.util.find_spec(package) is not None:
        return None
    shown = "verl's default " if "attn_implementation" not in override else ""
    return (
        f"{where}: {ATTN_KEY} is {shown}{implementation!r}, which needs the {package} package, and it is not "
        f"installed here (the actor would fail to load); set {ATTN_KEY}=sdpa or install it"
    )
