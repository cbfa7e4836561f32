"""A user who says scripted things: from its config, or from the sample.

    config: {messages: ["Please double-check.", "Thanks!"], stop_phrase: null}

A sample may override the script with ``interaction_kwargs.user_messages``. After the
script runs out the interaction ends the episode (reason ``interaction_done``).
"""

from __future__ import annotations

from typing import Any

from extensions.errors import ConfigError, SampleError
from extensions.interactions.base import BaseInteraction

CONFIG_KEYS = frozenset({"name", "messages", "turn_score"})


class ScriptedInteraction(BaseInteraction):
    """Replies with the next scripted user message; scores each turn ``turn_score``."""

    def __init__(self, config: dict[str, Any]):
        super().__init__(config)
        unknown = set(config) - CONFIG_KEYS
        if unknown:
            raise ConfigError(f"unknown key(s) {sorted(unknown)} for ScriptedInteraction; valid: messages, turn_score")
        self.messages = _as_messages(config.get("messages", []), where="config.messages")
        self.turn_score = float(config.get("turn_score", 0.0))
        self._state: dict[str, dict[str, Any]] = {}

    async def start_interaction(self, instance_id: str | None = None, **kwargs: Any) -> str:
        instance_id = await super().start_interaction(instance_id)
        script = kwargs.get("user_messages")
        messages = (
            _as_messages(script, where="interaction_kwargs.user_messages") if script is not None else self.messages
        )
        self._state[instance_id] = {"script": messages, "next": 0}
        return instance_id

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
    ) -> tuple[bool, str, float, dict[str, Any]]:
        state = self._state[instance_id]
        if state["next"] >= len(state["script"]):
            return True, "", self.turn_score, {}
        text = state["script"][state["next"]]
        state["next"] += 1
        return False, text, self.turn_score, {}

    async def finalize_interaction(self, instance_id: str | None = None, **kwargs: Any) -> None:
        self._state.pop(instance_id, None)


def _as_messages(value: Any, *, where: str) -> list[str]:
    if hasattr(value, "tolist"):  # numpy arrays arrive from parquet
        value = value.tolist()
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise SampleError(f"{where} must be a list of strings, got {type(value).__name__}")
    return list(value)
