"""The pack's exception types: one flat hierarchy.

A bad config fails loudly at construction, naming the file, key and the valid choices.
A bad rollout is data, not a crash: the agent loop records it with reason ``error``.
"""

from __future__ import annotations

from collections.abc import Iterable


class LongflowError(Exception):
    """Base class of every error the pack raises on purpose."""


class ConfigError(LongflowError, ValueError):
    """A YAML entry, CLI option or constructor argument is invalid."""


class SampleError(LongflowError, ValueError):
    """A dataset sample lacks a field its agent loop needs, or has a bad value."""


class ToolError(LongflowError):
    """A tool failed in a way the model should be told about."""


class SandboxError(ToolError):
    """The Python sandbox could not run the code (not: the code failed)."""


class TrajectoryFileError(LongflowError, ValueError):
    """A file that should hold trajectories does not."""


def choices(valid: Iterable[str]) -> str:
    """Render valid choices for an error message: ``'a', 'b', 'c'``."""
    items = sorted(str(v) for v in valid)
    return ", ".join(repr(v) for v in items) if items else "(none)"
