"""The user's turns come from an HTTP service: a human-in-the-loop UI or an external user simulator.

    interaction:
      - name: http_user
        class_name: extensions.interactions.http_user.HTTPUserInteraction
        config:
          url: http://127.0.0.1:8900/user_turn
          api_key_env: USER_SERVICE_KEY     # optional: sent as 'Authorization: Bearer <key>'
          timeout_s: 600                    # a person may take a while
          max_retries: 1
          backoff_s: 1.0
          max_concurrency: 8
          hide_tools: false                 # true: send the user's view (roles swapped, no tools)

After every assistant turn without tool calls the interaction POSTs (``Content-Type: application/json``)::

    {
      "instance_id": "3f2a...",            # one id per trajectory
      "turn": 1,                           # 1 for the first user turn of this trajectory, then 2, ...
      "messages": [                        # the conversation so far, as the agent loop holds it
        {"role": "system", "content": "..."},
        {"role": "user", "content": "..."},
        {"role": "assistant", "content": "...", "tool_calls": [{"name": "python_exec", "arguments": {...}}]},
        {"role": "tool", "content": "..."},
        {"role": "assistant", "content": "..."}
      ],
      "sample": {"ground_truth": "72", ...} # the sample's interaction_kwargs (JSON values only; 'name' left out)
    }

and expects ``200`` with::

    {"content": "the user's next message", "stop": false, "score": 0.0}

``content`` (a string) is required and must be non-empty unless ``stop`` is true; ``stop``
(default false) ends the episode (reason ``interaction_done``); ``score`` (default 0.0) is this
turn's score. A service that is down, slow, answers 5xx or malformed JSON, or sends an unusable
reply is retried, then the trajectory is recorded with reason ``error`` naming the URL and the
failure; the batch goes on.
"""

from __future__ import annotations

import json
import math
from typing import Any

from extensions.errors import ConfigError, choices
from extensions.interactions.base import BaseInteraction
from extensions.interactions.http_client import EndpointError, JsonEndpoint
from extensions.interactions.user_backends import UserModelError, strip_trailing_specials, user_view

ENDPOINT_KEYS = frozenset({"url", "api_key_env", "timeout_s", "max_retries", "backoff_s", "max_concurrency"})
CONFIG_KEYS = ENDPOINT_KEYS | {"name", "hide_tools"}
HIDDEN_VIEW_SYSTEM = "(the user's view: roles swapped, tool traffic hidden)"


def plain_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages as JSON: role, content (trailing special tokens cut) and assistant tool calls' name and arguments."""
    out = []
    for message in messages:
        content = strip_trailing_specials(str(message.get("content") or ""))
        item: dict[str, Any] = {"role": str(message.get("role")), "content": content}
        calls = message.get("tool_calls")
        if calls:
            item["tool_calls"] = [
                {"name": c.get("function", {}).get("name"), "arguments": c.get("function", {}).get("arguments")}
                for c in calls
            ]
        out.append(item)
    return out


def json_values(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The JSON-serialisable entries of the sample's interaction_kwargs ('name' left out)."""
    out = {}
    for key, value in kwargs.items():
        value = value.tolist() if hasattr(value, "tolist") else value
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            continue
        if key != "name":
            out[key] = value
    return out


def parse_reply(data: Any) -> tuple[bool, str, float]:
    """(stop, content, score) from the service's JSON; a bad shape is a ValueError saying what is wrong."""
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    stop, content, score = data.get("stop", False), data.get("content"), data.get("score", 0.0)
    if not isinstance(stop, bool):
        raise ValueError(f"'stop' must be true or false, got {stop!r}")
    if content is None and stop:
        content = ""
    if not isinstance(content, str):
        raise ValueError(f"'content' must be a string, got {type(content).__name__}")
    if not content.strip() and not stop:
        raise ValueError("empty reply: 'content' is empty and 'stop' is false")
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
        raise ValueError(f"'score' must be a finite number, got {score!r}")
    return stop, content, float(score)


class HTTPUserInteraction(BaseInteraction):
    """Each user turn is the reply of a POST to ``url``; see the module docstring for the JSON."""

    def __init__(self, config: dict[str, Any]):
        super().__init__(config)
        owner = f"interaction {self.name!r} (HTTPUserInteraction)"
        unknown = set(config) - CONFIG_KEYS
        if unknown:
            raise ConfigError(f"{owner}: unknown key(s) {choices(unknown)}; valid: {choices(CONFIG_KEYS)}")
        if "url" not in config:
            raise ConfigError(f"{owner}: config.url is required (the user service's POST endpoint)")
        settings = {k: v for k, v in config.items() if k in ENDPOINT_KEYS and k != "url"}
        self.endpoint = JsonEndpoint(str(config["url"]), owner=owner, **{"timeout_s": 600.0, **settings})
        self.hide_tools = bool(config.get("hide_tools", False))
        self._turns: dict[str, int] = {}

    async def start_interaction(self, instance_id: str | None = None, **kwargs: Any) -> str:
        instance_id = await super().start_interaction(instance_id)
        self._turns[instance_id] = 0
        return instance_id

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
    ) -> tuple[bool, str, float, dict[str, Any]]:
        self._turns[instance_id] += 1
        shown = user_view(messages, HIDDEN_VIEW_SYSTEM)[1:] if self.hide_tools else plain_messages(messages)
        payload = {
            "instance_id": instance_id,
            "turn": self._turns[instance_id],
            "messages": shown,
            "sample": json_values(kwargs),
        }
        try:
            stop, content, score = await self.endpoint.post(payload, parse=parse_reply)
        except EndpointError as exc:
            raise UserModelError(str(exc)) from None
        return stop, content, score, {"turn": self._turns[instance_id]}

    async def finalize_interaction(self, instance_id: str | None = None, **kwargs: Any) -> None:
        self._turns.pop(instance_id, None)
