"""User turns for verl 0.9: the ``BaseInteraction`` contract of verl <= 0.7, restored.

verl 0.9 removed ``verl/interactions`` (upstream PR #6074). Interaction classes written
for verl 0.7 subclass ``BaseInteraction`` with these four methods; they drop in here
unchanged once their import points at this module (or at the ``verl.interactions.base``
alias that ``extensions.plugin`` installs).
"""

from __future__ import annotations

from typing import Any
from uuid import uuid4


class BaseInteraction:
    """One interaction object serves many trajectories, told apart by ``instance_id``.

    The agent loop calls ``start_interaction`` once per trajectory, ``generate_response``
    after every assistant turn that makes no tool call, and ``finalize_interaction`` when
    the trajectory ends (also on error). Keyword arguments are the sample's
    ``interaction_kwargs`` (minus nothing: ``name`` is passed through too).
    """

    def __init__(self, config: dict[str, Any]):
        self.config = config
        self.name: str = config.get("name", "interaction_agent")

    async def start_interaction(self, instance_id: str | None = None, **kwargs: Any) -> str:
        """Create per-trajectory state; return the instance id."""
        return instance_id if instance_id is not None else str(uuid4())

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
    ) -> tuple[bool, str, float, dict[str, Any]]:
        """Answer the assistant's last message.

        Returns ``(should_terminate_sequence, response_content, current_turn_score, additional_data)``.
        """
        return False, "Your current result seems acceptable.", 0.8, {}

    async def calculate_score(self, instance_id: str | None = None, **kwargs: Any) -> float:
        """A trajectory-level score; unused by the loop, kept for compatibility."""
        return 0.0

    async def finalize_interaction(self, instance_id: str | None = None, **kwargs: Any) -> None:
        """Drop per-trajectory state."""
        return None


def last_assistant_text(messages: list[dict[str, Any]]) -> str:
    """The content of the last assistant message, or '' when there is none."""
    for message in reversed(messages):
        if message.get("role") == "assistant":
            content = message.get("content") or ""
            return content if isinstance(content, str) else str(content)
    return ""
