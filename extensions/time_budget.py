"""``max_trajectory_s``: a wall-clock bound on one trajectory, for the synchronous step that waits on the slowest.

The loop checks it where it would wait next: before each generation (a fold's summary too), before each round of
tool calls, before each user turn, and, in a code-fence turn, before generation resumes after a block ran. A tool call
gets at most the time left (``ToolSession``'s ``time_left``), its wait for a concurrency slot included: it is
cancelled when the bound is reached, and one that would start past it is not run. A generation in flight finishes
first, so a trajectory can overrun the bound by one reply (and by the sandbox's kill of a cancelled call). Past it,
the trajectory ends with reason ``time_budget``: the reward reads no answer from it (its last reply may be cut, and
an answer given just before the bound gets no user turn), and it trains like any other trajectory.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

clock = time.time
"""The clock ``Episode.started_at`` is read against (tests replace it)."""


def over_time(episode: Any, limit_s: float | None) -> str | None:
    """Why the trajectory must end now (``limit_s`` reached since ``episode.started_at``), or None."""
    if limit_s is None:
        return None
    elapsed = clock() - episode.started_at
    if elapsed < limit_s:
        return None
    return f"the trajectory ran {elapsed:.1f} s; max_trajectory_s is {limit_s:g}"


def time_left(episode: Any, limit_s: float | None) -> Callable[[], float] | None:
    """Seconds left of ``limit_s`` since ``episode.started_at``, read at each call (negative past it); None without a
    bound, so the clock is never read."""
    if limit_s is None:
        return None
    return lambda: limit_s - (clock() - episode.started_at)
