"""``MCPTool``: one tool of an MCP server as a verl ``BaseTool``, loadable from a native tool YAML entry.

    tools:
      - class_name: extensions.tools.mcp.MCPTool
        config:
          type: native
          mcp_servers_config_path: tool_configs/mcp_servers.json
          server: units_search          # may be left out if the file has one server
          tool: convert_units           # name, description and JSON schema come from list_tools
          lifecycle: worker             # or trajectory: a server per trajectory

Calls go through the pack's ``ToolSession`` like any tool (per-call timeout, concurrency cap,
argument checks, token cap on results). Here, arguments are also checked against the server's
full JSON schema; text content is returned, other content as a placeholder; an error result, a
crash, or a server that cannot start raises an ``MCPToolError`` whose ``kind`` is recorded on the
trajectory (``tool_error``, ``server_crashed``, ``server_start_failed``, ``bad_arguments``).
"""

from __future__ import annotations

import json
import threading
from typing import Any

import jsonschema
import mcp
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
from verl.utils.rollout_trace import rollout_trace_op

from extensions.errors import ConfigError, choices
from extensions.tools.mcp.client import MCPStartError, MCPToolError, hub
from extensions.tools.mcp.config import MCPToolConfig, ServerSpec, load_servers, pick_server
from extensions.tools.schema import parse_tool_config

ANY_TYPE = ["string", "number", "integer", "boolean", "array", "object", "null"]
_USERS: dict[tuple[str, str], set[tuple[str, str]]] = {}
"""Per-trajectory connections: (spec, key) -> the (tool, instance) pairs using it."""
_USERS_LOCK = threading.Lock()


class MCPArgumentError(MCPToolError):
    """The arguments do not fit the server's JSON schema for the tool."""

    kind = "bad_arguments"


def list_server_tools(spec: ServerSpec, settings: MCPToolConfig) -> dict[str, mcp.types.Tool]:
    """The server's tools by name, from this process's connection (started if needed).

    With ``lifecycle: trajectory`` the server is started just to list them, then closed.
    """
    key = "worker" if settings.lifecycle == "worker" else "schema"
    conn = hub().connection(spec, key, startup_timeout_s=settings.startup_timeout_s, rate_limit=settings.rate_limit)

    async def listing() -> dict[str, mcp.types.Tool]:
        try:
            await conn.ensure()
            return dict(conn.tools)
        finally:
            if key == "schema":
                await hub().release(spec, key)

    try:
        return hub().run_sync(listing(), settings.startup_timeout_s + 15)
    except MCPStartError as exc:
        raise ConfigError(f"{exc} (needed to read its tool list)") from None


def openai_schema(tool: mcp.types.Tool) -> OpenAIFunctionToolSchema:
    """verl's tool schema from an MCP tool: name, description, and parameters from ``input_schema``.

    verl needs a ``type`` on every property: one that has none gets the types of its
    ``anyOf``/``oneOf`` branches (``null`` left out), or every JSON type.
    """
    params = dict(tool.input_schema or {})
    properties = {}
    for name, prop in (params.get("properties") or {}).items():
        prop = dict(prop)
        if "type" not in prop:
            branches = [b.get("type") for b in prop.get("anyOf") or prop.get("oneOf") or [] if isinstance(b, dict)]
            types = [t for t in branches if isinstance(t, str) and t != "null"]
            prop["type"] = types[0] if len(types) == 1 else (types or ANY_TYPE)
        if "description" not in prop and "title" in prop:
            prop["description"] = prop["title"]
        properties[name] = prop
    parameters = {"type": "object", "properties": properties, "required": list(params.get("required") or [])}
    description = tool.description or tool.title or tool.name
    return OpenAIFunctionToolSchema.model_validate(
        {"type": "function", "function": {"name": tool.name, "description": description, "parameters": parameters}}
    )


def result_text(result: mcp.types.CallToolResult) -> str:
    """What the model sees of a result: text blocks, text resources, placeholders for everything else."""
    parts = []
    for block in result.content:
        if isinstance(block, mcp.types.TextContent):
            parts.append(block.text)
        elif isinstance(block, (mcp.types.ImageContent, mcp.types.AudioContent)):
            parts.append(f"[{block.type} content ({block.mime_type}) omitted: only text is passed to the model]")
        elif isinstance(block, mcp.types.ResourceLink):
            parts.append(f"[resource link: {block.name} <{block.uri}>]")
        elif isinstance(block, mcp.types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, mcp.types.TextResourceContents):
                parts.append(resource.text)
            else:
                parts.append(f"[binary resource {resource.uri} ({resource.mime_type}) omitted]")
        else:
            parts.append(f"[{getattr(block, 'type', type(block).__name__)} content omitted]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


class MCPTool(BaseTool):
    """One MCP server tool; verl builds one per tool YAML entry (or the pack expands ``type: mcp``)."""

    def __init__(self, config: dict[str, Any], tool_schema: OpenAIFunctionToolSchema | None = None):
        label = str((config or {}).get("tool", "(mcp)"))
        self.settings = parse_tool_config(MCPToolConfig, config, tool=label)
        source = self.settings.mcp_servers_config_path
        self.spec = pick_server(load_servers(source), self.settings.server, source)
        remote = list_server_tools(self.spec, self.settings)
        if self.settings.tool not in remote:
            raise ConfigError(
                f"{source}: {self.spec.where} has no tool {self.settings.tool!r} (config.tool); "
                f"its tools: {choices(remote)}"
            )
        self.remote = remote[self.settings.tool]
        self._validator = jsonschema.Draft202012Validator(self.remote.input_schema or {"type": "object"})
        self._keys: dict[str, str] = {}
        super().__init__(config, tool_schema or openai_schema(self.remote))

    def _argument_problem(self, parameters: dict[str, Any]) -> str | None:
        errors = sorted(self._validator.iter_errors(parameters), key=lambda e: list(e.absolute_path))
        if not errors:
            return None
        where = "/".join(map(str, errors[0].absolute_path)) or "(arguments)"
        return f"arguments do not fit the server's schema for '{self.name}': {where}: {errors[0].message}"

    def _connection_key(self, instance_id: str, agent_data: Any) -> str:
        if self.settings.lifecycle == "worker":
            return "worker"
        key = self._keys.get(instance_id)
        if key is None:
            key = self._keys[instance_id] = f"trajectory:{getattr(agent_data, 'request_id', None) or instance_id}"
            with _USERS_LOCK:
                _USERS.setdefault((self.spec.key, key), set()).add((self.name, instance_id))
        return key

    @rollout_trace_op
    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[ToolResponse, float, dict]:
        problem = self._argument_problem(parameters)
        if problem:
            raise MCPArgumentError(problem)
        key = self._connection_key(instance_id, kwargs.get("agent_data"))
        s = self.settings
        conn = hub().connection(self.spec, key, startup_timeout_s=s.startup_timeout_s, rate_limit=s.rate_limit)
        result = await hub().run(conn.call(self.remote.name, parameters, s.timeout))
        text = result_text(result)
        if result.is_error:
            raise MCPToolError(text or f"the server reported an error with no message ({self.spec.where})")
        return ToolResponse(text=text), 0.0, {"mcp_server": self.spec.name, "mcp_server_starts": conn.starts}

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        key = self._keys.pop(instance_id, None)
        if key is None:
            return
        with _USERS_LOCK:
            users = _USERS.get((self.spec.key, key), set())
            users.discard((self.name, instance_id))
            last = not users
            if last:
                _USERS.pop((self.spec.key, key), None)
        if last:
            await hub().run(hub().release(self.spec, key))
