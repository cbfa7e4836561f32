"""The v1 replay buffer's poll (``extensions/verl_compat/replay_poll.py``) on verl 0.9.1's own classes.

verl's ``ReplayBuffer.sample`` sleeps a fixed 2 s between reads of TransferQueue's metadata, so every
synchronous generation phase was a multiple of 2 s. ``trainer.v1.sampler.sampler_kwargs.poll_interval_s``
replaces it on the buffer ``PPOTrainer._build_replay_buffer`` builds. Here verl's real method builds the
buffer from a real experiment config, and verl's real ``sample`` runs against a scripted ``tq.kv_list``
(the groups finish on its third read): exactly two sleeps, of the configured length.
"""

from __future__ import annotations

import math
import time
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf
from verl.trainer.ppo.v1 import replay_buffer, trainer_base

from extensions.metrics import longflow_metrics, nearest_rank, rollout_timing, time_split
from extensions.verl_compat import installed_trainer_hooks, last_sample_returned_at, poll_interval
from tests.conftest import compose_experiment


def experiment(*overrides: str):
    return compose_experiment("gsm8k_learn", *overrides)


def build(config, mode: str):
    """verl's own ``_build_replay_buffer`` (hooked by the plugin) on a trainer that has only what it reads."""
    trainer = SimpleNamespace(
        config=config,
        trainer_mode=mode,
        _add_prompts_to_generate=lambda count: None,
        _resolve_filter_groups_metric=lambda: None,
    )
    return trainer_base.PPOTrainer._build_replay_buffer(trainer)


def test_the_plugin_hooks_the_v1_trainer() -> None:
    assert "verl.trainer.ppo.v1.trainer_base" in installed_trainer_hooks()


@pytest.mark.parametrize(
    ("mode", "cls"), [("sync", replay_buffer.ReplayBuffer), ("colocate_async", replay_buffer.ReplayBufferAsync)]
)
def test_the_experiments_poll_reaches_verls_buffer(mode: str, cls: type) -> None:
    buffer = build(experiment(f"trainer.v1.trainer_mode={mode}"), mode)
    assert type(buffer) is cls
    assert buffer.poll_interval == 0.05


def test_without_the_key_verls_two_seconds_stay() -> None:
    config = experiment("~trainer.v1.sampler.sampler_kwargs.poll_interval_s")
    assert poll_interval(config) is None
    assert build(config, "sync").poll_interval == 2.0


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("fast", "'fast' is not a number"),
        (True, "True is not a number"),
        (0, "0 is out of range"),
        (-1.5, "-1.5 is out of range"),
        (61, "61 is out of range"),
        (math.nan, "nan is out of range"),
    ],
)
def test_a_bad_poll_is_refused_naming_the_key(value, problem: str) -> None:
    config = OmegaConf.create({"trainer": {"v1": {"sampler": {"sampler_kwargs": {"poll_interval_s": value}}}}})
    with pytest.raises(ValueError) as exc:
        poll_interval(config)
    assert str(exc.value) == (
        f"trainer.v1.sampler.sampler_kwargs.poll_interval_s: {problem}; valid: seconds between checks, in (0, 60]"
    )


def test_the_trainer_raises_every_problem_before_building_anything() -> None:
    """A run started straight from main_ppo (no config_check): verl's trainer __init__ builds the replay buffer
    first, and the hook raises the pack's v1 problems there, all at once."""
    config = experiment(
        "+gpus=x2",
        "+mode=separate_async",
        "actor_rollout_ref.hybrid_engine=false",
        "trainer.v1.sampler.sampler_kwargs.poll_interval_s=0",
    )
    with pytest.raises(ValueError) as exc:
        build(config, "separate_async")
    assert str(exc.value).splitlines() == [
        "the trainer's config: trainer.v1.sampler.sampler_kwargs.poll_interval_s: 0 is out of range; valid: seconds "
        "between checks, in (0, 60]",
        "the trainer's config: actor_rollout_ref.hybrid_engine=false stops verl 0.9.1's separate_async trainer in its "
        "setup (at VERL_LOGGING_LEVEL=INFO, verl's default), after the rollout replicas start: "
        "trainer_separate_async.py passes flush=True to logger.info (TypeError: Logger._log() got an unexpected "
        "keyword argument 'flush'); leave actor_rollout_ref.hybrid_engine=true (VERL_LOGGING_LEVEL=WARN skips that "
        "call; not measured)",
    ]


class ScriptedQueue:
    """``tq.kv_list`` / ``tq.kv_clear`` of one prompt group whose two trajectories finish on the third read."""

    def __init__(self, finish_on_read: int, partition: str = "train"):
        self.finish_on_read = finish_on_read
        self.partition = partition
        self.reads = 0
        self.cleared: list[list[str]] = []

    def kv_list(self):
        self.reads += 1
        done = self.reads >= self.finish_on_read
        items = {"u1": {"is_prompt": True, "status": "finished" if done else "running", "global_steps": 1}}
        if done:
            items |= {f"u1_s{i}_0": {"status": "finished", "global_steps": 1} for i in range(2)}
        return {self.partition: items}

    def kv_clear(self, partition_id: str, keys: list[str]) -> None:
        self.cleared.append(keys)


def test_verls_sample_sleeps_the_configured_poll_and_is_timed(monkeypatch) -> None:
    queue = ScriptedQueue(finish_on_read=3)
    sleeps: list[float] = []
    monkeypatch.setattr(replay_buffer, "tq", queue)
    monkeypatch.setattr(replay_buffer.time, "sleep", sleeps.append)
    buffer = build(experiment(), "sync")
    batch, metrics = buffer.sample(global_steps=1, partition_id="train", batch_size=1)
    assert sleeps == [0.05, 0.05]
    assert queue.reads == 3 and queue.cleared == [["u1"]]
    assert sorted(batch.keys) == ["u1_s0_0", "u1_s1_0"] and metrics == {}
    returned = last_sample_returned_at()
    assert returned is not None and abs(returned - time.time()) < 5
    # a validation's sample (verl validates between the last step's sample and its metrics) leaves it alone
    queue.reads, queue.partition = 0, "val"
    buffer.sample(global_steps=1, partition_id="val", batch_size=1)
    assert last_sample_returned_at() == returned


def turn(role: str, span: tuple[int, int], latency_s: float | None = None, **fields) -> dict:
    return {"role": role, "span": list(span), **fields} | ({} if latency_s is None else {"latency_s": latency_s})


ROWS = [  # two trajectories; the second folded into two segments (each row carries the trajectory's start)
    {
        "started_at": 100.0,
        "finished_at": 103.0,
        "turns": [turn("assistant", (0, 900), 2.5), turn("tool", (900, 950), 0.5)],
    },
    {
        "started_at": 100.5,
        "finished_at": 104.0,
        "turns": [turn("assistant", (0, 40), 0.75), turn("tool", (40, 90), 2.25), turn("assistant", (90, 130), 0.5)],
        "segment": 0,
        "num_segments": 2,
    },
    {
        "started_at": 100.5,
        "finished_at": 109.5,
        "turns": [
            turn("tool", (0, 30), 4.0),
            turn("user", (30, 40), 1.0),
            # a code-fence turn: its 0.5 s include a block run inside it (0.25 s) whose output is tokens 200-260
            turn("assistant", (40, 340), 0.5, code_calls=[{"latency_s": 0.25, "span": [200, 260]}]),
        ],
        "segment": 1,
        "num_segments": 2,
    },
]


def test_rollout_timing_is_per_trajectory_and_batch() -> None:
    assert rollout_timing(ROWS, sampled_at=109.75) == {
        "longflow/rollout/wall_s/mean": 6.0,  # (3.0 + 9.0) / 2
        "longflow/rollout/wall_s/p50": 3.0,
        "longflow/rollout/wall_s/p90": 9.0,
        "longflow/rollout/wall_s/max": 9.0,
        "longflow/rollout/span_s": 9.5,  # 100.0 -> 109.5
        "longflow/rollout/take_lag_s": 0.25,
        # the slowest is the folded one (9.0 s): both segments' turns, not the first trajectory's 900 tokens
        "longflow/rollout/slowest/tool_s": 6.5,  # 2.25 + 4.0 + the block run inside a turn, 0.25
        "longflow/rollout/slowest/generate_s": 1.5,  # 0.75 + 0.5 + (0.5 - 0.25)
        "longflow/rollout/slowest/user_s": 1.0,
        "longflow/rollout/slowest/generated_tokens": 320.0,  # 40 + 40 + (300 - the block's 60 output tokens)
        "longflow/rollout/slowest/assistant_turns": 3.0,
    }
    assert "longflow/rollout/take_lag_s" not in rollout_timing(ROWS)
    assert rollout_timing([]) == {}


def test_wall_time_quantiles_are_nearest_rank() -> None:
    walls = [float(s) for s in (7, 1, 10, 3, 2, 9, 4, 6, 5, 8)]
    assert (nearest_rank(walls, 0.5), nearest_rank(walls, 0.9), nearest_rank(walls, 0.91)) == (5.0, 9.0, 10.0)
    assert nearest_rank([4.0], 0.5) == nearest_rank([4.0], 0.9) == 4.0
    # a trajectory is known by its start time: ten starts, one a second
    rows = [{"started_at": 100.0 + i, "finished_at": 100.0 + i + wall, "turns": []} for i, wall in enumerate(walls)]
    figures = rollout_timing(rows)
    assert (figures["longflow/rollout/wall_s/p50"], figures["longflow/rollout/wall_s/p90"]) == (5.0, 9.0)


def test_time_split_without_latencies_counts_tokens_only() -> None:
    # records without latency_s (written before turns carried it) or a block record without a span: 0 s and no
    # tokens for them, never a negative time
    turns = [turn("assistant", (0, 50), code_calls=[{"latency_s": 0.4}]), turn("tool", (50, 60))]
    assert time_split(turns) == {
        "tool_s": 0.4,
        "generate_s": 0.0,
        "user_s": 0.0,
        "generated_tokens": 50.0,
        "assistant_turns": 1.0,
    }


def test_the_training_metrics_carry_the_timing() -> None:
    metrics = longflow_metrics([*ROWS, None], sampled_at=110.0)
    assert metrics["longflow/rollout/span_s"] == 9.5
    assert metrics["longflow/rollout/take_lag_s"] == 0.5
    assert metrics["longflow/recorded_fraction"] == 0.75
