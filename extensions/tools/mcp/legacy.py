"""verl <= 0.8's MCP tool YAML, accepted as it is: ``config.type: mcp`` entries become ``MCPTool`` entries.

    tools:
      - class_name: verl.tools.mcp_base_tool.MCPBaseTool     # or MCPSearchTool, or extensions.tools.mcp.MCPTool
        config: {type: mcp, rate_limit: 120, timeout: 120}
        mcp:
          mcp_servers_config_path: tool_configs/mcp_servers.json
          tool_selected_list: [convert_units, search_corpus]    # left out: every tool of every server

verl 0.9.1 rejects ``type: mcp`` (``ToolType`` has only ``native``). ``expand_tool_config`` turns
each such entry into one native ``extensions.tools.mcp.MCPTool`` entry per selected tool (tool
names from the servers' ``list_tools``); ``extensions.verl_compat.accept_mcp_tool_yaml`` (called by
the pack's verl plugin) makes verl's loader do that first, so old files work as
``multi_turn.tool_config_path`` unchanged. Errors name the file and the key.
"""

from __future__ import annotations

import importlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from extensions.errors import ConfigError, choices

MCP_TOOL = "extensions.tools.mcp.MCPTool"
LEGACY_CLASSES = frozenset({"verl.tools.mcp_base_tool.MCPBaseTool", "verl.tools.mcp_search_tool.MCPSearchTool"})
ENTRY_KEYS = ("class_name", "config", "mcp")
MCP_KEYS = ("mcp_servers_config_path", "tool_selected_list")
PASSED_CONFIG_KEYS = ("server", "lifecycle", "startup_timeout_s", "timeout", "rate_limit")


def _load(path: str) -> dict[str, Any]:
    from omegaconf import OmegaConf

    data = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    if not isinstance(data, dict) or not isinstance(data.get("tools"), list):
        raise ConfigError(f"{path}: expected a top-level 'tools:' list")
    return data


def has_mcp_entries(path: str) -> bool:
    """Whether the tool YAML has a ``config.type: mcp`` entry (False for anything else: verl reports it)."""
    from omegaconf import OmegaConf

    try:
        data = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    except Exception:
        return False
    tools = data.get("tools") if isinstance(data, dict) else None
    return isinstance(tools, list) and any(_is_mcp(entry) for entry in tools)


def _is_mcp(entry: Any) -> bool:
    return isinstance(entry, dict) and isinstance(entry.get("config"), dict) and entry["config"].get("type") == "mcp"


def expand_tool_config(path: str) -> dict[str, Any]:
    """The tool YAML with every ``type: mcp`` entry replaced by native ``MCPTool`` entries, in order."""
    data = _load(path)
    tools: list[dict[str, Any]] = []
    for i, entry in enumerate(data["tools"]):
        tools += _expand_entry(entry, f"{path}: tools[{i}]") if _is_mcp(entry) else [entry]
    return {**data, "tools": tools}


def _expand_entry(entry: dict[str, Any], at: str) -> list[dict[str, Any]]:
    from extensions.tools.mcp.config import MCPToolConfig, load_servers
    from extensions.tools.mcp.tool import list_server_tools

    unknown = [k for k in entry if k not in ENTRY_KEYS]
    if unknown:
        raise ConfigError(f"{at}: unknown key(s) {choices(unknown)}; valid keys of an MCP entry: {choices(ENTRY_KEYS)}")
    section = entry.get("mcp")
    if not isinstance(section, dict) or "mcp_servers_config_path" not in section:
        raise ConfigError(f'{at}.mcp.mcp_servers_config_path is missing (the {{"mcpServers": ...}} JSON file)')
    unknown = [k for k in section if k not in MCP_KEYS]
    if unknown:
        raise ConfigError(f"{at}.mcp: unknown key(s) {choices(unknown)}; valid: {choices(MCP_KEYS)}")
    config = {k: v for k, v in entry["config"].items() if k != "type"}
    unknown = [k for k in config if k not in PASSED_CONFIG_KEYS]
    if unknown:
        raise ConfigError(
            f"{at}.config: unknown key(s) {choices(unknown)}; valid: 'type', {choices(PASSED_CONFIG_KEYS)}"
        )
    class_name = _tool_class(str(entry.get("class_name", MCP_TOOL)), at)
    source = str(section["mcp_servers_config_path"])
    servers = load_servers(source)
    if config.get("server") is not None:
        if config["server"] not in servers:
            raise ConfigError(
                f"{at}.config.server: {source} has no enabled server {config['server']!r}; valid: {choices(servers)}"
            )
        servers = {config["server"]: servers[config["server"]]}
    offered: dict[str, str] = {}
    for name, spec in servers.items():
        settings = MCPToolConfig.model_validate({"mcp_servers_config_path": source, "tool": "-", **config})
        for tool in list_server_tools(spec, settings):
            if tool in offered:
                raise ConfigError(
                    f"{at}: tool {tool!r} is offered by servers {offered[tool]!r} and {name!r} of {source}; set config.server"
                )
            offered[tool] = name
    selected = section.get("tool_selected_list") or list(offered)
    missing = [t for t in selected if t not in offered]
    if missing:
        raise ConfigError(
            f"{at}.mcp.tool_selected_list: {choices(missing)} not offered by the servers of {source}; "
            f"offered: {choices(offered)}"
        )
    return [
        {
            "class_name": class_name,
            "config": {"type": "native", "mcp_servers_config_path": source, **config, "server": offered[t], "tool": t},
        }
        for t in selected
    ]


def _tool_class(class_name: str, at: str) -> str:
    """verl <= 0.8's MCP classes map to MCPTool; any other class must be an MCPTool subclass."""
    if class_name in LEGACY_CLASSES:
        return MCP_TOOL
    from extensions.tools.mcp.tool import MCPTool

    module, _, attr = class_name.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(f"{at}.class_name: cannot import {class_name!r}: {exc}") from None
    if not (isinstance(cls, type) and issubclass(cls, MCPTool)):
        raise ConfigError(f"{at}.class_name: {class_name!r} is not an {MCP_TOOL} (sub)class, needed for type: mcp")
    return class_name


def load_expanding_mcp(original: Callable[[str], list], tools_config_file: str) -> list:
    """Load a tool YAML with verl's ``original`` loader, first expanding ``config.type: mcp`` entries.

    Files without such entries go to verl untouched. ``extensions.verl_compat.accept_mcp_tool_yaml``
    routes verl's loader through this. A ``ConfigError`` from a tool's config (the pack's tools, MCP
    included) is raised again with the tool YAML's path in front, since verl's loader does not say
    which file it was reading.
    """
    try:
        return _load_expanding_mcp(original, tools_config_file)
    except ConfigError as exc:
        if not str(exc).startswith(f"{tools_config_file}:"):
            exc.args = (f"{tools_config_file}: {exc}", *exc.args[1:])
        raise


def _load_expanding_mcp(original: Callable[[str], list], tools_config_file: str) -> list:
    import yaml

    if not has_mcp_entries(str(tools_config_file)):
        return original(tools_config_file)
    expanded = expand_tool_config(str(tools_config_file))
    fd, tmp = tempfile.mkstemp(prefix="mcp-expanded-", suffix=".yaml")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            yaml.safe_dump(expanded, out, sort_keys=False)
        return original(tmp)
    finally:
        Path(tmp).unlink(missing_ok=True)
