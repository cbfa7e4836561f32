"""No orphan MCP server processes: closed at exit, on shutdown(), and when the worker is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.tools.mcp_support import FAULT_SERVER, ROOT, pid_alive, servers_json, tool_yaml, wait_dead

CHILD = """
import asyncio, contextlib, io, sys, time
from verl.tools.tool_registry import initialize_tools_from_config
with contextlib.redirect_stdout(io.StringIO()):
    tools = {t.name: t for t in initialize_tools_from_config(sys.argv[1])}
async def pids():
    out = []
    for key in ("a", "b"):  # lifecycle trajectory for b's yaml: one server per trajectory key
        iid, _ = await tools["pid"].create()
        response, _, _ = await tools["pid"].execute(iid, {}, agent_data=type("D", (), {"request_id": key})())
        out.append(response.text)
    return out
print(" ".join(asyncio.run(pids())), flush=True)
if sys.argv[2] == "hang":
    time.sleep(600)
"""


def server_children(parent: int) -> list[int]:
    """Live processes whose parent is ``parent`` and that run an MCP test server."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(") ", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == parent and fields[0] != "Z" and b"mcp_fault_server" in cmdline:
            found.append(int(stat.parent.name))
    return found


def start_child(tmp_path: Path, mode: str, lifecycle: str) -> tuple[subprocess.Popen[str], list[int]]:
    servers = servers_json(tmp_path / "servers.json", faults=FAULT_SERVER)
    tools = tool_yaml(tmp_path / "tools.yaml", servers, "pid", lifecycle=lifecycle)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tools), mode], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    pids = [int(p) for p in line.split()]
    assert len(pids) == 2, f"child printed {line!r}"
    return child, pids


@pytest.mark.parametrize("lifecycle", ["worker", "trajectory"])
def test_servers_close_when_the_worker_exits(tmp_path: Path, lifecycle: str) -> None:
    child, pids = start_child(tmp_path, "exit", lifecycle)
    with child, child.stdout:  # type: ignore[union-attr]
        assert child.wait(60) == 0
    assert len(set(pids)) == (1 if lifecycle == "worker" else 2)
    assert all(wait_dead(pid, 5) for pid in pids)


def test_servers_exit_when_the_worker_is_killed(tmp_path: Path) -> None:
    child, pids = start_child(tmp_path, "hang", "worker")
    assert pid_alive(pids[0])
    with child, child.stdout:  # type: ignore[union-attr]
        child.send_signal(signal.SIGKILL)  # no atexit: the server must notice by itself
        child.wait(30)
    assert wait_dead(pids[0], 15)  # stdin closes with the worker; the server exits on EOF


async def test_shutdown_leaves_no_server_process(tmp_path: Path) -> None:
    from verl.tools.tool_registry import initialize_tools_from_config

    from extensions.tools.mcp.client import shutdown

    servers = servers_json(tmp_path / "servers.json", faults=FAULT_SERVER)
    tools = initialize_tools_from_config(str(tool_yaml(tmp_path / "tools.yaml", servers, "pid", "count")))
    iid, _ = await tools[0].create()
    pid = int((await tools[0].execute(iid, {}))[0].text)
    assert pid in server_children(os.getpid())
    shutdown()
    assert wait_dead(pid, 5)
    assert server_children(os.getpid()) == []
