"""verl plugin entry point (``[project.entry-points."verl.plugins"] longflow``).

``import verl`` imports this module in every process — the driver and each Ray worker —
so the pack's tool-call parsers and agent-loop names are registered wherever verl runs.
verl swallows errors raised here (at debug level), so ``tests/test_plugin.py`` checks
that this module loads and registers everything.
"""

from __future__ import annotations

import sys
import types

AGENT_LOOPS = {"long_workflow": "extensions.custom_rollouts.LongWorkflowAgent"}


def register() -> dict[str, list[str]]:
    """Register parsers and agent loops with verl; idempotent. Returns what was registered."""
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry

    from extensions.parsers import register_parsers

    for name, target in AGENT_LOOPS.items():
        _agent_loop_registry.setdefault(name, {"_target_": target})
    install_interaction_alias()
    return {"agent_loops": sorted(AGENT_LOOPS), "parsers": register_parsers()}


def install_interaction_alias() -> None:
    """Let verl 0.7 interaction classes (``from verl.interactions.base import BaseInteraction``) import."""
    if "verl.interactions.base" in sys.modules:
        return
    from extensions.interactions import base

    package = types.ModuleType("verl.interactions")
    package.__path__ = []  # a namespace-like package holding only the alias
    package.base = base
    sys.modules.setdefault("verl.interactions", package)
    sys.modules.setdefault("verl.interactions.base", base)


REGISTERED = register()
