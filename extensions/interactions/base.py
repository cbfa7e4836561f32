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

    uses_policy_server: bool = False
    """True for a user played by the policy's own model: ``start_interaction`` then also gets the
    loop's ``server_manager`` and ``tokenizer``."""

    def __init__(self, config: dict[str, Any]):
        self.config = config
        self.name: str = config.get("name", "interaction_agent")

    async def opening_message(self, instance_id: str) -> str | None:
        """A user message that opens the conversation (an environment's first observation), or None."""
        return None

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


class DuckInteraction(BaseInteraction):
    """A verl 0.7 interaction class that does not subclass ``BaseInteraction``, behind its contract."""

    def __init__(self, inner: Any):
        super().__init__(getattr(inner, "config", None) or {})
        self.inner = inner
        self.name = getattr(inner, "name", self.name)
        self.uses_policy_server = bool(getattr(inner, "uses_policy_server", False))

    async def start_interaction(self, instance_id: str | None = None, **kwargs: Any) -> str:
        return await self.inner.start_interaction(instance_id, **kwargs)

    async def opening_message(self, instance_id: str) -> str | None:
        opening = getattr(self.inner, "opening_message", None)
        return await opening(instance_id) if opening is not None else None

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
    ) -> tuple[bool, str, float, dict[str, Any]]:
        return await self.inner.generate_response(instance_id, messages, **kwargs)

    async def calculate_score(self, instance_id: str | None = None, **kwargs: Any) -> float:
        score = getattr(self.inner, "calculate_score", None)
        return await score(instance_id, **kwargs) if score is not None else 0.0

    async def finalize_interaction(self, instance_id: str | None = None, **kwargs: Any) -> None:
        await self.inner.finalize_interaction(instance_id, **kwargs)


def last_assistant_text(messages: list[dict[str, Any]]) -> str:
    """The content of the last assistant message, or '' when there is none."""
    for message in reversed(messages):
        if message.get("role") == "assistant":
            content = message.get("content") or ""
            return content if isinstance(content, str) else str(content)
    return ""
