"""verl's name tables, the ``verl.interactions`` alias, the MCP tool-YAML loader and the Continuous
Token prefix cache: the seam's reads of verl's private names and its patches of verl objects."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any

SYNTHETIC_SYSTEM = "continuous token synthetic system"
"""verl's synthetic system text in Continuous Token suffix renders (continuous_token.py)."""


def agent_loop_registry() -> dict[str, dict[str, Any]]:
    """verl's name -> YAML entry table of agent loops (agent_loop.py ``_agent_loop_registry``)."""
    from verl.experimental.agent_loop import agent_loop

    return agent_loop._agent_loop_registry


def tool_parser_registry() -> dict[str, type]:
    """verl's name -> class table of tool parsers (tool_parser.py ``ToolParser._registry``)."""
    from verl.experimental.agent_loop.tool_parser import ToolParser

    return ToolParser._registry


def rollout_replica_registry() -> dict[str, Any]:
    """verl's engine name -> replica loader table (replica.py ``RolloutReplicaRegistry._registry``)."""
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    return RolloutReplicaRegistry._registry


def required_tool_name(message: dict[str, Any], index: int, messages: list[Any], tool_calls: list[Any]) -> Any:
    """The tool name verl's Continuous Token builder gives a tool message (``_resolve_required_tool_name``)."""
    from verl.utils.tokenizer import continuous_token

    return continuous_token._resolve_required_tool_name(message, index, messages, tool_calls)


def build_assistant_message(loop: Any, content: str, agent_data: Any) -> dict[str, Any]:
    """The assistant message (with ``tool_calls`` and their ids) ToolAgentLoop appends after a reply
    (``ToolAgentLoop._build_assistant_message``; reliance "ToolAgentLoop handlers and AgentData")."""
    from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop

    return ToolAgentLoop._build_assistant_message(loop, content, agent_data)


def capture_performance_metrics(callback: Any) -> None:
    """Call ``callback(metrics)`` with each batch's per-trajectory metrics before verl reduces them
    (wraps ``AgentLoopManager._performance_metrics``; scripts/gpu/rollout_throughput.py)."""
    from verl.experimental.agent_loop import AgentLoopManager

    original = AgentLoopManager._performance_metrics

    def wrapped(self: Any, metrics: Any, output: Any) -> Any:
        callback(metrics)
        return original(self, metrics, output)

    AgentLoopManager._performance_metrics = wrapped


def install_interaction_alias(base: types.ModuleType) -> None:
    """Let verl 0.7 interaction classes (``from verl.interactions.base import BaseInteraction``) import:
    ``verl.interactions.base`` becomes ``base`` (the plugin passes ``extensions.interactions.base``)."""
    if "verl.interactions.base" in sys.modules:
        return
    package = types.ModuleType("verl.interactions")
    package.__path__ = []  # a namespace-like package holding only the alias
    package.base = base
    sys.modules.setdefault("verl.interactions", package)
    sys.modules.setdefault("verl.interactions.base", base)


def accept_mcp_tool_yaml(expand: Callable[[Callable[[str], list], str], list]) -> None:
    """Let verl's tool loader read verl <= 0.8's ``config.type: mcp`` tool YAML (idempotent).

    verl's ``load_all_tools`` (AgentLoopWorker, RLHFDataset) calls the module global
    ``verl.tools.tool_registry.initialize_tools_from_config`` at run time; it is wrapped so that
    ``expand(original, path)`` (the plugin passes ``extensions.tools.mcp.legacy.load_expanding_mcp``)
    expands MCP entries first.
    """
    from verl.tools import tool_registry

    original = tool_registry.initialize_tools_from_config
    if getattr(original, "longflow_mcp", False):
        return

    def initialize_tools_from_config(tools_config_file: str) -> list:
        return expand(original, tools_config_file)

    initialize_tools_from_config.longflow_mcp = True  # type: ignore[attr-defined]
    initialize_tools_from_config.__doc__ = original.__doc__
    tool_registry.initialize_tools_from_config = initialize_tools_from_config


# -- the Continuous Token builder ------------------------------------------------------------


def cache_prefix_renders(builder: Any, cache: dict[Any, list[int]], lock: Any, size: int) -> Any:
    """Tokenize verl's synthetic Continuous Token prefix once per (tokenizer, builder, prefix, tools).

    ``render_delta_token_id`` renders ``prefix`` and ``prefix + appended`` with the chat template
    and keeps the difference. For tool and user messages the prefix is a fixed synthetic
    conversation (its first message is ``SYNTHETIC_SYSTEM``), so its ids are cached in ``cache``
    (at most ``size`` entries, oldest dropped first). Other prefixes take verl's path unchanged.
    """
    import json

    original = builder.render_delta_token_id

    def render_delta_token_id(prefix_messages, appended_messages, *, add_generation_prompt=False, tools=None):
        if not prefix_messages or prefix_messages[0].get("content") != SYNTHETIC_SYSTEM:
            return original(
                prefix_messages, appended_messages, add_generation_prompt=add_generation_prompt, tools=tools
            )
        key = (id(builder.tokenizer), type(builder), json.dumps([prefix_messages, tools], sort_keys=True, default=str))
        prefix_ids = cache.get(key)
        if prefix_ids is None:
            prefix_ids = builder._render_tokens(prefix_messages, add_generation_prompt=False, tools=tools)
            with lock:
                if len(cache) >= size:  # oldest first; tool-call ids can make many prefixes
                    cache.pop(next(iter(cache)))
                cache[key] = prefix_ids
        full_ids = builder._render_tokens(
            prefix_messages + appended_messages, add_generation_prompt=add_generation_prompt, tools=tools
        )
        if full_ids[: len(prefix_ids)] != prefix_ids:
            roles = [m.get("role") for m in appended_messages] or ["generation_prompt"]
            raise ValueError(f"Continuous Token token-id suffix diff failed for roles: {roles}")
        return full_ids[len(prefix_ids) :]

    builder.render_delta_token_id = render_delta_token_id
    return builder
