"""The YAML kwargs of ``LongWorkflowAgent``, validated once, with a docstring per field.

verl instantiates an agent loop per sample with every extra key of its YAML entry, and
verl's base class swallows unknown kwargs silently. Here an unknown key or a wrong type
is a ``ConfigError`` that names the key and lists the valid ones.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from extensions.code_fence import CodeFenceSettings
from extensions.errors import ConfigError, choices
from extensions.records_schema import Reason

# The keyword arguments verl's AgentLoopWorker passes to every agent loop.
VERL_LOOP_KWARGS = frozenset(
    {
        "trainer_config",
        "server_manager",
        "tokenizer",
        "processor",
        "dataset_cls",
        "data_config",
        "hf_model_type",
        "tools",
    }
)


class LoopSettings(BaseModel):
    """Settings of one ``long_workflow``-style YAML entry."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    max_assistant_turns: int = Field(15, ge=1)
    """Most assistant turns (generations) per trajectory."""
    max_tool_rounds: int = Field(15, ge=0)
    """Most rounds of tool execution; one round runs all calls of one assistant turn."""
    max_user_turns: int = Field(15, ge=0)
    """Most user messages the interaction may add."""
    max_parallel_calls: int | None = Field(None, ge=1)
    """Most tool calls run per assistant turn; None uses verl's multi_turn.max_parallel_calls."""
    tool_parser: str | None = None
    """Tool-call format for this loop (e.g. auto, hermes_strict, code_fence); None uses verl's multi_turn.format."""
    code_fence: CodeFenceSettings | None = None
    """With ``tool_parser: code_fence``: the fence languages, tool, argument and execution caps (defaults if unset)."""
    thinking_in_loss: bool = True
    """If false, ``<think>...</think>`` tokens keep their place in the stream with mask 0."""
    reserve_final_tokens: int = Field(0, ge=0)
    """Tokens kept free for a last answer: context is never appended past this reserve."""
    interaction_config_path: str | None = None
    """YAML in verl <= 0.7's ``interaction:`` format; enables user turns."""
    require_interaction: bool = False
    """If true, a sample without ``interaction_kwargs.name`` is an error, not a tool-only episode."""
    max_tool_response_tokens: int | None = Field(2048, ge=16)
    """Each tool result is cut to this many tokens (verl cuts by characters); None: no cap."""
    tool_timeout_s: float = Field(30.0, gt=0)
    """Per-call tool timeout; the call is cancelled and the model is told."""
    tool_concurrency: dict[str, int] = Field(default_factory=dict)
    """Per-tool cap on calls running at once in this worker process, e.g. {python_exec: 8}."""
    tool_selection: list[str] | None = None
    """Tools this loop offers (names from the tool YAML); None: all. ``extra_info.tool_selection`` picks per sample."""
    default_tool_concurrency: int = Field(64, ge=1)
    """Cap for tools not named in ``tool_concurrency``."""
    max_trajectory_s: float | None = Field(None, gt=0)
    """Wall-clock seconds a trajectory may run; past them it ends with reason ``time_budget`` before its next
    generation, fold, tool round, user turn or code-fence resumption. A tool call in flight (or waiting for a slot)
    is cancelled at the bound; a generation in flight finishes first. None: no bound."""
    mask_time_budget: bool = False
    """If true, a trajectory ended by ``max_trajectory_s`` keeps its tokens with mask 0 (as an ``error`` one does), so a
    tool that happened to be slow costs its actions no gradient; its score (0 with the experiments' reward) still counts
    in its group's baseline.
    If false, it trains like any other trajectory. Needs ``max_trajectory_s``."""
    catch_errors: bool = True
    """Record a failing trajectory with reason ``error`` instead of failing the batch."""

    @model_validator(mode="after")
    def _mask_needs_a_bound(self) -> LoopSettings:
        if self.mask_time_budget and self.max_trajectory_s is None:
            raise ValueError("mask_time_budget masks trajectories ended by max_trajectory_s; set max_trajectory_s too")
        return self

    def masked_reasons(self) -> frozenset[Reason]:
        """The end reasons whose trajectories keep their tokens with mask 0: ``error``, and ``time_budget`` with
        ``mask_time_budget``."""
        return frozenset({Reason.ERROR, Reason.TIME_BUDGET} if self.mask_time_budget else {Reason.ERROR})


def settings_error(exc: ValidationError, *, entry: str) -> ConfigError:
    """Turn pydantic's report into one message naming every bad key."""
    valid = choices(LoopSettings.model_fields)
    lines = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "(entry)"
        if err["type"] == "extra_forbidden":
            lines.append(f"agent loop {entry!r}: unknown key {key!r}; valid keys: {valid}")
        elif not err["loc"] and err["type"] == "value_error":  # a rule across keys (a model validator)
            rule = err["ctx"]["error"]
            lines.append(f"agent loop {entry!r}: {rule}")
        else:
            lines.append(f"agent loop {entry!r}: key {key!r}: {err['msg']} (got {err.get('input')!r})")
    return ConfigError("\n".join(lines))


def parse_settings(kwargs: dict[str, Any], *, entry: str) -> LoopSettings:
    """Validate the non-verl kwargs of a YAML entry."""
    key = tuple(sorted((k, _freeze(v)) for k, v in kwargs.items()))
    return _parse_cached(key, entry)


@lru_cache(maxsize=64)
def _parse_cached(frozen: tuple, entry: str) -> LoopSettings:
    kwargs = {k: _thaw(v) for k, v in frozen}
    try:
        return LoopSettings(**kwargs)
    except ValidationError as exc:
        raise settings_error(exc, entry=entry) from None


def _freeze(value: Any) -> Any:
    if hasattr(value, "items"):
        return ("__dict__", tuple(sorted((k, _freeze(v)) for k, v in value.items())))
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ListConfig":
        return ("__list__", tuple(_freeze(v) for v in value))
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, tuple) and value and value[0] == "__dict__":
        return {k: _thaw(v) for k, v in value[1]}
    if isinstance(value, tuple) and value and value[0] == "__list__":
        return [_thaw(v) for v in value[1]]
    return value
