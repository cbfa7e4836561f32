"""One shared HTTP client for the user interactions that call endpoints, with retries and a cap.

    endpoint = JsonEndpoint("http://127.0.0.1:8000/v1/chat/completions", api_key_env="USER_MODEL_KEY",
                            timeout_s=60, max_retries=2, backoff_s=0.5, max_concurrency=16)
    reply = await endpoint.post({"model": "m", "messages": [...]}, parse=lambda data: data["choices"])

- One ``httpx.AsyncClient`` per event loop, shared by every endpoint and trajectory of the process
  (clients of closed loops are dropped; ``close_clients()`` closes the running loop's client).
- A per-request timeout; retries with exponential backoff on timeouts, connection errors, HTTP 429
  and 5xx, malformed JSON and replies that ``parse`` rejects; other 4xx fail at once.
- At most ``max_concurrency`` requests of one endpoint in flight per event loop.
- The API key is read from an environment variable whose *name* is configured; a missing variable
  fails at construction, naming it. The key never appears in an error or a log line: the URL is
  shown without query string or credentials, and any reply text quoted in an error is redacted.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import weakref
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx

from extensions.errors import ConfigError, LongflowError

logger = logging.getLogger(__name__)
T = TypeVar("T")
SNIPPET_CHARS = 200
"""How much of a bad reply an error quotes."""

_CLIENTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = weakref.WeakKeyDictionary()
_LIMITS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, asyncio.Semaphore]] = (
    weakref.WeakKeyDictionary()
)


class EndpointError(LongflowError):
    """An endpoint did not give a usable reply; the message names the URL and the failure."""


class _Retryable(Exception):
    """A failure worth another attempt."""


def shared_client() -> httpx.AsyncClient:
    """The running event loop's shared client (created on first use)."""
    loop = asyncio.get_running_loop()
    client = _CLIENTS.get(loop)
    if client is None or client.is_closed:
        client = _CLIENTS[loop] = httpx.AsyncClient(limits=httpx.Limits(max_connections=256))
    return client


async def close_clients() -> None:
    """Close the running event loop's shared client (tests and drivers call it before the loop ends)."""
    client = _CLIENTS.pop(asyncio.get_running_loop(), None)
    if client is not None:
        await client.aclose()


def display_url(url: str) -> str:
    """``url`` without credentials or query string: what errors and logs show."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def read_api_key(env_name: str | None, *, owner: str) -> str | None:
    """The key in environment variable ``env_name`` (None when no name is configured)."""
    if env_name is None:
        return None
    if not isinstance(env_name, str) or not env_name:
        raise ConfigError(f"{owner}: api_key_env must be the NAME of an environment variable, got {env_name!r}")
    value = os.environ.get(env_name)
    if not value:
        raise ConfigError(f"{owner}: environment variable {env_name!r} (api_key_env) is not set or empty")
    return value


class JsonEndpoint:
    """POSTs JSON to one URL and returns the parsed reply; see the module docstring."""

    def __init__(
        self,
        url: str,
        *,
        owner: str,
        api_key_env: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 2,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
        max_concurrency: int = 16,
    ):
        problems = []
        if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https"):
            problems.append(f"url must be an http(s) URL, got {url!r}")
        for key, value, low in (("timeout_s", timeout_s, 0.0), ("backoff_s", backoff_s, 0.0)):
            if not isinstance(value, (int, float)) or value < low or (key == "timeout_s" and value == 0):
                problems.append(f"{key} must be a number > 0, got {value!r}")
        for key, value, low in (("max_retries", max_retries, 0), ("max_concurrency", max_concurrency, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                problems.append(f"{key} must be an integer >= {low}, got {value!r}")
        if problems:
            raise ConfigError(f"{owner}: " + "; ".join(problems))
        self.url, self.owner = url, owner
        self.shown_url = display_url(url)
        self._key = read_api_key(api_key_env, owner=owner)
        self.timeout_s, self.max_retries = float(timeout_s), max_retries
        self.backoff_s, self.max_backoff_s, self.max_concurrency = (
            float(backoff_s),
            float(max_backoff_s),
            max_concurrency,
        )

    def __repr__(self) -> str:
        return f"JsonEndpoint({self.shown_url!r}, owner={self.owner!r})"

    def redact(self, text: str) -> str:
        """``text`` with the API key replaced by ``***``."""
        return text.replace(self._key, "***") if self._key else text

    def _semaphore(self) -> asyncio.Semaphore:
        table = _LIMITS.setdefault(asyncio.get_running_loop(), {})
        semaphore = table.get(id(self))
        if semaphore is None:
            semaphore = table[id(self)] = asyncio.Semaphore(self.max_concurrency)
        return semaphore

    async def post(self, payload: dict[str, Any], *, parse: Callable[[Any], T]) -> T:
        """POST ``payload``; ``parse`` turns the JSON reply into the result or raises ValueError/KeyError/TypeError."""
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        failures: list[str] = []
        async with self._semaphore():
            for attempt in range(self.max_retries + 1):
                if attempt:
                    await asyncio.sleep(min(self.backoff_s * 2 ** (attempt - 1), self.max_backoff_s))
                try:
                    return await self._attempt(payload, headers, parse)
                except _Retryable as exc:
                    failures.append(self.redact(str(exc)))
                    logger.warning(
                        "%s: POST %s attempt %d failed: %s", self.owner, self.shown_url, attempt + 1, failures[-1]
                    )
                except EndpointError:
                    raise
        raise EndpointError(
            f"{self.owner}: POST {self.shown_url} failed after {len(failures)} attempt(s): {failures[-1]}"
        )

    async def _attempt(self, payload: dict[str, Any], headers: dict[str, str], parse: Callable[[Any], T]) -> T:
        try:
            response = await shared_client().post(self.url, json=payload, headers=headers, timeout=self.timeout_s)
        except httpx.TimeoutException:
            raise _Retryable(f"no reply within timeout_s={self.timeout_s:g}") from None
        except httpx.TransportError as exc:
            raise _Retryable(f"connection failed ({type(exc).__name__}: {exc})") from None
        body = response.text
        if response.status_code == 429 or response.status_code >= 500:
            raise _Retryable(f"HTTP {response.status_code}: {self._snippet(body)}")
        if response.status_code >= 400:
            raise EndpointError(
                f"{self.owner}: POST {self.shown_url} answered HTTP {response.status_code}: {self._snippet(body)}"
            )
        try:
            data = json.loads(body)
        except ValueError:
            raise _Retryable(f"malformed JSON in the reply: {self._snippet(body)}") from None
        try:
            return parse(data)
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise _Retryable(f"unusable reply ({exc}): {self._snippet(body)}") from None

    def _snippet(self, body: str) -> str:
        body = self.redact(body)  # before cutting, so no part of the key survives the cut
        return repr(body if len(body) <= SNIPPET_CHARS else body[:SNIPPET_CHARS] + "...")
