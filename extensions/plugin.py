"""verl plugin entry point (``[project.entry-points."verl.plugins"] longflow``).

``import verl`` imports this module in every process — the driver and each Ray worker —
so the pack's tool-call parsers, agent-loop names and advantage estimators are registered,
and the trainer hooks of ``extensions.verl_compat`` installed, wherever verl runs.
verl swallows errors raised here (it logs them at debug level), so a failure here (an untested
verl version, above all) is also printed to stderr before it is raised: otherwise the first sign
would be "unknown agent loop long_workflow" much later. ``tests/test_plugin.py`` checks that this
module loads and registers everything, and that a failure is printed.
"""

from __future__ import annotations

import sys

AGENT_LOOPS = {
    "long_workflow": "extensions.custom_rollouts.LongWorkflowAgent",
    "folding_workflow": "extensions.folding_loop.FoldingWorkflowAgent",
}


def register() -> dict[str, list[str]]:
    """Register parsers, agent loops and advantage estimators with verl; idempotent. Returns what was registered."""
    from extensions import custom_advantages, metrics, trainer_mode_check, training_signal, verl_compat
    from extensions.interactions import base
    from extensions.parsers import register_parsers
    from extensions.tools.mcp.legacy import load_expanding_mcp

    registry = verl_compat.agent_loop_registry()
    for name, target in AGENT_LOOPS.items():
        registry.setdefault(name, {"_target_": target})
    verl_compat.install_interaction_alias(base)
    verl_compat.accept_mcp_tool_yaml(load_expanding_mcp)  # verl <= 0.8's `config.type: mcp` tool YAML
    verl_compat.install_trainer_hooks(
        training_metrics=metrics.longflow_metrics,
        validation_metrics=metrics.validation_metrics,
        advantage_post=training_signal.after_advantages,
        config_check=trainer_mode_check.raise_trainer_problems,
    )
    custom_advantages.set_rows_provider(verl_compat.advantage_rows)
    verl_compat.install_weight_ipc_scope()  # trainers side by side on one host: one weight-sync socket each
    return {
        "agent_loops": sorted(AGENT_LOOPS),
        "parsers": register_parsers(),
        "advantage_estimators": custom_advantages.register_estimators(),
    }


def _pack_module_mid_import() -> str | None:
    """A pack module whose first ``import verl`` is loading this plugin, so it is only partly defined yet."""
    for name, module in list(sys.modules.items()):
        if (
            name.startswith("extensions.")
            and name != __name__
            and getattr(getattr(module, "__spec__", None), "_initializing", False)
        ):
            return name
    return None


_LOADED_FROM = _pack_module_mid_import()  # before register() starts importing pack modules itself
try:
    REGISTERED = register()
except Exception as exc:
    # Loaded from inside a pack module's own first `import verl`: registering needs that module whole.
    # verl drops this failed import, and the pack's entry points import this module again once it is.
    if _LOADED_FROM is None:
        print(f"verl-longflow was not loaded: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
    raise
