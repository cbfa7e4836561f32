"""LLMUserInteraction's openai backend against a real HTTP server on 127.0.0.1: replies, faults, secrets."""

from __future__ import annotations

import json
import logging
import socket
from pathlib import Path
from typing import Any

import pytest
import yaml

from extensions.errors import ConfigError
from extensions.interactions.http_client import JsonEndpoint, close_clients
from extensions.interactions.llm_user import DEFAULT_INSTRUCTIONS, LLMUserInteraction
from extensions.testing.chat_server import Delay, Fault, Raw, ScriptedChatServer
from tests.conftest import Row, register_loop, run_batch, sample
from tests.test_long_workflow import user_span_text

SECRET = "sk-test-SECRET-8c1f2b"
KEY_ENV = "LONGFLOW_TEST_USER_KEY"


@pytest.fixture(autouse=True)
async def _close_shared_client():
    yield
    await close_clients()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def users_yaml(tmp_path: Path, base_url: str, *, slow_timeout_s: float = 0.3, **openai: Any) -> str:
    """user_ok and user_slow on ``base_url`` (user_slow with a short timeout), user_down on a closed port."""

    def entry(name: str, url: str, **extra: Any) -> dict[str, Any]:
        settings = {"base_url": url, "model": "user-sim", "api_key_env": KEY_ENV, **openai, **extra}
        config = {"backend": "openai", "openai": settings, "stop_on_final_answer": True}
        return {"name": name, "class_name": "extensions.interactions.llm_user.LLMUserInteraction", "config": config}

    down = f"http://127.0.0.1:{closed_port()}/v1"
    entries = [
        entry("user_ok", base_url),
        entry("user_slow", base_url, timeout_s=slow_timeout_s),
        entry("user_down", down),
    ]
    path = tmp_path / "users.yaml"
    path.write_text(yaml.safe_dump({"interaction": entries}))
    return str(path)


def ask(marker: str, loop: str, fact: str, name: str = "user_ok") -> dict[str, Any]:
    return sample(marker, loop, interaction_kwargs={"name": name, "ground_truth": "12", "user_facts": [fact]})


async def test_openai_user_answers_through_the_loop(worker, tokenizer, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    async with ScriptedChatServer({"FACT-OK": ["Each apple costs 3 dollars."]}) as server:
        loop = register_loop("lw_openai_user", interaction_config_path=users_yaml(tmp_path, server.base_url))
        script = {"Q-OK": ["What does one apple cost?", "So 4 apples cost 12.\n#### 12"]}
        out = await run_batch(worker, script, [ask("Q-OK", loop, "FACT-OK: an apple costs 3 dollars.")])
    row = Row(out, 0)
    assert row.reason == "interaction_done" and row.turn_scores == [0.0, 1.0]
    ids, mask = row.span(row.extras["turns"][1])
    assert tokenizer.decode(ids) == user_span_text("Each apple costs 3 dollars.") and set(mask) == {0}
    (request,) = server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == f"Bearer {SECRET}"
    system = DEFAULT_INSTRUCTIONS.replace("{stop_marker}", "###STOP###")
    assert request["body"] == {
        "model": "user-sim",
        "messages": [
            {"role": "system", "content": system + "\n\nFacts only you know:\n- FACT-OK: an apple costs 3 dollars."},
            {"role": "assistant", "content": "Q-OK"},
            {"role": "user", "content": "What does one apple cost?"},
        ],
        "temperature": 0.0,
        "max_tokens": 256,
    }


async def test_faults_become_error_trajectories_naming_url_and_failure_and_never_the_key(
    worker, tmp_path, monkeypatch, caplog
):
    monkeypatch.setenv(KEY_ENV, SECRET)
    caplog.set_level(logging.INFO)
    twice = lambda reply: [reply, reply]  # noqa: E731  (max_retries=1: two attempts)
    script = {
        "F-OK": ["Each apple costs 3 dollars."],
        "F-500": twice(Fault(500, "boom")),
        "F-JSON": twice(Raw("{not json")),
        "F-EMPTY": twice({"choices": [{"message": {"role": "assistant", "content": "  "}}]}),
        "F-SLOW": twice(Delay(2.0, "too late")),
    }
    async with ScriptedChatServer(script, echo_headers=True) as server:
        path = users_yaml(tmp_path, server.base_url, timeout_s=30.0, max_retries=1, backoff_s=0.01)
        loop = register_loop("lw_openai_faults", interaction_config_path=path)
        markers = ["OK", "500", "JSON", "EMPTY", "SLOW"]
        names = {"SLOW": "user_slow"}
        samples = [ask(f"Q-{m}", loop, f"F-{m}", names.get(m, "user_ok")) for m in markers]
        samples.append(ask("Q-DOWN", loop, "F-DOWN", "user_down"))
        agent = {f"Q-{m}": ["What does an apple cost?", "#### 12"] for m in [*markers, "DOWN"]}
        out = await run_batch(worker, agent, samples)
    rows = {m: Row(out, i) for i, m in enumerate([*markers, "DOWN"])}
    assert rows["OK"].reason == "interaction_done" and rows["OK"].turn_scores == [0.0, 1.0]
    url = f"POST {server.base_url}/chat/completions failed after 2 attempt(s)"
    owner = "UserModelError: interaction 'user_ok' (LLMUserInteraction)"
    assert rows["500"].extras["error"].startswith(f"{owner}: {url}: HTTP 500: 'boom {{")
    assert "Bearer ***" in rows["500"].extras["error"]  # the echoed header, redacted
    assert rows["JSON"].extras["error"] == f"{owner}: {url}: malformed JSON in the reply: '{{not json'"
    assert rows["EMPTY"].extras["error"].startswith(f"{owner}: {url}: unusable reply (empty reply): ")
    slow_owner = "UserModelError: interaction 'user_slow' (LLMUserInteraction)"
    assert rows["SLOW"].extras["error"] == f"{slow_owner}: {url}: no reply within timeout_s=0.3"
    down = rows["DOWN"].extras["error"]
    assert down.startswith("UserModelError: interaction 'user_down' (LLMUserInteraction): POST http://127.0.0.1:")
    assert "/v1/chat/completions failed after 2 attempt(s): connection failed (ConnectError" in down
    for m in ("500", "JSON", "EMPTY", "SLOW", "DOWN"):
        assert rows[m].reason == "error" and set(rows[m].mask) == {0}
    assert [server.count(f"F-{m}") for m in markers] == [1, 2, 2, 2, 2]
    # the key reached the server, and nowhere else
    assert any(r["headers"].get("Authorization") == f"Bearer {SECRET}" for r in server.requests)
    everything = json.dumps([r.extras for r in rows.values()], default=str) + caplog.text
    assert "attempt 1 failed: HTTP 500" in caplog.text
    assert SECRET not in everything


def test_missing_key_variable_fails_at_construction_naming_it(monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    config = {
        "backend": "openai",
        "openai": {"base_url": "http://127.0.0.1:1/v1", "model": "m", "api_key_env": KEY_ENV},
    }
    with pytest.raises(ConfigError, match=f"environment variable '{KEY_ENV}' \\(api_key_env\\) is not set or empty"):
        LLMUserInteraction({"name": "u", **config})


def test_endpoint_settings_are_checked(monkeypatch):
    config = {"base_url": "ftp://x", "model": "m", "timeout_s": 0, "max_concurrency": 0}
    with pytest.raises(
        ConfigError, match=r"url must be an http\(s\) URL.*timeout_s must be a number > 0.*max_concurrency"
    ):
        LLMUserInteraction({"name": "u", "backend": "openai", "openai": config})
    with pytest.raises(ConfigError, match=r"unknown openai key\(s\) 'api_key'; valid: .*'api_key_env'"):
        LLMUserInteraction(
            {"name": "u", "backend": "openai", "openai": {"base_url": "http://h", "model": "m", "api_key": "x"}}
        )


def test_repr_and_errors_show_the_url_without_credentials(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    config = {"base_url": "http://me:pw@127.0.0.1:9/v1", "model": "m", "api_key_env": KEY_ENV}
    interaction = LLMUserInteraction({"name": "u", "backend": "openai", "openai": config})
    endpoint = interaction.backend.endpoint
    assert (
        repr(endpoint)
        == "JsonEndpoint('http://127.0.0.1:9/v1/chat/completions', owner=\"interaction 'u' (LLMUserInteraction)\")"
    )
    assert SECRET not in repr(vars(interaction.backend)) + repr(interaction.__dict__)


def test_a_key_cut_by_the_snippet_limit_is_still_redacted(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    endpoint = JsonEndpoint("http://127.0.0.1:9/x", owner="t", api_key_env=KEY_ENV)
    snippet = endpoint._snippet("x" * 190 + SECRET + "y" * 50)
    assert snippet == repr("x" * 190 + "***" + "y" * 7 + "...") and "sk-test" not in snippet
