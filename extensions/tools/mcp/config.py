"""MCP configuration: the standard ``{"mcpServers": {...}}`` JSON and the tool YAML's ``config:``.

A server entry is either stdio (``command``, ``args``, ``env``, ``cwd``) or streamable HTTP (``url``,
``headers``), as Claude Desktop, Cursor and VS Code write them; ``type`` may say which
(``stdio``, ``http``, ``streamable-http``, ``streamableHttp``) and ``disabled: true`` skips a server.
``${VAR}`` in ``args``, ``env``, ``url`` and ``headers`` is replaced by the environment variable (an
unset one fails at load). ``command: python`` (or ``python3``) runs the interpreter of the worker
itself (``sys.executable``), so a server module installed beside the pack is found.

Any other key, a missing ``command``/``url``, or an unknown server fails at load with a
``ConfigError`` naming the file and the key.
"""

from __future__ import annotations

import json
import os
import re
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from extensions.errors import ConfigError, choices

HTTP_TYPES = frozenset({"http", "streamable-http", "streamableHttp", "streamable_http"})
SERVER_KEYS = ("type", "command", "args", "env", "cwd", "url", "headers", "disabled")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class ServerSpec(BaseModel):
    """One entry of ``mcpServers``: how to reach one MCP server."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    """The entry's key in ``mcpServers``."""
    source: str = ""
    """The JSON file it came from (for error messages)."""
    type: str | None = None
    """``stdio`` or one of the streamable-HTTP spellings; inferred from command/url when absent."""
    command: str | None = None
    """The executable of a stdio server."""
    args: tuple[str, ...] = ()
    """Its arguments."""
    env: dict[str, str] = Field(default_factory=dict, repr=False)
    """Extra environment variables (may hold secrets: never logged)."""
    cwd: str | None = None
    """Working directory of the server process; default: the worker's."""
    url: str | None = None
    """Endpoint of a streamable-HTTP server, e.g. ``http://127.0.0.1:8765/mcp``."""
    headers: dict[str, str] = Field(default_factory=dict, repr=False)
    """HTTP headers sent with every request (may hold secrets: never logged)."""
    disabled: bool = False
    """Skip this server."""

    @model_validator(mode="after")
    def _one_transport(self) -> ServerSpec:
        kind = self.transport
        if kind == "stdio" and not self.command:
            raise ValueError("a stdio server needs 'command' (or give 'url' for a streamable-HTTP server)")
        if kind == "http" and not self.url:
            raise ValueError("a streamable-HTTP server needs 'url'")
        if self.command and self.url:
            raise ValueError("give either 'command' (stdio) or 'url' (streamable HTTP), not both")
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        if self.type is not None:
            if self.type == "stdio":
                return "stdio"
            if self.type in HTTP_TYPES:
                return "http"
            raise ValueError(f"'type' {self.type!r} is not supported; valid: {choices(['stdio', *HTTP_TYPES])}")
        return "http" if self.url and not self.command else "stdio"

    @property
    def where(self) -> str:
        """How messages name the server: ``'units' (tool_configs/mcp_servers.json)``."""
        return f"MCP server {self.name!r} ({self.source})" if self.source else f"MCP server {self.name!r}"

    @property
    def key(self) -> str:
        """Identity of the server for connection tables (equal specs share connections)."""
        return self.model_dump_json()

    def resolved_command(self) -> str:
        return sys.executable if self.command in {"python", "python3"} else str(self.command)


def _expand(value: str, key: str, source: str) -> str:
    def variable(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise ConfigError(f"{source}: {key} uses ${{{name}}}, but the environment variable {name} is not set")
        return os.environ[name]

    return _VAR.sub(variable, value)


def _expanded_entry(name: str, entry: Any, source: str) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise ConfigError(f"{source}: mcpServers.{name} must be an object, got {type(entry).__name__}")
    unknown = [key for key in entry if key not in SERVER_KEYS]
    if unknown:
        raise ConfigError(
            f"{source}: mcpServers.{name}: unknown key(s) {choices(unknown)}; valid keys: {choices(SERVER_KEYS)}"
        )
    out = dict(entry)
    for key in ("args",):
        if isinstance(out.get(key), list):
            out[key] = [_expand(str(v), f"mcpServers.{name}.{key}", source) for v in out[key]]
    for key in ("env", "headers"):
        if isinstance(out.get(key), dict):
            out[key] = {k: _expand(str(v), f"mcpServers.{name}.{key}.{k}", source) for k, v in out[key].items()}
    if isinstance(out.get("url"), str):
        out["url"] = _expand(out["url"], f"mcpServers.{name}.url", source)
    return out


def load_servers(path: str | os.PathLike[str]) -> dict[str, ServerSpec]:
    """The enabled servers of a ``{"mcpServers": {...}}`` file, by name. Paths are relative to the cwd."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"MCP servers config {str(path)!r} does not exist (relative paths are from {os.getcwd()})")
    return dict(_load_servers_cached(str(file.resolve()), file.stat().st_mtime_ns, str(path)))


@lru_cache(maxsize=32)
def _load_servers_cached(resolved: str, mtime_ns: int, source: str) -> tuple[tuple[str, ServerSpec], ...]:
    try:
        data = json.loads(Path(resolved).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source}: not valid JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers"), dict):
        raise ConfigError(f'{source}: expected {{"mcpServers": {{NAME: {{...}}}}}} at the top level')
    unknown = [key for key in data if key != "mcpServers"]
    if unknown:
        raise ConfigError(f"{source}: unknown top-level key(s) {choices(unknown)}; valid: 'mcpServers'")
    servers = []
    for name, entry in data["mcpServers"].items():
        values = _expanded_entry(name, entry, source)
        try:
            spec = ServerSpec(name=name, source=source, **values)
            _ = spec.transport
        except ValidationError as exc:
            problems = "; ".join(_problem(e) for e in exc.errors(include_input=False))
            raise ConfigError(f"{source}: mcpServers.{name}: {problems}") from None
        except ValueError as exc:
            raise ConfigError(f"{source}: mcpServers.{name}: {exc}") from None
        if not spec.disabled:
            servers.append((name, spec))
    return tuple(servers)


def _problem(error: Any) -> str:
    message = str(error["msg"]).removeprefix("Value error, ")
    where = ".".join(map(str, error["loc"]))
    return f"{where}: {message}" if where else message


class MCPToolConfig(BaseModel):
    """The ``config:`` of a tool YAML entry whose class is ``extensions.tools.mcp.MCPTool``."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    mcp_servers_config_path: str
    """The ``{"mcpServers": ...}`` JSON file (relative paths are from the working directory)."""
    server: str | None = None
    """Which server of that file; may be left out when the file has one server."""
    tool: str
    """The tool's name on the server; its description and schema come from the server's list_tools."""
    lifecycle: Literal["worker", "trajectory"] = "worker"
    """``worker``: one server process (or HTTP session) per worker process, shared by trajectories;
    ``trajectory``: one per trajectory, for servers that keep per-session state."""
    startup_timeout_s: float = Field(60.0, gt=0)
    """How long starting the server (process start, initialize, list_tools) may take."""
    timeout: float | None = Field(None, gt=0)
    """verl <= 0.8's key: the MCP request timeout in seconds (the loop's tool_timeout_s also applies)."""
    rate_limit: int | None = Field(None, ge=1)
    """verl <= 0.8's key: most calls in flight to this server at once in this worker process."""


def pick_server(servers: dict[str, ServerSpec], name: str | None, source: str) -> ServerSpec:
    """The named server, or the only one; errors name the file and the choices."""
    if name is None:
        if len(servers) != 1:
            raise ConfigError(
                f"{source} has {len(servers)} enabled servers; set config.server to one of {choices(servers)}"
            )
        return next(iter(servers.values()))
    if name not in servers:
        raise ConfigError(f"{source}: no enabled server {name!r} (config.server); valid: {choices(servers)}")
    return servers[name]
