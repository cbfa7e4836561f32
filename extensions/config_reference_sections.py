"""What the configuration reference lists and where each block of settings goes in a config (the page's only
hand-written words); ``extensions/config_reference.py`` renders it from the models named here."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Section:
    """One block of settings: a heading, where the block goes in a config, and the model that validates it."""

    title: str
    where: str
    model: str
    """Dotted path of the pydantic model."""
    hidden: tuple[str, ...] = ()
    """Fields the code fills in itself (not config keys)."""
    reader: str | None = None
    """Dotted path of a class whose ``__init__`` reads further keys before the model validates the rest."""


SECTIONS = (
    Section(
        "Agent loop entry",
        "Each entry of the agent-loop YAML (`actor_rollout_ref.rollout.agent.agent_loop_config_path`, e.g. "
        "`extensions/custom_rollouts.yaml`) whose `_target_` is `LongWorkflowAgent` or a subclass; every key "
        "besides `name` and `_target_`.",
        "extensions.loop_settings.LoopSettings",
    ),
    Section(
        "Code fences (`code_fence:`)",
        "`code_fence:` of an agent-loop entry with `tool_parser: code_fence`.",
        "extensions.code_fence.CodeFenceSettings",
    ),
    Section(
        "Context folding (`fold:`)",
        "`fold:` of an agent-loop entry whose `_target_` is `extensions.folding_loop.FoldingWorkflowAgent`.",
        "extensions.folding.FoldSettings",
    ),
    Section(
        "Reward (`reward_kwargs`)",
        "`reward.custom_reward_function.reward_kwargs` with `reward.custom_reward_function.path="
        "pkg://extensions.custom_rewards` (add a key with `+reward.custom_reward_function.reward_kwargs.KEY=`).",
        "extensions.rewards.settings.RewardSettings",
    ),
    Section(
        "Tool `python_exec`",
        "`config:` of a tool-YAML entry with `class_name: extensions.tools.python_exec.PythonExecTool` "
        "(besides verl's `type`).",
        "extensions.tools.python_exec.PythonExecConfig",
        reader="extensions.tools.python_exec.PythonExecTool",
    ),
    Section(
        "Added tool latency (`latency:`)",
        "`latency:` inside `python_exec`'s `config:`: a delay drawn before each call (a remote sandbox's), "
        "for long-tail workloads such as `experiments/gsm8k_learn/tools_long_tail.yaml`.",
        "extensions.tools.latency.ToolLatency",
    ),
    Section(
        "Tool `check_answer`",
        "`config:` of a tool-YAML entry with `class_name: extensions.tools.check_answer.CheckAnswerTool`.",
        "extensions.tools.check_answer.CheckAnswerConfig",
    ),
    Section(
        "Tool `calculator`",
        "`config:` of a tool-YAML entry with `class_name: extensions.tools.calculator.CalculatorTool`.",
        "extensions.tools.calculator.CalculatorConfig",
    ),
    Section(
        "MCP tool",
        "`config:` of a tool-YAML entry with `class_name: extensions.tools.mcp.MCPTool` (with `type: native`).",
        "extensions.tools.mcp.config.MCPToolConfig",
    ),
    Section(
        "MCP server (`mcpServers`)",
        'Each entry of the `{"mcpServers": {NAME: {...}}}` JSON file that `mcp_servers_config_path` names; '
        "`${VAR}` in a value is read from the environment.",
        "extensions.tools.mcp.config.ServerSpec",
        hidden=("name", "source"),
    ),
)
INTERACTIONS = (
    "extensions.interactions.scripted.ScriptedInteraction",
    "extensions.interactions.code_verify.CodeVerifyInteraction",
    "extensions.interactions.environment.EnvironmentInteraction",
    "extensions.interactions.llm_user.LLMUserInteraction",
    "extensions.interactions.http_user.HTTPUserInteraction",
)
"""Interaction classes whose ``config:`` keys are listed (read from their constructors)."""
