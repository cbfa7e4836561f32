"""HTTPUserInteraction against a real HTTP server on 127.0.0.1: the JSON it sends, the replies it takes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from extensions.errors import ConfigError
from extensions.interactions.http_client import close_clients
from extensions.interactions.http_user import HTTPUserInteraction, parse_reply
from extensions.testing.chat_server import Fault, ScriptedChatServer
from tests.conftest import Row, register_loop, run_batch, sample
from tests.test_long_workflow import tool_call, user_span_text


@pytest.fixture(autouse=True)
async def _close_shared_client():
    yield
    await close_clients()


def http_yaml(tmp_path: Path, url: str, **config: Any) -> str:
    entry = {
        "name": "http_user",
        "class_name": "extensions.interactions.http_user.HTTPUserInteraction",
        "config": {"url": url, "max_retries": 0, **config},
    }
    path = tmp_path / "http_users.yaml"
    path.write_text(yaml.safe_dump({"interaction": [entry]}))
    return str(path)


async def test_http_user_gets_the_conversation_and_its_reply_is_the_user_turn(worker, tokenizer, tmp_path):
    script = {"H-1": ["Use 3 dollars per apple.", {"stop": True, "score": 1.0}]}
    async with ScriptedChatServer(script) as server:
        loop = register_loop("lw_http_user", interaction_config_path=http_yaml(tmp_path, server.user_turn_url))
        agent = {"H-1": ["What is the price?", tool_call("echo", text="3*4"), "#### 12"]}
        ikwargs = {"name": "http_user", "ground_truth": "12", "user_facts": ["H-1 fact"]}
        out = await run_batch(worker, agent, [sample("H-1", loop, interaction_kwargs=ikwargs)])
    row = Row(out, 0)
    assert row.reason == "interaction_done" and row.turn_scores == [0.0, 1.0]
    ids, mask = row.span(row.extras["turns"][1])
    assert tokenizer.decode(ids) == user_span_text("Use 3 dollars per apple.") and set(mask) == {0}
    first, second = (r["body"] for r in server.requests)
    assert first["turn"] == 1 and second["turn"] == 2 and first["instance_id"] == second["instance_id"]
    assert first["sample"] == {"ground_truth": "12", "user_facts": ["H-1 fact"]}
    assert first["messages"] == [
        {"role": "system", "content": "You are a careful solver."},
        {"role": "user", "content": "H-1"},
        {"role": "assistant", "content": "What is the price?"},
    ]
    call = second["messages"][4]
    assert call["role"] == "assistant" and call["tool_calls"] == [{"name": "echo", "arguments": {"text": "3*4"}}]
    assert [m["role"] for m in second["messages"]] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


async def test_hide_tools_sends_the_users_view(worker, tmp_path):
    async with ScriptedChatServer({"H-2": [{"stop": True}]}) as server:
        path = http_yaml(tmp_path, server.user_turn_url, hide_tools=True)
        loop = register_loop("lw_http_user_hidden", interaction_config_path=path)
        agent = {"H-2": [tool_call("echo", text="x"), "<think>hm</think>Done.\n#### 1"]}
        out = await run_batch(worker, agent, [sample("H-2", loop, interaction_kwargs={"name": "http_user"})])
    assert Row(out, 0).reason == "interaction_done" and Row(out, 0).turn_scores == [0.0]
    assert server.requests[0]["body"]["messages"] == [
        {"role": "assistant", "content": "H-2"},
        {"role": "user", "content": "Done.\n#### 1"},
    ]


async def test_a_4xx_is_not_retried_and_names_the_url(worker, tmp_path):
    async with ScriptedChatServer({"H-3": [Fault(403, "forbidden"), "unused"]}) as server:
        path = http_yaml(tmp_path, server.user_turn_url, max_retries=3)
        loop = register_loop("lw_http_user_403", interaction_config_path=path)
        out = await run_batch(worker, {"H-3": ["Hi?"]}, [sample("H-3", loop, interaction_kwargs={"name": "http_user"})])
    row = Row(out, 0)
    assert row.reason == "error" and server.count("H-3") == 1
    assert row.extras["error"] == (
        f"UserModelError: interaction 'http_user' (HTTPUserInteraction): POST {server.user_turn_url} "
        "answered HTTP 403: 'forbidden'"
    )


def test_parse_reply_shapes():
    assert parse_reply({"content": "hi"}) == (False, "hi", 0.0)
    assert parse_reply({"stop": True}) == (True, "", 0.0)
    assert parse_reply({"content": "bye", "stop": True, "score": 2}) == (True, "bye", 2.0)
    for bad, why in [
        ([], "expected a JSON object, got list"),
        ({"content": 3}, "'content' must be a string, got int"),
        ({"content": " "}, "empty reply: 'content' is empty and 'stop' is false"),
        ({"content": "x", "stop": "yes"}, "'stop' must be true or false, got 'yes'"),
        ({"content": "x", "score": "high"}, "'score' must be a finite number, got 'high'"),
        ({"content": "x", "score": float("nan")}, "'score' must be a finite number, got nan"),
        (json.loads('{"content": "x", "score": -Infinity}'), "'score' must be a finite number, got -inf"),
    ]:
        with pytest.raises(ValueError, match=f"^{why}$".replace("(", r"\(").replace(")", r"\)")):
            parse_reply(bad)


def test_config_errors():
    with pytest.raises(ConfigError, match=r"config.url is required"):
        HTTPUserInteraction({"name": "h"})
    with pytest.raises(ConfigError, match=r"unknown key\(s\) 'urls'; valid: .*'url'"):
        HTTPUserInteraction({"name": "h", "urls": "x"})
