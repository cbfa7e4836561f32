"""The python_exec tool: derived schema, real runs, limits from config, bad arguments as text, cancellation."""

from __future__ import annotations

import asyncio
import os
import sys

import pytest

from extensions.errors import ConfigError
from extensions.tools import sandbox
from extensions.tools.python_exec import PythonExecTool
from extensions.tools.sandbox import user_processes

USAGE = "python_exec takes code (string, required)."


@pytest.fixture
def tool() -> PythonExecTool:
    return PythonExecTool({"type": "native", "wall_time_s": 1, "cpu_time_s": 1})


def test_schema_is_derived_from_the_function(tool: PythonExecTool) -> None:
    schema = tool.tool_schema.model_dump(exclude_none=True)
    assert tool.name == "python_exec" and schema["type"] == "function"
    assert schema["function"]["description"] == (
        "Run a Python 3 program and return what it printed.\n\n"
        "Each call starts a fresh program: only the standard library, no network, no files outside its own\n"
        "working directory, nothing kept between calls, and limits on time, memory and output. Print what you\n"
        "want to see."
    )
    assert schema["function"]["parameters"] == {
        "type": "object",
        "properties": {
            "code": {
                "type": "string",
                "description": 'A complete Python program, for example "print(sum(range(1, 101)))".',
            }
        },
        "required": ["code"],
    }


def test_config_sets_the_limits(tool: PythonExecTool) -> None:
    assert (tool.limits.wall_time_s, tool.limits.cpu_time_s, tool.limits.memory_mb) == (1, 1, 512)


def test_bad_config_names_the_keys_and_the_valid_ones() -> None:
    with pytest.raises(ConfigError) as caught:
        PythonExecTool({"type": "native", "wall_time": 5, "memory_mb": 0})
    assert str(caught.value) == (
        "tool 'python_exec' config: 'memory_mb': Input should be greater than or equal to 64 (got 0); "
        "'wall_time' is not a config key. Valid keys: 'cpu_time_s', 'file_size_bytes', 'latency', 'memory_mb', "
        "'open_files', 'output_bytes', 'processes', 'type', 'wall_time_s'. "
        "Fix the tool's `config:` entry in its tool YAML."
    )


async def test_runs_real_code() -> None:
    tool = PythonExecTool({"type": "native", "wall_time_s": 30, "cpu_time_s": 30})  # roomy: CI may be loaded
    instance_id, _ = await tool.create(create_kwargs={})
    response, reward, metrics = await tool.execute(instance_id, {"code": "print(sum(range(1, 101)))"})
    await tool.release(instance_id)
    assert (response.text, reward) == ("5050\n[exit status 0]", 0.0)
    assert {k: metrics[k] for k in ("exit_code", "timed_out", "killed_reason")} == {
        "exit_code": 0,
        "timed_out": False,
        "killed_reason": None,
    }


async def test_limits_from_config_apply(tool: PythonExecTool) -> None:
    response, _, metrics = await tool.execute("t", {"code": "import time\ntime.sleep(30)"})
    assert response.text == "[killed: wall time limit 1s exceeded]"
    assert metrics["timed_out"] is True


@pytest.mark.parametrize(
    ("parameters", "text"),
    [
        ({}, f"error: missing required argument 'code'. {USAGE}"),
        ({"code": 5}, f"error: argument 'code' must be string, got integer. {USAGE}"),
        ({"code": "print(1)", "lang": "py"}, f"error: unexpected argument 'lang'. {USAGE}"),
        ("print(1)", f"error: arguments must be a JSON object, got string. {USAGE}"),
    ],
)
async def test_bad_arguments_come_back_as_text(tool: PythonExecTool, parameters: object, text: str) -> None:
    response, reward, metrics = await tool.execute("t", parameters)
    assert (response.text, reward, metrics) == (text, 0.0, {"error": "bad_arguments"})


async def test_a_sandbox_that_cannot_start_is_reported_as_text(
    tool: PythonExecTool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "executable", "/nonexistent/python3")
    response, reward, metrics = await tool.execute("t", {"code": "print(1)"})
    assert response.text == (
        "error: the sandbox could not run the code: could not start /nonexistent/python3 for the sandbox: "
        "[Errno 2] No such file or directory: '/nonexistent/python3'"
    )
    assert (reward, metrics) == (0.0, {"error": "sandbox"})


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the run a uid the test can watch")
async def test_the_agent_loops_timeout_kills_the_program(tool: PythonExecTool, monkeypatch: pytest.MonkeyPatch) -> None:
    uid = sandbox.UID_BASE + sandbox.UID_SPAN + 4343
    monkeypatch.setattr(sandbox, "_sandbox_ids", lambda: sandbox.RunAs(uid, unique=True))
    call = tool.execute("t", {"code": "import time\nprint('working', flush=True)\ntime.sleep(30)"})
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(call, timeout=0.5)
    assert user_processes(uid) == []
