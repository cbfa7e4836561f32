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
    assert register()["agent_loops"] == ["folding_workflow", "long_workflow"]


def test_a_plugin_that_fails_to_load_says_so_on_stderr():
    """verl logs plugin load errors at debug level only: an untested verl must still be seen."""
    code = (
        "import os\n"
        "os.environ['VERL_USE_EXTERNAL_PLUGINS'] = 'none'\n"
        "os.environ.pop('LONGFLOW_ALLOW_UNTESTED_VERL', None)\n"
        "import verl\n"
        "from importlib.metadata import entry_points\n"
        "verl.__version__ = '0.9.0'\n"
        "(ep,) = [e for e in entry_points(group='verl.plugins') if e.name == 'longflow']\n"
        "try:\n"
        "    ep.load()\n"
        "except Exception as exc:\n"
        "    print('verl swallows', type(exc).__name__)\n"  # what verl/__init__.py does with it
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip().splitlines()[-1] == "verl swallows VerlVersionError"
    assert (
        "verl-longflow was not loaded: VerlVersionError: verl-longflow is tested with verl 0.9.1, "
        "but verl 0.9.0 is installed. Install a tested one (`pip install verl==0.9.1`), or set "
        "LONGFLOW_ALLOW_UNTESTED_VERL=1 to try anyway"
    ) in out.stderr


def test_a_pack_module_imported_before_verl_is_no_failure():
    """``import extensions.custom_advantages`` first: verl loads the plugin from inside that import, while
    the module is half-defined. That is not reported as a failure, and importing the plugin registers."""
    code = (
        "import extensions.custom_advantages\n"
        "import extensions.plugin\n"
        "from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY\n"
        "print(sorted(set(ADV_ESTIMATOR_REGISTRY) & {'turn_grpo', 'gigpo_turn'}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip().splitlines()[-1] == "['gigpo_turn', 'turn_grpo']"
    assert "was not loaded" not in out.stderr
