"""The system prompt of the GSM8K tool-use task, and the tools it may describe.

The chat template also lists the tools' JSON schemas (the agent loop passes them), so this
prompt only says what each tool is for and how the final answer must look: the reward reads the number on a
``#### <number>`` line or in a ``\\boxed{}`` (``extensions/rewards/gsm8k.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from extensions.errors import ConfigError, choices


@dataclass(frozen=True)
class ToolSpec:
    """What the data preparation knows about one tool."""

    description: str
    """One line for the system prompt."""
    needs_ground_truth: bool = False
    """If true, the sample's ``tools_kwargs`` gives the tool ``create_kwargs: {ground_truth: ...}``: an
    oracle, never offered on a validation split (``--split test``)."""


TOOLS: dict[str, ToolSpec] = {
    "python_exec": ToolSpec("runs a short Python 3 program and returns what it prints; use print() to see values."),
    "calculator": ToolSpec("evaluates one arithmetic expression, such as (48 + 24) / 3, and returns its value."),
    "check_answer": ToolSpec(
        "checks a candidate final answer against the reference and says whether it is right.",
        needs_ground_truth=True,
    ),
}
"""Tools ``--tools`` may name; the names must match the tool config the agent loop loads."""

DEFAULT_TOOLS = ("python_exec", "calculator", "check_answer")

ANSWER_FORMAT = (
    "When you are done, write the final answer on its own last line as `#### <number>`, for example "
    "`#### 72`: the number only, without units or words."
)
"""The ledger prompts' answer line (``extensions/data/ledger_text.py``; unchanged, so warm starts keep their prompt)."""

GSM8K_ANSWER_FORMAT = (
    "When you are done, write the final answer on its own last line as #### followed by the number (a "
    "\\boxed{} number is read too): the number only, without units or words, and outside any code block."
)
"""The GSM8K prompt's answer line: the forms the reward reads (``extensions/rewards/gsm8k.py``: a ``####`` line or a
``\\boxed{}``, in prose), with no example number to copy (a copied `#### 72` once decided verdicts)."""


def parse_tools(spec: str) -> tuple[str, ...]:
    """Parse ``--tools a,b,c``; an empty string means no tools. Unknown names are a ConfigError."""
    names = tuple(dict.fromkeys(name.strip() for name in spec.split(",") if name.strip()))
    unknown = [name for name in names if name not in TOOLS]
    if unknown:
        raise ConfigError(f"--tools: unknown tool(s) {choices(unknown)}; valid tools: {choices(TOOLS)}")
    return names


CODE_FENCE_PROMPT = (
    "You can run Python: write a program in a ```python code block. It runs as soon as you close the "
    "block, and what it prints is shown to you in an ```output block; then you go on. Use print() to see values."
)
"""The code-fence format's line (``extensions/code_fence.py``), instead of a tool list."""

TOOL_FORMATS = ("json", "code_fence")


def system_prompt(tools: Sequence[str], tool_format: str = "json") -> str:
    """The system message: the task, the tools (one line each, or the code-fence line), the answer format."""
    lines = ["You are a careful math assistant. Solve the user's problem step by step."]
    if tool_format == "code_fence":
        if tuple(tools) != ("python_exec",):
            raise ConfigError(f"--tool-format code_fence runs python_exec only; --tools gave {choices(tools)}")
        lines.append(CODE_FENCE_PROMPT)
    elif tools:
        lines.append("You can use these tools:")
        lines.extend(f"- {name}: {TOOLS[name].description}" for name in tools)
    lines.append(GSM8K_ANSWER_FORMAT)
    return "\n".join(lines)
