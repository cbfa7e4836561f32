"""MCP configuration: the mcpServers JSON, MCPTool's config, verl <= 0.8's `type: mcp` YAML, and result text.

Bad input fails at load with the file and the key named; everything here runs without a server
except the two expansion tests, which start the example server.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import mcp.types as mt
import pytest
import yaml

from extensions.errors import ConfigError
from extensions.tools.mcp.config import load_servers
from extensions.tools.mcp.legacy import expand_tool_config
from extensions.tools.mcp.tool import MCPTool, openai_schema, result_text
from tests.tools.mcp_support import EXAMPLE_SERVER, servers_json


def bad_servers(tmp_path: Path, text: str) -> str:
    path = tmp_path / "servers.json"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_servers(path)
    return str(err.value).replace(str(path), "FILE")


def test_servers_json_bad_input_names_file_and_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCP_TEST_UNSET", raising=False)
    cases = {
        '{"mcpServers": {"s": {"command": "x", "cmd": "y"}}}': "FILE: mcpServers.s: unknown key(s) 'cmd'; valid keys: "
        "'args', 'command', 'cwd', 'disabled', 'env', 'headers', 'type', 'url'",
        '{"mcpServers": {"s": {"args": ["-m", "x"]}}}': "FILE: mcpServers.s: a stdio server "
        "needs 'command' (or give 'url' for a streamable-HTTP server)",
        '{"mcpServers": {"s": {"type": "http", "command": "x"}}}': "FILE: mcpServers.s: a "
        "streamable-HTTP server needs 'url'",
        '{"mcpServers": {"s": {"type": "sse", "url": "http://127.0.0.1:1/sse"}}}': "FILE: mcpServers.s: "
        "'type' 'sse' is not supported; valid: 'http', 'stdio', 'streamable-http', 'streamableHttp', "
        "'streamable_http'",
        '{"mcpServers": {"s": {"url": "http://127.0.0.1:1/mcp", "headers": {"A": "${MCP_TEST_UNSET}"}}}}': "FILE: "
        "mcpServers.s.headers.A uses ${MCP_TEST_UNSET}, but the environment variable MCP_TEST_UNSET is not set",
        '{"servers": {}}': 'FILE: expected {"mcpServers": {NAME: {...}}} at the top level',
        '{"mcpServers": {}, "x": 1}': "FILE: unknown top-level key(s) 'x'; valid: 'mcpServers'",
        "{not json": "FILE: not valid JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
    }
    got = {text: bad_servers(tmp_path, text) for text in cases}
    assert got == cases


def test_servers_json_expands_variables_and_hides_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_TEST_TOKEN", "s3cret")
    path = servers_json(
        tmp_path / "servers.json",
        local={"command": "python", "args": ["-m", "srv"], "env": {"TOKEN": "${MCP_TEST_TOKEN}"}},
        remote={
            "type": "streamableHttp",
            "url": "http://127.0.0.1:9/mcp",
            "headers": {"Authorization": "Bearer ${MCP_TEST_TOKEN}"},
        },
        off={"command": "x", "disabled": True},
    )
    servers = load_servers(path)
    assert list(servers) == ["local", "remote"]
    local, remote = servers["local"], servers["remote"]
    assert (local.transport, local.resolved_command(), local.env) == ("stdio", sys.executable, {"TOKEN": "s3cret"})
    assert (remote.transport, remote.headers) == ("http", {"Authorization": "Bearer s3cret"})
    assert "s3cret" not in repr(local) + repr(remote)
    with pytest.raises(ConfigError, match=r"does not exist \(relative paths are from "):
        load_servers(tmp_path / "missing.json")


def test_mcp_tool_config_errors_before_any_server_starts(tmp_path: Path) -> None:
    two = servers_json(tmp_path / "two.json", a={"command": "x"}, b={"command": "y"})
    with pytest.raises(ConfigError) as unknown_key:
        MCPTool({"type": "native", "mcp_servers_config_path": str(two), "tool": "t", "life": "worker"})
    assert str(unknown_key.value).startswith("tool 't' config: 'life' is not a config key. Valid keys: ")
    with pytest.raises(ConfigError) as which:
        MCPTool({"type": "native", "mcp_servers_config_path": str(two), "tool": "t"})
    assert str(which.value) == f"{two} has 2 enabled servers; set config.server to one of 'a', 'b'"
    with pytest.raises(ConfigError) as no_server:
        MCPTool({"type": "native", "mcp_servers_config_path": str(two), "server": "c", "tool": "t"})
    assert str(no_server.value) == f"{two}: no enabled server 'c' (config.server); valid: 'a', 'b'"


def legacy_yaml(tmp_path: Path, entry: dict[str, Any]) -> str:
    path = tmp_path / "legacy.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "tools": [
                    {"class_name": "extensions.tools.calculator.CalculatorTool", "config": {"type": "native"}},
                    entry,
                ]
            }
        )
    )
    return str(path)


def test_verl08_yaml_bad_input_names_file_and_key(tmp_path: Path) -> None:
    servers = str(servers_json(tmp_path / "servers.json", units=EXAMPLE_SERVER))
    base = {"class_name": "verl.tools.mcp_base_tool.MCPBaseTool", "config": {"type": "mcp"}}
    cases = [
        (
            {**base, "mcp": {"mcp_servers_config_path": servers}, "extra": 1},
            "tools[1]: unknown key(s) 'extra'; valid keys of an MCP entry: 'class_name', 'config', 'mcp'",
        ),
        ({**base, "mcp": {}}, 'tools[1].mcp.mcp_servers_config_path is missing (the {"mcpServers": ...} JSON file)'),
        (
            {**base, "mcp": {"mcp_servers_config_path": servers, "tools": ["x"]}},
            "tools[1].mcp: unknown key(s) 'tools'; valid: 'mcp_servers_config_path', 'tool_selected_list'",
        ),
        (
            {**base, "config": {"type": "mcp", "retries": 3}, "mcp": {"mcp_servers_config_path": servers}},
            "tools[1].config: unknown key(s) 'retries'; valid: 'type', 'lifecycle', 'rate_limit', 'server', 'startup_timeout_s', 'timeout'",
        ),
        (
            {
                **base,
                "class_name": "extensions.tools.calculator.CalculatorTool",
                "mcp": {"mcp_servers_config_path": servers},
            },
            "tools[1].class_name: 'extensions.tools.calculator.CalculatorTool' is not an extensions.tools.mcp.MCPTool (sub)class, needed for type: mcp",
        ),
    ]
    for entry, message in cases:
        path = legacy_yaml(tmp_path, entry)
        with pytest.raises(ConfigError) as err:
            expand_tool_config(path)
        assert str(err.value) == f"{path}: {message}"


def test_verl08_yaml_expands_to_native_entries(tmp_path: Path) -> None:
    servers = str(servers_json(tmp_path / "servers.json", units=EXAMPLE_SERVER))
    entry = {
        "class_name": "verl.tools.mcp_search_tool.MCPSearchTool",
        "config": {"type": "mcp", "rate_limit": 4},
        "mcp": {"mcp_servers_config_path": servers},
    }
    expanded = expand_tool_config(legacy_yaml(tmp_path, entry))
    assert expanded["tools"][1:] == [
        {
            "class_name": "extensions.tools.mcp.MCPTool",
            "config": {
                "type": "native",
                "mcp_servers_config_path": servers,
                "rate_limit": 4,
                "server": "units",
                "tool": tool,
            },
        }
        for tool in ("convert_units", "search_corpus")
    ]
    path = legacy_yaml(
        tmp_path,
        {**entry, "mcp": {"mcp_servers_config_path": servers, "tool_selected_list": ["convert", "search_corpus"]}},
    )
    with pytest.raises(ConfigError) as err:
        expand_tool_config(path)
    assert str(err.value) == (
        f"{path}: tools[1].mcp.tool_selected_list: 'convert' not offered by the servers of {servers}; "
        "offered: 'convert_units', 'search_corpus'"
    )


def test_schema_without_types_gets_them_from_anyof() -> None:
    tool = mt.Tool(
        name="t",
        input_schema={
            "type": "object",
            "properties": {"a": {"anyOf": [{"type": "integer"}, {"type": "null"}], "title": "A"}, "b": {}},
        },
    )
    assert openai_schema(tool).model_dump(exclude_none=True)["function"] == {
        "name": "t",
        "description": "t",
        "parameters": {
            "type": "object",
            "properties": {
                "a": {"type": "integer", "description": "A"},
                "b": {"type": ["string", "number", "integer", "boolean", "array", "object", "null"]},
            },
            "required": [],
        },
        "strict": False,
    }


def test_result_text_placeholders() -> None:
    result = mt.CallToolResult(
        content=[
            mt.TextContent(type="text", text="hello"),
            mt.AudioContent(type="audio", data="AAAA", mime_type="audio/wav"),
            mt.ResourceLink(type="resource_link", name="notes", uri="file:///notes.txt"),
            mt.EmbeddedResource(type="resource", resource=mt.TextResourceContents(uri="file:///a.txt", text="inline")),
            mt.EmbeddedResource(
                type="resource",
                resource=mt.BlobResourceContents(
                    uri="file:///b.bin", blob="AA==", mime_type="application/octet-stream"
                ),
            ),
        ]
    )
    assert result_text(result).split("\n") == [
        "hello",
        "[audio content (audio/wav) omitted: only text is passed to the model]",
        "[resource link: notes <file:///notes.txt>]",
        "inline",
        "[binary resource file:///b.bin (application/octet-stream) omitted]",
    ]
    structured = mt.CallToolResult(content=[], structured_content={"result": 3})
    assert result_text(structured) == json.dumps({"result": 3})
