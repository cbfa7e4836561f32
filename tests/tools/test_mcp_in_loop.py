"""MCP tools inside LongWorkflowAgent, through verl's real AgentLoopWorker and the scripted LLM server.

stdio (the example server and the fault server as real subprocesses) and streamable HTTP (the
example server on 127.0.0.1, a free port, loaded from verl <= 0.8's ``type: mcp`` YAML). Results
pass the token cap, timeout and argument checks; faults are recorded and other trajectories go on.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from extensions.tools.mcp.client import shutdown
from extensions.verl_config import build_agent_loop_worker, compose_verl_config
from tests.conftest import PROMPT_LENGTH, RESPONSE_LENGTH, Row, register_loop, run_batch, sample
from tests.test_long_workflow import tool_span_text
from tests.tools.mcp_support import EXAMPLE_SERVER, FAULT_SERVER, http_example_server, servers_json, tool_yaml

EVEREST = (
    "[mountains.md] Mount Everest, on the border of Nepal and China, is the highest mountain above sea level: "
    "8,849 metres."
)


def call(name: str, **arguments: Any) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def make_worker(qwen_dir: Path, tool_config: Path) -> Any:
    config = compose_verl_config(
        [
            f"actor_rollout_ref.model.path={qwen_dir}",
            f"actor_rollout_ref.rollout.prompt_length={PROMPT_LENGTH}",
            f"actor_rollout_ref.rollout.response_length={RESPONSE_LENGTH}",
            "actor_rollout_ref.rollout.multi_turn.format=hermes",
            f"actor_rollout_ref.rollout.multi_turn.tool_config_path={tool_config}",
            "actor_rollout_ref.rollout.calculate_log_probs=true",
        ]
    )
    return build_agent_loop_worker(config, llm_client=None)


@pytest.fixture(scope="module")
def stdio_worker(qwen_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("mcp-loop")
    # "slow" is a second process of the fault server: a crash of "faults" does not touch its calls
    servers = servers_json(tmp / "servers.json", units=EXAMPLE_SERVER, faults=FAULT_SERVER, slow=FAULT_SERVER)
    entries = []
    for name, tools in {"units": ("convert_units", "search_corpus"), "faults": ("crash",), "slow": ("sleep",)}.items():
        entries += yaml.safe_load(tool_yaml(tmp / f"{name}.yaml", servers, *tools, server=name).read_text())["tools"]
    path = tmp / "tools.yaml"
    path.write_text(yaml.safe_dump({"tools": entries}))
    return make_worker(qwen_dir, path)


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    with http_example_server() as url:
        yield url
        shutdown()  # close the HTTP session while its server still answers


def tool_turns(row: Row) -> list[dict[str, Any]]:
    return [turn for turn in row.extras["turns"] if turn["role"] == "tool"]


async def test_stdio_tools_answer_in_the_loop(stdio_worker: Any) -> None:
    loop = register_loop("mcp_stdio")
    script = {
        "M-ok": [
            call("search_corpus", query="Everest height", top_k=1),
            call("convert_units", value=8849, from_unit="m", to_unit="ft"),
            "About 29,032 feet.",
        ]
    }
    row = Row(await run_batch(stdio_worker, script, [sample("M-ok", loop)]), 0)
    tok = stdio_worker.tokenizer
    first, second = tool_turns(row)
    assert tok.decode(row.span(first)[0]) == tool_span_text(EVEREST)
    assert tok.decode(row.span(second)[0]) == tool_span_text("8849 m = 29032.2 ft")
    assert set(row.span(first)[1]) == {0} and set(row.span(second)[1]) == {0}
    assert [c["error"] for t in (first, second) for c in t["tool_calls"]] == [None, None]
    assert row.reason == "final_answer" and row.extras["num_tool_calls"] == 2


async def test_faults_are_recorded_and_other_trajectories_go_on(stdio_worker: Any) -> None:
    loop = register_loop("mcp_faults", tool_timeout_s=5.0, max_parallel_calls=3)
    script = {
        "F-crash": [call("crash"), "crashed"],
        "F-slow": [call("sleep", seconds=30), "too slow"],
        "F-bad": [call("convert_units", value="x", from_unit="m", to_unit="ft") + call("nope"), "fixed"],
        "F-ok": [call("search_corpus", query="Everest height", top_k=1), "fine"],
    }
    out = await run_batch(stdio_worker, script, [sample(m, loop) for m in script])
    rows = {marker: Row(out, i) for i, marker in enumerate(script)}
    assert {m: r.reason for m, r in rows.items()} == dict.fromkeys(script, "final_answer")
    errors = {m: [c["error"] for c in tool_turns(r)[0]["tool_calls"]] for m, r in rows.items()}
    assert errors == {
        "F-crash": ["server_crashed"],
        "F-slow": ["timeout"],
        "F-bad": ["bad_arguments", "unknown_tool"],
        "F-ok": [None],
    }
    tok = stdio_worker.tokenizer
    assert tok.decode(rows["F-slow"].span(tool_turns(rows["F-slow"])[0])[0]) == tool_span_text(
        "Tool 'sleep' timed out after 5 s and was cancelled."
    )
    assert tok.decode(rows["F-bad"].span(tool_turns(rows["F-bad"])[0])[0]) == tool_span_text(
        "Argument 'value' of 'convert_units' must be of type number, got str.",
        "Unknown tool 'nope'. Available tools: convert_units, crash, search_corpus, sleep.",
    )
    crash_text = tok.decode(rows["F-crash"].span(tool_turns(rows["F-crash"])[0])[0])
    assert "MCPServerCrash: MCP server 'faults'" in crash_text and "it is restarted for the next call" in crash_text
    assert tok.decode(rows["F-ok"].span(tool_turns(rows["F-ok"])[0])[0]) == tool_span_text(EVEREST)
    # the crashed server is started again for the next trajectory
    again = Row(
        await run_batch(stdio_worker, {"F-again": [call("sleep", seconds=0), "ok"]}, [sample("F-again", loop)]), 0
    )
    assert tool_turns(again)[0]["tool_calls"][0]["result"] == "slept 0 s"


async def test_tools_selected_per_loop_and_per_sample(stdio_worker: Any) -> None:
    loop = register_loop("mcp_select", tool_selection=["convert_units", "search_corpus"])
    script = {"S-loop": [call("crash"), "ok"], "S-sample": [call("search_corpus", query="Nile"), "ok"]}
    samples = [sample("S-loop", loop), sample("S-sample", loop, extra_info={"tool_selection": ["convert_units"]})]
    out = await run_batch(stdio_worker, script, samples)
    by_loop, by_sample = Row(out, 0), Row(out, 1)
    assert tool_turns(by_loop)[0]["tool_calls"][0]["result"] == (
        "Unknown tool 'crash'. Available tools: convert_units, search_corpus."
    )
    assert (
        tool_turns(by_sample)[0]["tool_calls"][0]["result"]
        == "Unknown tool 'search_corpus'. Available tools: convert_units."
    )
    prompt = stdio_worker.tokenizer.decode(by_sample.prompt_ids)
    assert '"name": "convert_units"' in prompt and '"name": "search_corpus"' not in prompt


async def test_streamable_http_server_from_verl08_yaml(qwen_dir: Path, http_url: str, tmp_path: Path) -> None:
    servers = servers_json(tmp_path / "servers.json", remote={"url": http_url, "headers": {"X-Test": "1"}})
    legacy = tmp_path / "legacy.yaml"
    legacy.write_text(
        yaml.safe_dump(
            {
                "tools": [
                    {
                        "class_name": "verl.tools.mcp_search_tool.MCPSearchTool",
                        "config": {"type": "mcp", "rate_limit": 4, "timeout": 30},
                        "mcp": {"mcp_servers_config_path": str(servers), "tool_selected_list": ["search_corpus"]},
                    }
                ]
            }
        )
    )
    worker = make_worker(qwen_dir, legacy)
    assert [tool.name for tool in worker.tools] == ["search_corpus"]
    loop = register_loop("mcp_http")
    script = {"H": [call("search_corpus", query="Everest height", top_k=1), "ok"]}
    row = Row(await run_batch(worker, script, [sample("H", loop)]), 0)
    assert worker.tokenizer.decode(row.span(tool_turns(row)[0])[0]) == tool_span_text(EVEREST)
    assert row.reason == "final_answer" and tool_turns(row)[0]["tool_calls"][0]["error"] is None


async def test_results_are_cut_to_the_token_cap(stdio_worker: Any) -> None:
    from extensions.token_text import TRUNCATION_NOTE, truncate_to_tokens

    loop = register_loop("mcp_cap", max_tool_response_tokens=24)
    script = {"C": [call("search_corpus", query="metres tall high long", top_k=5), "ok"]}
    row = Row(await run_batch(stdio_worker, script, [sample("C", loop)]), 0)
    tok = stdio_worker.tokenizer
    full = tool_turns(row)[0]["tool_calls"][0]["result"]  # the record keeps the whole result
    assert len(full.splitlines()) == 5 and len(tok.encode(full, add_special_tokens=False)) > 24
    shown = truncate_to_tokens(tok, full, 24)
    assert shown.endswith(TRUNCATION_NOTE)
    assert tok.decode(row.span(tool_turns(row)[0])[0]) == tool_span_text(shown)


async def test_a_server_that_fails_to_start_mid_run_is_recorded_and_others_go_on(
    qwen_dir: Path, tmp_path: Path
) -> None:
    flag = tmp_path / "refuse"
    servers = servers_json(
        tmp_path / "servers.json",
        units=EXAMPLE_SERVER,
        faults={**FAULT_SERVER, "env": {"FAULT_SERVER_REFUSE": str(flag)}},
    )
    entries = yaml.safe_load(tool_yaml(tmp_path / "u.yaml", servers, "search_corpus", server="units").read_text())
    entries["tools"] += yaml.safe_load(
        tool_yaml(tmp_path / "f.yaml", servers, "echo", server="faults", lifecycle="trajectory").read_text()
    )["tools"]
    (tmp_path / "tools.yaml").write_text(yaml.safe_dump(entries))
    worker = make_worker(qwen_dir, tmp_path / "tools.yaml")  # loads: the fault server lists its tools
    flag.touch()  # from now on it exits with status 2 before speaking MCP
    loop = register_loop("mcp_refuse", tool_timeout_s=30.0)
    script = {
        "R-down": [call("echo", text="hi"), "no echo"],
        "R-ok": [call("search_corpus", query="Everest height", top_k=1), "fine"],
    }
    out = await run_batch(worker, script, [sample(m, loop) for m in script])
    rows = {marker: Row(out, i) for i, marker in enumerate(script)}
    assert {m: r.reason for m, r in rows.items()} == {"R-down": "final_answer", "R-ok": "final_answer"}
    down = tool_turns(rows["R-down"])[0]
    assert [c["error"] for c in down["tool_calls"]] == ["server_start_failed"]
    text = worker.tokenizer.decode(rows["R-down"].span(down)[0])
    assert f"Tool 'echo' failed: MCPStartError: MCP server 'faults' ({servers}) failed to start: " in text
    assert "refusing to start: FAULT_SERVER_REFUSE exists" in text
    assert worker.tokenizer.decode(rows["R-ok"].span(tool_turns(rows["R-ok"])[0])[0]) == tool_span_text(EVEREST)
    assert [c["error"] for c in tool_turns(rows["R-ok"])[0]["tool_calls"]] == [None]
