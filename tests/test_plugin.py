"""The verl.plugins entry point loads and registers the pack (verl hides load errors)."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import entry_points


def test_entry_point_is_declared():
    (ep,) = [ep for ep in entry_points(group="verl.plugins") if ep.name == "longflow"]
    assert ep.value == "extensions.plugin"


def test_import_verl_registers_the_pack_in_a_fresh_process():
    code = (
        "import json, sys, verl\n"
        "from verl.experimental.agent_loop.agent_loop import _agent_loop_registry\n"
        "from verl.experimental.agent_loop.tool_parser import ToolParser\n"
        "from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY\n"
        "print(json.dumps({'plugin': 'extensions.plugin' in sys.modules,"
        " 'loop': _agent_loop_registry.get('long_workflow'),"
        " 'parsers': sorted(set(ToolParser._registry) & {'json', 'react', 'auto', 'hermes_strict'}),"
        " 'estimators': sorted(set(ADV_ESTIMATOR_REGISTRY) & {'turn_grpo', 'gigpo_turn'})}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {
        "plugin": True,
        "loop": {"_target_": "extensions.custom_rollouts.LongWorkflowAgent"},
        "parsers": ["auto", "hermes_strict", "json", "react"],
        "estimators": ["gigpo_turn", "turn_grpo"],
    }


def test_register_is_idempotent_and_reports():
    from extensions.plugin import register

    assert register() == register()
    assert register()["agent_loops"] == ["long_workflow"]
