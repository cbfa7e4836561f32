"""MCP client lifecycle: one background event loop per process owns every MCP connection.

verl builds tools in one thread and runs agent loops on other event loops (and tests use a new
loop each). An MCP connection (the ``mcp`` SDK's ``stdio_client`` / ``streamable_http_client``
plus ``ClientSession``) lives in anyio task groups that must stay on one loop, so ``MCPHub``
keeps them all on a daemon thread's loop; callers on any loop use ``await hub.call(...)``, sync
code (a tool's ``__init__``) uses ``hub.run_sync(...)``. Cancelling the caller (a tool timeout)
cancels the request in the hub, and the SDK tells the server.

- A ``Connection`` is one server process (stdio) or HTTP session, started lazily; if it dies it
  is started again by the next call; a start that fails raises ``MCPStartError``.
- ``hub.connection(spec, key)``: key ``"worker"`` is shared by the process; a trajectory key
  gives that trajectory its own server (``lifecycle: trajectory``); ``hub.release(spec, key)``
  closes it.
- ``hub.close()`` closes everything; it runs at interpreter exit (``atexit``). A stdio server
  runs in its own process group and sees EOF on stdin if this process is killed, so it exits too.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import logging
import os
import tempfile
import threading
from collections.abc import Coroutine
from contextlib import AsyncExitStack
from typing import Any, TypeVar

import httpx2
import mcp
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from extensions.errors import ToolError
from extensions.tools.mcp.config import ServerSpec

logger = logging.getLogger(__name__)
T = TypeVar("T")
STDERR_TAIL = 600
CLOSE_TIMEOUT_S = 10.0


class MCPToolError(ToolError):
    """An MCP call failed; ``kind`` is recorded as the call's ``error`` on the trajectory."""

    kind = "tool_error"


class MCPStartError(MCPToolError):
    """The server could not be started (or reached), or did not list its tools in time."""

    kind = "server_start_failed"


class MCPServerCrash(MCPToolError):
    """The connection closed during a call: the server exited or went away."""

    kind = "server_crashed"


class Connection:
    """One session with one server; runs on the hub's loop only.

    An owner task enters the SDK's transport and ``ClientSession`` contexts, publishes the
    session, and holds them open until ``_stop``; so anyio's task groups enter and exit in one task.
    """

    def __init__(self, spec: ServerSpec, *, startup_timeout_s: float, rate_limit: int | None):
        self.spec = spec
        self.startup_timeout_s = startup_timeout_s
        self.limit = asyncio.Semaphore(rate_limit) if rate_limit else None
        self.session: mcp.ClientSession | None = None
        self.tools: dict[str, mcp.types.Tool] = {}
        self.starts = 0
        self._read_stream: Any = None
        self._owner: asyncio.Task[None] | None = None
        self._stop_event = asyncio.Event()
        self._errlog: Any = None
        self._lock = asyncio.Lock()

    @property
    def alive(self) -> bool:
        """Started and its transport still open (the SDK closes the read side when the server goes)."""
        if self.session is None or self._owner is None or self._owner.done():
            return False
        statistics = getattr(self._read_stream, "statistics", None)
        return statistics is None or statistics().open_send_streams > 0

    async def ensure(self) -> mcp.ClientSession:
        """The live session, starting (or restarting) the server first if needed."""
        async with self._lock:
            if not self.alive:
                await self._stop()
                await self._start()
            assert self.session is not None
            return self.session

    async def _start(self) -> None:
        self.starts += 1
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._stop_event = asyncio.Event()
        self._owner = asyncio.create_task(self._own(ready, self._stop_event), name=f"mcp:{self.spec.name}")
        try:
            await asyncio.wait_for(asyncio.shield(ready), self.startup_timeout_s)
        except asyncio.TimeoutError:
            await self._stop(cancel=True)
            raise MCPStartError(
                f"{self.spec.where} failed to start: no tool list within {self.startup_timeout_s:g} s"
                f"{self._stderr_tail()}"
            ) from None
        except MCPStartError:
            await self._stop()
            raise

    async def _own(self, ready: asyncio.Future[None], stop: asyncio.Event) -> None:
        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport())
                session = await stack.enter_async_context(mcp.ClientSession(read, write))
                await session.initialize()
                self.tools = await _list_all_tools(session)
                self.session, self._read_stream = session, read
                ready.set_result(None)
                await stop.wait()
        except BaseException as exc:
            if not ready.done():
                detail = _describe(exc)
                ready.set_exception(MCPStartError(f"{self.spec.where} failed to start: {detail}{self._stderr_tail()}"))
            if isinstance(exc, asyncio.CancelledError):
                raise
            logger.debug("%s: connection ended: %s", self.spec.where, _describe(exc))
        finally:
            self.session, self._read_stream = None, None

    def _transport(self) -> Any:
        spec = self.spec
        if spec.transport == "http":
            client = httpx2.AsyncClient(headers=spec.headers, timeout=httpx2.Timeout(30.0, read=300.0))
            return _http_transport(client, str(spec.url))
        if self._errlog is None:
            # the server's stderr, kept for error messages; closed in close()
            self._errlog = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")  # noqa: SIM115
        params = StdioServerParameters(
            command=spec.resolved_command(), args=list(spec.args), env=dict(spec.env) or None, cwd=spec.cwd
        )
        return stdio_client(params, errlog=self._errlog)

    def _stderr_tail(self) -> str:
        if self._errlog is None:
            return ""
        try:
            self._errlog.seek(0)
            text = self._errlog.read().strip()
        except (OSError, ValueError):
            return ""
        return f"; server stderr: ...{text[-STDERR_TAIL:]}" if text else ""

    async def call(self, tool: str, arguments: dict[str, Any], timeout_s: float | None) -> mcp.types.CallToolResult:
        session = await self.ensure()
        if self.limit is not None:
            async with self.limit:
                return await self._call(session, tool, arguments, timeout_s)
        return await self._call(session, tool, arguments, timeout_s)

    async def _call(
        self, session: mcp.ClientSession, tool: str, arguments: dict[str, Any], timeout_s: float | None
    ) -> mcp.types.CallToolResult:
        try:
            return await session.call_tool(tool, arguments, read_timeout_seconds=timeout_s)
        except mcp.MCPError as exc:
            if exc.error.code == mcp.types.CONNECTION_CLOSED or not self.alive:
                raise MCPServerCrash(
                    f"{self.spec.where} went away during the call to '{tool}' ({exc.error.message}); "
                    f"it is restarted for the next call{self._stderr_tail()}"
                ) from None
            raise MCPToolError(f"{self.spec.where} rejected the call to '{tool}': {exc.error.message}") from None

    async def _stop(self, *, cancel: bool = False) -> None:
        owner, self._owner = self._owner, None
        if owner is None:
            return
        self._stop_event.set()
        if cancel:
            owner.cancel()
        done, _ = await asyncio.wait({owner}, timeout=CLOSE_TIMEOUT_S)
        if not done:
            owner.cancel()
            await asyncio.wait({owner}, timeout=CLOSE_TIMEOUT_S)

    async def close(self) -> None:
        async with self._lock:
            await self._stop()
            if self._errlog is not None:
                self._errlog.close()
                self._errlog = None


def _http_transport(client: httpx2.AsyncClient, url: str) -> Any:
    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def transport() -> Any:
        async with client, streamable_http_client(url, http_client=client) as streams:
            yield streams

    return transport()


async def _list_all_tools(session: mcp.ClientSession) -> dict[str, mcp.types.Tool]:
    tools: dict[str, mcp.types.Tool] = {}
    cursor = None
    while True:
        params = mcp.types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.update((t.name, t) for t in page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools


def _describe(exc: BaseException) -> str:
    """The innermost useful message of a (possibly grouped) exception."""
    while getattr(exc, "exceptions", None):  # an (anyio task group's) exception group
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    if isinstance(exc, mcp.MCPError):
        return exc.error.message
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class MCPHub:
    """Every MCP connection of this process, on one background event loop."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="mcp-hub", daemon=True)
        self._thread.start()
        self._connections: dict[tuple[str, str], Connection] = {}
        self._table_lock = threading.Lock()
        self.closed = False

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        if self.closed:
            coro.close()
            raise MCPToolError("the MCP client of this process is shut down")
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run_sync(self, coro: Coroutine[Any, Any, T], timeout_s: float) -> T:
        """Run ``coro`` on the hub from synchronous code (not from the hub's own thread)."""
        future = self.submit(coro)
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise MCPStartError(f"MCP request timed out after {timeout_s:g} s") from None

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the hub from any other event loop; cancelling the caller cancels it."""
        return await asyncio.wrap_future(self.submit(coro))

    def connection(self, spec: ServerSpec, key: str, *, startup_timeout_s: float, rate_limit: int | None) -> Connection:
        """The connection for (spec, key), created (not started) on first use."""
        with self._table_lock:  # callers on several threads (tool __init__, agent loops)
            conn = self._connections.get((spec.key, key))
            if conn is None:
                conn = self._connections[(spec.key, key)] = Connection(
                    spec, startup_timeout_s=startup_timeout_s, rate_limit=rate_limit
                )
            return conn

    async def release(self, spec: ServerSpec, key: str) -> None:
        """Close and forget the connection (spec, key); runs on the hub's loop."""
        with self._table_lock:
            conn = self._connections.pop((spec.key, key), None)
        if conn is not None:
            await conn.close()

    def open_connections(self) -> int:
        return sum(conn.alive for conn in self._connections.values())

    async def _close_all(self) -> None:
        with self._table_lock:
            conns, self._connections = list(self._connections.values()), {}
        await asyncio.gather(*(conn.close() for conn in conns), return_exceptions=True)

    def close(self) -> None:
        """Close every connection (stdio servers exit), then stop the loop. Idempotent."""
        if self.closed or os.getpid() != self.pid:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._close_all(), self.loop).result(CLOSE_TIMEOUT_S)
        except Exception as exc:
            logger.warning("closing MCP connections: %s", _describe(exc))
        self.closed = True
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(CLOSE_TIMEOUT_S)
        if not self._thread.is_alive():
            self.loop.close()


_HUB: MCPHub | None = None
_HUB_LOCK = threading.Lock()


def hub() -> MCPHub:
    """This process's hub (a forked child gets its own)."""
    global _HUB
    with _HUB_LOCK:
        if _HUB is None or _HUB.closed or _HUB.pid != os.getpid():
            _HUB = MCPHub()
            atexit.register(_HUB.close)
        return _HUB


def shutdown() -> None:
    """Close this process's MCP connections now (also done at exit)."""
    with _HUB_LOCK:
        if _HUB is not None:
            _HUB.close()
