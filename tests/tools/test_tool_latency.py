"""Added tool latency (``extensions/tools/latency.py``): the long-tail workload's remote-sandbox delay."""

from __future__ import annotations

import math
import os
import random

import pytest

from extensions.errors import ConfigError
from extensions.tools import latency, python_exec
from extensions.tools.latency import ToolLatency
from extensions.tools.python_exec import PythonExecTool


def test_draws_follow_the_stated_distribution_exactly() -> None:
    lognormal = ToolLatency(distribution="lognormal", median_s=0.5, sigma=1.5, max_s=10.0, seed=7).sampler()
    reference = random.Random(f"7:{os.getpid()}")
    expected = [min(reference.lognormvariate(math.log(0.5), 1.5), 10.0) for _ in range(200)]
    assert [lognormal.draw() for _ in range(200)] == expected
    assert max(expected) == 10.0  # the cap is reached in 200 draws of this tail
    exponential = ToolLatency(distribution="exponential", median_s=2.0, seed=3).sampler()
    reference = random.Random(f"3:{os.getpid()}")
    assert exponential.draw() == reference.expovariate(math.log(2) / 2.0)
    assert ToolLatency(distribution="fixed", median_s=1.25).sampler().draw() == 1.25
    assert ToolLatency().sampler().draw() == 0.0


def test_each_process_draws_its_own_sequence(monkeypatch) -> None:
    """verl builds the tools once per agent-loop worker: one seed alone gave every worker the same delays."""
    settings = ToolLatency(distribution="lognormal", median_s=0.5, seed=0)
    draws = {}
    for pid in (101, 102, 101):
        monkeypatch.setattr(latency.os, "getpid", lambda pid=pid: pid)
        draws.setdefault(pid, []).append([settings.sampler().draw() for _ in range(3)])
    assert draws[101][0] == draws[101][1]  # the same process: reproducible
    assert draws[101][0] != draws[102][0]  # another worker: another sequence


def test_the_lognormal_median_is_median_s() -> None:
    sampler = ToolLatency(distribution="lognormal", median_s=0.5, sigma=1.5, max_s=1e9, seed=0).sampler()
    draws = sorted(sampler.draw() for _ in range(20001))
    assert draws[10000] == pytest.approx(0.5, rel=0.05)


async def test_python_exec_waits_the_drawn_delay_then_runs(monkeypatch) -> None:
    slept: list[float] = []

    async def record(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(python_exec, "wait_latency", record)
    tool = PythonExecTool(
        {"type": "native", "latency": {"distribution": "lognormal", "median_s": 0.5, "sigma": 1.5, "seed": 11}}
    )
    expected = random.Random(f"11:{os.getpid()}").lognormvariate(math.log(0.5), 1.5)
    response, reward, metrics = await tool.execute("i1", {"code": "print(6 * 7)"})
    assert slept == [expected]
    assert metrics["added_latency_s"] == expected and metrics["exit_code"] == 0
    assert response.text == "42\n[exit status 0]"
    assert tool.limits.wall_time_s == 10.0  # the latency block does not reach the sandbox's limits


async def test_without_latency_nothing_waits(monkeypatch) -> None:
    monkeypatch.setattr(python_exec, "wait_latency", lambda seconds: pytest.fail(f"slept {seconds}"))
    _, _, metrics = await PythonExecTool({"type": "native"}).execute("i1", {"code": "print(1)"})
    assert metrics["added_latency_s"] == 0.0


@pytest.mark.parametrize(
    ("latency", "problem"),
    [
        (
            {"distribution": "pareto", "median_s": 1},
            "'latency.distribution': Input should be 'none', 'fixed', 'exponential' or 'lognormal' (got 'pareto')",
        ),
        (
            {"distribution": "lognormal"},
            "'latency': Value error, median_s must be > 0 for distribution 'lognormal' "
            "(got {'distribution': 'lognormal'})",
        ),
        ({"distribution": "fixed", "median_s": 1, "mean_s": 2}, "'latency.mean_s' is not a config key"),
    ],
)
def test_a_bad_latency_block_names_the_key(latency: dict, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        PythonExecTool({"type": "native", "latency": latency})
    assert str(caught.value).startswith(f"tool 'python_exec' config: {problem}. Valid keys: 'cpu_time_s', ")
