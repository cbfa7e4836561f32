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

import yaml

from extensions.errors import ConfigError

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


def check_loop_stop_strings(rollout: Any, loop: str, fence: Any, interactions: dict[str, Any]) -> None:
    """An agent loop's check at start-up: its code fences and its policy-played users."""
    from extensions.interactions.user_backends import PolicyBackend

    if fence is not None:
        check_stop_strings(rollout, f"agent loop {loop!r}", FENCE_WHY)
    for name, interaction in interactions.items():
        if isinstance(getattr(interaction, "backend", None), PolicyBackend):
            check_stop_strings(rollout, f"agent loop {loop!r}, interaction {name!r}", POLICY_USER_WHY)


def composed_stop_string_problems(
    cfg: Any, entries: dict[str, dict[str, Any]], where: str, resolve: Callable[[str], Path | None]
) -> list[str]:
    """Every code-fence agent loop and policy-played user of a composed config whose engine cannot apply stop
    strings; ``resolve`` finds an entry's interaction file (an unreadable one is reported elsewhere)."""
    rollout = cfg.actor_rollout_ref.rollout
    default_parser = rollout.multi_turn.get("format")
    problems = []
    for name, entry in entries.items():
        owner = f"{where}: agent loop {name!r}"
        if (entry.get("tool_parser") or default_parser) == "code_fence":
            problems.append(stop_strings_problem(rollout, owner, FENCE_WHY))
        for user in policy_users(
            resolve(str(entry["interaction_config_path"])) if entry.get("interaction_config_path") else None
        ):
            problems.append(stop_strings_problem(rollout, f"{owner}, interaction {user!r}", POLICY_USER_WHY))
    return [p for p in problems if p]


def policy_users(file: Path | None) -> list[str]:
    """The names of the interactions of an interaction file that the policy plays (``backend: policy``)."""
    try:
        data = yaml.safe_load(file.read_text()) if file else None
    except (OSError, yaml.YAMLError):
        return []
    items = data.get("interaction") if isinstance(data, dict) else None
    return [
        str(item.get("name"))
        for item in items or []
        if isinstance(item, dict) and isinstance(item.get("config"), dict) and item["config"].get("backend") == "policy"
    ]
