"""A real HTTP server on 127.0.0.1 with scripted replies: OpenAI ``/v1/chat/completions`` and a user-turn POST.

    async with ScriptedChatServer({"ASK-1": ["It costs 3 dollars.", Fault(500)]}) as server:
        server.base_url        # http://127.0.0.1:<port>/v1   (OpenAIBackend's base_url)
        server.user_turn_url   # http://127.0.0.1:<port>/user_turn   (HTTPUserInteraction's url)
        server.requests        # every request: path, headers, JSON body (or raw text)

A script maps a marker string to replies, one per request whose body contains the marker (the
first marker found, in script order). A reply is a string (the message content), a dict (sent
as the JSON body as it is), ``Fault(status, body)``, ``Raw(text)`` (a body that is not JSON) or
``Delay(seconds, reply)``. For ``/user_turn`` a string becomes ``{"content": text, "stop": false}``.
It is an aiohttp server in the caller's event loop; CPU tests use it as the real endpoint.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web


@dataclass(frozen=True)
class Fault:
    """Answer with HTTP ``status`` and ``body``."""

    status: int = 500
    body: str = "internal error"


@dataclass(frozen=True)
class Raw:
    """Answer 200 with a body that is sent as it is (e.g. not JSON)."""

    text: str


@dataclass(frozen=True)
class Delay:
    """Wait ``seconds``, then answer ``reply``."""

    seconds: float
    reply: Any


class ScriptedChatServer:
    """Scripted OpenAI-compatible and user-turn endpoints; see the module docstring."""

    def __init__(self, script: dict[str, Sequence[Any]], *, echo_headers: bool = False):
        self.script = {marker: list(replies) for marker, replies in script.items()}
        self.echo_headers = echo_headers
        self.requests: list[dict[str, Any]] = []
        self._next: dict[str, int] = {}
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def user_turn_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/user_turn"

    async def __aenter__(self) -> ScriptedChatServer:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        app.router.add_post("/user_turn", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def count(self, marker: str) -> int:
        """How many requests the marker's script has answered."""
        return self._next.get(marker, 0)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        text = await request.text()
        try:
            body: Any = json.loads(text)
        except ValueError:
            body = text
        self.requests.append({"path": request.path, "headers": dict(request.headers), "body": body})
        marker = next((m for m in self.script if m in text), None)
        if marker is None:
            return web.json_response(
                {"error": f"no script marker in the request; markers: {list(self.script)}"}, status=400
            )
        turn = self._next.get(marker, 0)
        self._next[marker] = turn + 1
        replies = self.script[marker]
        if turn >= len(replies):
            return web.json_response({"error": f"script {marker!r} has {len(replies)} replies"}, status=400)
        return await self._respond(request, replies[turn])

    async def _respond(self, request: web.Request, reply: Any) -> web.StreamResponse:
        if isinstance(reply, Delay):
            await asyncio.sleep(reply.seconds)
            return await self._respond(request, reply.reply)
        if isinstance(reply, Fault):
            body = reply.body
            if self.echo_headers:  # a careless service that echoes the request's headers
                body += " " + json.dumps(dict(request.headers))
            return web.Response(status=reply.status, text=body)
        if isinstance(reply, Raw):
            return web.Response(status=200, text=reply.text, content_type="application/json")
        if isinstance(reply, dict):
            return web.json_response(reply)
        if request.path == "/user_turn":
            return web.json_response({"content": str(reply), "stop": False})
        return web.json_response(
            {
                "id": "chatcmpl-scripted",
                "object": "chat.completion",
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": str(reply)}, "finish_reason": "stop"}
                ],
            }
        )
