"""The ``python_exec`` tool: run the model's Python in the sandbox and show it what happened.

Tool YAML: ``tool_configs/python_exec.yaml``. Config keys are the fields of ``SandboxLimits``
(``wall_time_s``, ``cpu_time_s``, ``memory_mb``, ``output_bytes``, ``file_size_bytes``, ``open_files``,
``processes``), each optional, plus ``output``: ``status`` (default: stdout, stderr and an exit-status
line) or ``interpreter`` (stdout, then a traceback's last line: what the code-fence format shows,
``SandboxResult.interpreter_text``), and ``latency`` (a delay drawn before each run, as a remote sandbox
would add: ``extensions/tools/latency.py``). The schema the model sees comes from ``python_exec`` below.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal, get_args

from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
from verl.utils.rollout_trace import rollout_trace_op

from extensions.errors import ConfigError, SandboxError, choices
from extensions.tools.latency import ToolLatency
from extensions.tools.sandbox import SandboxLimits, run_python
from extensions.tools.schema import bad_arguments, parse_tool_config, schema_from_function


async def python_exec(code: str) -> str:
    """Run a Python 3 program and return what it printed.

    Each call starts a fresh program: only the standard library, no network, no files outside its own
    working directory, nothing kept between calls, and limits on time, memory and output. Print what you
    want to see.

    Args:
        code: A complete Python program, for example "print(sum(range(1, 101)))".
    """
    return (await run_python(code, limits=SandboxLimits())).to_text()


OutputStyle = Literal["status", "interpreter"]


async def wait_latency(seconds: float) -> None:
    """The added latency's wait (its own name, so a test can see the delays without sleeping)."""
    await asyncio.sleep(seconds)


class PythonExecConfig(SandboxLimits):
    """The tool's config keys: the sandbox's limits, and an added latency."""

    latency: ToolLatency = ToolLatency()
    """A delay drawn before each run (``extensions/tools/latency.py``); none by default."""


class PythonExecTool(BaseTool):
    """verl tool around ``run_python``; stateless, so one instance per trajectory needs no bookkeeping."""

    def __init__(self, config: dict[str, Any], tool_schema: OpenAIFunctionToolSchema | None = None) -> None:
        config = dict(config or {})
        self.output: OutputStyle = config.pop("output", "status")
        """What the model is shown: ``status`` (stdout, stderr and an exit-status line) or ``interpreter`` (stdout,
        then a traceback's last line: what the code-fence format shows)."""
        if self.output not in get_args(OutputStyle):
            raise ConfigError(
                f"tool 'python_exec' config: 'output' {self.output!r} is not valid; valid: {choices(get_args(OutputStyle))}"
            )
        parsed = parse_tool_config(PythonExecConfig, config, tool="python_exec")
        self.latency = parsed.latency.sampler()
        self.limits = SandboxLimits.model_validate(parsed.model_dump(exclude={"latency"}))
        super().__init__(config, tool_schema or schema_from_function(python_exec))

    @rollout_trace_op
    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[ToolResponse, float, dict[str, Any]]:
        """Run ``parameters["code"]``; bad arguments and sandbox failures come back as text, never raised."""
        if (bad := bad_arguments(self.tool_schema, parameters)) is not None:
            return bad
        added = self.latency.draw()
        if added:
            await wait_latency(added)
        try:
            result = await run_python(parameters["code"], limits=self.limits)
        except SandboxError as exc:
            return ToolResponse(text=f"error: the sandbox could not run the code: {exc}"), 0.0, {"error": "sandbox"}
        metrics = {
            "exit_code": result.exit_code,
            "timed_out": result.timed_out,
            "killed_reason": result.killed_reason,
            "duration_s": result.duration_s,
            "added_latency_s": added,
        }
        text = result.interpreter_text() if self.output == "interpreter" else result.to_text()
        return ToolResponse(text=text), 0.0, metrics
