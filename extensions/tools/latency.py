"""Added tool latency drawn from a stated distribution: a remote sandbox or API, for long-tail benchmarks.

A tool YAML turns it on under its ``config:`` (``python_exec`` reads it)::

    latency: {distribution: lognormal, median_s: 0.5, sigma: 1.0, max_s: 10.0, seed: 0}

Each call then waits a delay drawn from the distribution before it runs. The wait counts against the
loop's ``tool_timeout_s`` (keep ``max_s`` under it), and the call's metrics say how long it was
(``added_latency_s``). Each process draws its own sequence, seeded with ``seed`` and its pid: verl builds the
tools once per agent-loop worker, and one seed alone would give every worker the same delays.
"""

from __future__ import annotations

import math
import os
import random
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Distribution = Literal["none", "fixed", "exponential", "lognormal"]


class ToolLatency(BaseModel):
    """The ``latency:`` block of a tool's config."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    distribution: Distribution = "none"
    """``none`` (no wait), ``fixed`` (always ``median_s``), ``exponential`` or ``lognormal``, both with median
    ``median_s``."""
    median_s: float = Field(0.0, ge=0)
    """The median delay in seconds (``fixed``: the delay)."""
    sigma: float = Field(1.0, gt=0)
    """``lognormal``'s shape: the standard deviation of the log-delay (1.0: p90 is 3.6x the median, p99 10x)."""
    max_s: float = Field(60.0, gt=0)
    """No delay is longer than this."""
    seed: int | None = None
    """Seed of the random sequences, mixed with each process's pid (None: from the system)."""

    @model_validator(mode="after")
    def _median_for_a_distribution(self) -> ToolLatency:
        if self.distribution != "none" and self.median_s <= 0:
            raise ValueError(f"median_s must be > 0 for distribution {self.distribution!r}")
        return self

    def sampler(self) -> LatencySampler:
        return LatencySampler(self)


class LatencySampler:
    """Draws delays for one tool object."""

    def __init__(self, settings: ToolLatency):
        self.settings = settings
        self.rng = random.Random(None if settings.seed is None else f"{settings.seed}:{os.getpid()}")

    def draw(self) -> float:
        """The next delay in seconds."""
        s = self.settings
        if s.distribution == "none":
            return 0.0
        if s.distribution == "fixed":
            delay = s.median_s
        elif s.distribution == "exponential":
            delay = self.rng.expovariate(math.log(2) / s.median_s)  # median = ln 2 / rate
        else:
            delay = self.rng.lognormvariate(math.log(s.median_s), s.sigma)
        return min(delay, s.max_s)
