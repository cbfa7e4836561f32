"""MCP tools over stdio, against real server subprocesses, through the pack's ToolSession.

Schemas from list_tools, results, restart after a crash, timeouts, argument checks against the
server's schema, non-text content, per-trajectory servers, and a server that fails to start.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from verl.tools.tool_registry import initialize_tools_from_config

from extensions.errors import ConfigError
from extensions.tool_session import ToolSession
from tests.tools.mcp_support import FAULT_SERVER, ROOT, pid_alive, servers_json, tool_yaml, wait_dead

FAULT_TOOLS = ("echo", "sleep", "crash", "count", "pid", "picture")


def load(path: Path) -> dict[str, Any]:
    with contextlib.redirect_stdout(io.StringIO()):  # BaseTool prints every schema
        return {tool.name: tool for tool in initialize_tools_from_config(str(path))}


def session(tools: dict[str, Any], timeout_s: float = 60.0) -> ToolSession:
    return ToolSession(tools, {}, timeout_s=timeout_s, concurrency={}, default_concurrency=8, owner="mcp-test")


@pytest.fixture(scope="module")
def fault_tools(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("mcp")
    servers = servers_json(tmp / "servers.json", faults=FAULT_SERVER)
    return load(tool_yaml(tmp / "tools.yaml", servers, *FAULT_TOOLS))


def test_example_server_schemas_come_from_list_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    tools = load(ROOT / "tool_configs" / "mcp_units_search.yaml")
    assert list(tools) == ["convert_units", "search_corpus"]
    assert tools["search_corpus"].tool_schema.model_dump(exclude_none=True) == {
        "type": "function",
        "function": {
            "name": "search_corpus",
            "description": "Search a small encyclopedia of facts (mountains, rivers, animals, buildings) by keywords.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "Keywords, e.g. 'Everest height'"},
                    "top_k": {"type": "integer", "description": "How many lines to return"},
                },
                "required": ["query"],
            },
            "strict": False,
        },
    }


async def test_example_server_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    s = session(load(ROOT / "tool_configs" / "mcp_units_search.yaml"))
    converted = await s.call("convert_units", '{"value": 8849, "from_unit": "m", "to_unit": "ft"}')
    found = await s.call("search_corpus", '{"query": "Everest height", "top_k": 1}')
    wrong = await s.call("convert_units", '{"value": 1, "from_unit": "m", "to_unit": "kg"}')
    too_few = await s.call("search_corpus", '{"query": "Nile", "top_k": 0}')
    await s.close()
    assert (converted.text, converted.error) == ("8849 m = 29032.2 ft", None)
    assert found.text == (
        "[mountains.md] Mount Everest, on the border of Nepal and China, is the highest mountain above sea level: "
        "8,849 metres."
    )
    assert (wrong.error, wrong.text) == (
        "tool_error",
        "Tool 'convert_units' failed: MCPToolError: Error executing tool convert_units: cannot convert length ('m') to mass ('kg')",
    )
    assert (too_few.error, too_few.text) == (
        "bad_arguments",
        "Tool 'search_corpus' failed: MCPArgumentError: arguments do not fit the server's schema for "
        "'search_corpus': top_k: 0 is less than the minimum of 1",
    )


async def test_restarted_after_a_crash_and_the_model_is_told(fault_tools: dict[str, Any]) -> None:
    s = session(fault_tools)
    first = int((await s.call("pid", "{}")).text)
    crashed = await s.call("crash", "{}")
    assert crashed.error == "server_crashed"
    assert crashed.text.startswith(
        "Tool 'crash' failed: MCPServerCrash: MCP server 'faults' ("
    ) and crashed.text.endswith(
        "went away during the call to 'crash' (Connection closed); it is restarted for the next call"
    )
    assert wait_dead(first)
    second = await s.call("pid", "{}")
    assert second.error is None and int(second.text) != first and pid_alive(int(second.text))
    assert fault_tools["pid"].execute  # the same tool object serves on
    await s.close()


async def test_timeout_cancels_the_call_and_the_server_serves_on(fault_tools: dict[str, Any]) -> None:
    s = session(fault_tools, timeout_s=3.0)
    before = (await s.call("pid", "{}")).text
    slow = await s.call("sleep", '{"seconds": 30}')
    after = await s.call("echo", '{"text": "still here"}')
    assert (slow.error, slow.text) == ("timeout", "Tool 'sleep' timed out after 3 s and was cancelled.")
    assert (after.error, after.text) == (None, "echo: still here")
    assert (await s.call("pid", "{}")).text == before
    await s.close()


async def test_bad_arguments_and_unknown_tools(fault_tools: dict[str, Any]) -> None:
    s = session(fault_tools)
    wrong_type = await s.call("echo", '{"text": 5}')
    missing = await s.call("sleep", "{}")
    unknown = await s.call("nope", "{}")
    assert (wrong_type.error, wrong_type.text) == (
        "bad_arguments",
        "Argument 'text' of 'echo' must be of type string, got int.",
    )
    assert (missing.error, missing.text) == (
        "bad_arguments",
        "Missing required argument(s) for 'sleep': seconds. Expected: ['seconds'].",
    )
    assert (unknown.error, unknown.text) == (
        "unknown_tool",
        "Unknown tool 'nope'. Available tools: count, crash, echo, picture, pid, sleep.",
    )


async def test_non_text_content_becomes_a_placeholder(fault_tools: dict[str, Any]) -> None:
    out = await session(fault_tools).call("picture", "{}")
    assert (out.error, out.text) == (
        None,
        "a picture:\n[image content (image/png) omitted: only text is passed to the model]",
    )


async def test_trajectory_lifecycle_gives_each_trajectory_its_own_server(tmp_path: Path) -> None:
    servers = servers_json(tmp_path / "servers.json", faults=FAULT_SERVER)
    tools = load(tool_yaml(tmp_path / "tools.yaml", servers, "count", "pid", lifecycle="trajectory"))
    a, b = session(tools), session(tools)
    ta, tb = SimpleNamespace(request_id="traj-a"), SimpleNamespace(request_id="traj-b")
    counts = [(await s.call("count", "{}", t)).text for s, t in ((a, ta), (a, ta), (b, tb))]
    pid_a, pid_b = [int((await s.call("pid", "{}", t)).text) for s, t in ((a, ta), (b, tb))]
    assert counts == ["1", "2", "1"]  # per-session state: b's server is fresh
    assert pid_a != pid_b
    assert await a.close() == []
    assert wait_dead(pid_a) and pid_alive(pid_b)
    await b.close()
    assert wait_dead(pid_b)


async def test_a_server_that_fails_to_start_is_reported_to_the_model(tmp_path: Path) -> None:
    flag = tmp_path / "refuse"
    server = {**FAULT_SERVER, "env": {"FAULT_SERVER_REFUSE": str(flag)}}
    servers = servers_json(tmp_path / "servers.json", faults=server)
    tools = load(tool_yaml(tmp_path / "tools.yaml", servers, "echo", lifecycle="trajectory"))
    flag.touch()  # from now on the server exits at once with status 2
    s = session(tools)
    out = await s.call("echo", '{"text": "hi"}', SimpleNamespace(request_id="t"))
    await s.close()
    assert out.error == "server_start_failed"
    assert out.text.startswith(f"Tool 'echo' failed: MCPStartError: MCP server 'faults' ({servers}) failed to start: ")
    assert out.text.endswith("server stderr: ...refusing to start: FAULT_SERVER_REFUSE exists")


def test_load_time_errors_name_the_file_and_key(tmp_path: Path) -> None:
    servers = servers_json(tmp_path / "servers.json", faults=FAULT_SERVER)
    with pytest.raises(ConfigError) as missing_tool:
        load(tool_yaml(tmp_path / "a.yaml", servers, "nope"))
    assert str(missing_tool.value) == (
        f"{tmp_path / 'a.yaml'}: {servers}: MCP server 'faults' ({servers}) has no tool 'nope' (config.tool); its tools: "
        "'count', 'crash', 'echo', 'picture', 'pid', 'sleep'"
    )
    broken = servers_json(tmp_path / "broken.json", gone={"command": str(tmp_path / "no-such-server")})
    with pytest.raises(ConfigError) as no_start:
        load(tool_yaml(tmp_path / "b.yaml", broken, "echo"))
    assert str(no_start.value).startswith(f"{tmp_path / 'b.yaml'}: MCP server 'gone' ({broken}) failed to start: ")
    assert "FileNotFoundError" in str(no_start.value)
    assert str(no_start.value).endswith("(needed to read its tool list)")
    with pytest.raises(ConfigError) as bad_key:
        load(tool_yaml(tmp_path / "c.yaml", servers, "echo", lifecycel="worker"))
    assert str(bad_key.value).startswith(f"{tmp_path / 'c.yaml'}: tool 'echo' config: 'lifecycel' is not a config key")
