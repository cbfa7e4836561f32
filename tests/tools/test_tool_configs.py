"""Every YAML in tool_configs/ loads through verl's own loader, with schemas derived (no tool_schema)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from verl.tools.tool_registry import initialize_tools_from_config

from extensions.errors import ConfigError

TOOL_CONFIGS = Path(__file__).resolve().parents[2] / "tool_configs"
EXPECTED = {
    "python_exec.yaml": ["python_exec"],
    "calculator.yaml": ["calculator"],
    "check_answer.yaml": ["check_answer"],
    "ledger.yaml": ["read_page", "fold", "submit_answer"],
    "gsm8k_tools.yaml": ["python_exec", "calculator", "check_answer"],
    "mcp_units_search.yaml": ["convert_units", "search_corpus"],  # MCP: schemas from the example server
    "mcp_verl08.yaml": ["convert_units", "search_corpus"],  # verl <= 0.8's `type: mcp`, expanded by the pack
}


def test_every_tool_config_is_covered() -> None:
    assert sorted(p.name for p in TOOL_CONFIGS.glob("*.yaml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_loads_with_verl(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(TOOL_CONFIGS.parent)  # the MCP servers JSON path is relative to the repo root
    path = TOOL_CONFIGS / name
    tools = initialize_tools_from_config(str(path))
    assert [tool.name for tool in tools] == EXPECTED[name]
    assert all("tool_schema" not in entry for entry in yaml.safe_load(path.read_text())["tools"])
    first_lines = path.read_text().splitlines()[:6]
    assert first_lines[0].startswith("# ")
    assert f"# Use: actor_rollout_ref.rollout.multi_turn.tool_config_path=tool_configs/{name}" in first_lines


def test_a_bad_key_fails_at_load(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "tools:\n  - class_name: extensions.tools.check_answer.CheckAnswerTool\n"
        "    config: {type: native, attempts: 2}\n"
    )
    with pytest.raises(ConfigError, match=r"'attempts' is not a config key. Valid keys: 'max_attempts', 'type'"):
        initialize_tools_from_config(str(path))
