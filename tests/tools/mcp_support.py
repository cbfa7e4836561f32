"""Helpers for the MCP tests: servers JSON and tool YAML files, a free port, an HTTP server process."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
FAULT_SERVER = {"command": "python", "args": ["-m", "tests.fixtures.mcp_fault_server"], "cwd": str(ROOT)}
EXAMPLE_SERVER = {"command": "python", "args": ["-m", "extensions.tools.mcp.example_server"], "cwd": str(ROOT)}


def servers_json(path: Path, **servers: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def tool_yaml(path: Path, servers: Path, *tools: str, server: str | None = None, **config: Any) -> Path:
    """A tool YAML with one native MCPTool entry per tool name."""
    entries = [
        {
            "class_name": "extensions.tools.mcp.MCPTool",
            "config": {
                "type": "native",
                "mcp_servers_config_path": str(servers),
                **({"server": server} if server else {}),
                "tool": tool,
                **config,
            },
        }
        for tool in tools
    ]
    path.write_text(yaml.safe_dump({"tools": entries}))
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError):  # a zombie is dead for our purposes
        if Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z"):
            return False
    return True


def wait_dead(pid: int, timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    return False


@contextlib.contextmanager
def http_example_server() -> Iterator[str]:
    """The example server over streamable HTTP on 127.0.0.1 (a free port); yields its URL."""
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "extensions.tools.mcp.example_server",
            "--transport",
            "streamable-http",
            "--port",
            str(port),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            if proc.poll() is not None:
                raise RuntimeError(f"the HTTP example server exited with {proc.returncode}")
            time.sleep(0.1)
        else:
            raise RuntimeError(f"the HTTP example server did not listen on port {port} within 60 s")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
