"""scripts/gpu/scale_hold.sh: its waves' runs, their GPUs and commands, checked before anything starts (no GPU
needed for these paths)."""

from __future__ import annotations

import os
import subprocess

import pytest
import yaml

from extensions.tools.python_exec import PythonExecTool
from tests.conftest import ROOT


def hold(waves: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    script = ROOT / "scripts/gpu/scale_hold.sh"
    env = os.environ | {"WAVES": waves} | env
    return subprocess.run(["bash", str(script), *args], env=env, capture_output=True, text=True, timeout=60)


def dry_lines(waves: str) -> dict[str, str]:
    """Each run's train_bg.sh line of a dry run, by run name."""
    done = hold(waves, "dry", STEPS="10")
    assert done.returncode == 0, done.stderr
    return {
        line.split("train_bg.sh ")[1].split()[0]: line for line in done.stdout.splitlines() if "train_bg.sh" in line
    }


@pytest.mark.parametrize(
    ("waves", "twice"),
    [
        ("A C G K", "fold_colo_x1 fold_sync_x1"),
        ("O N", "fold_pad128 fold_pad2"),  # O is N and M side by side
        ("T U", "colo_x1_s3 sync_x1_s3"),  # U is T's seed 3 on 2 GPUs
        ("R V", "verify_colo_x1 verify_sync_x1"),  # V is N and R side by side
        ("H Z", "verify_sep_x1"),  # Z runs H's separate_async run beside M's folding run
        ("a c", "sync_x2_nd"),  # a is b and c side by side
        ("I b", "sync_x1_b"),  # b reruns I's delayed sync run beside the control
        ("s v", "sync_x1_bound8 sync_x1_dump"),  # v is s beside u's run
        ("u v", "sync_x2_bound8"),
        ("r y", "sync_x1_bound8"),  # y is r beside x
    ],
)
def test_waves_that_reuse_a_run_name_are_refused(waves: str, twice: str) -> None:
    done = hold(waves, "status", "0")
    assert done.returncode == 2
    assert done.stderr == f'WAVES="{waves}" run {twice} twice (/tmp/runs/NAME): run those waves on separate machines\n'


def test_an_unknown_wave_is_named() -> None:
    done = hold("K Q9", "status", "0")
    assert done.returncode == 2 and "unknown wave Q9 (A to Z, a to y)" in done.stderr


def test_a_waves_runs_take_the_gpus_in_order() -> None:
    done = hold("A B I O P R S T W X Y", "plan")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "wave A, 4 GPU(s): sync_x1 (GPU 0), colo_x1 (GPU 1), sync_x2 (GPUs 2,3)",
        "wave B, 4 GPU(s): sync_x4 (GPUs 0,1,2,3)",
        "wave I, 2 GPU(s): sync_x1_b (GPU 0), colo_x1_b (GPU 1)",
        "wave O, 4 GPU(s): fold_pad128 (GPU 0), fold_pad2 (GPU 1), fold_sync_x2 (GPUs 2,3)",
        "wave P, 2 GPU(s): sync_x2_16 (GPUs 0,1)",
        "wave R, 2 GPU(s): verify_sync_x1 (GPU 0), verify_colo_x1 (GPU 1)",
        "wave S, 2 GPU(s): verify_sep_x1 (GPUs 0,1)",
        "wave T, 4 GPU(s): sync_x1_s3 (GPU 0), colo_x1_s3 (GPU 1), sync_x1_s4 (GPU 2), colo_x1_s4 (GPU 3)",
        "wave W, 4 GPU(s): fold_sync_x4 (GPUs 0,1,2,3)",
        "wave X, 4 GPU(s): fold_colo_x4 (GPUs 0,1,2,3)",
        "wave Y, 4 GPU(s): fold_sync_x2_16 (GPUs 0,1), fold_colo_x2_16 (GPUs 2,3)",
    ]
    done = hold("Z", "plan")  # Z reruns H's separate_async run and M's folding run: another machine
    assert done.stdout == "wave Z, 4 GPU(s): verify_sep_x1 (GPUs 0,1), fold_sync_x2 (GPUs 2,3)\n"
    done = hold("V", "plan")  # V reruns O's and R's runs: another machine
    assert done.stdout == (
        "wave V, 4 GPU(s): fold_pad128 (GPU 0), fold_pad2 (GPU 1), verify_sync_x1 (GPU 2), verify_colo_x1 (GPU 3)\n"
    )


def test_a_run_has_one_command_in_every_wave_that_starts_it() -> None:
    """F's colocate_async run on GPUs 2-3 is Q's on GPUs 0-1; the same overrides either way."""
    lines = {wave: dry_lines(wave)["colo_x2_16"] for wave in ("F", "Q")}
    assert lines["F"] == (
        "CUDA_VISIBLE_DEVICES=2,3 VARIANT=tools train_bg.sh colo_x2_16 algorithm.adv_estimator=turn_grpo "
        "trainer.total_training_steps=10 trainer.val_before_train=false +ray_kwargs.ray_init.include_dashboard=false "
        "actor_rollout_ref.rollout.multi_turn.tool_config_path=/tmp/runs/colo_x2_16/src/experiments/gsm8k_learn/"
        "tools_long_tail.yaml +gpus=x2 +mode=colocate_async data.train_batch_size=16 "
        "actor_rollout_ref.actor.ppo_mini_batch_size=8 trainer.test_freq=-1"
    )
    assert lines["Q"] == lines["F"].replace("CUDA_VISIBLE_DEVICES=2,3", "CUDA_VISIBLE_DEVICES=0,1")


def test_the_padding_comparison_differs_only_in_the_padding_rows() -> None:
    lines = dry_lines("N")
    verl_rows, pack_rows = lines["fold_pad128"], lines["fold_pad2"]
    assert verl_rows.startswith(
        "CUDA_VISIBLE_DEVICES=0 VARIANT=ledger_fold LEDGER_QUESTION=flagged TRAIN_COUNT=1000 TEST_COUNT=128 "
        "train_bg.sh fold_pad128 "
    )
    assert verl_rows.endswith(" +gpus=x1 +mode=sync +trainer.v1.padding_row_tokens=128")
    expected = verl_rows.replace("CUDA_VISIBLE_DEVICES=0", "CUDA_VISIBLE_DEVICES=1").replace("fold_pad128", "fold_pad2")
    assert pack_rows == expected.removesuffix(" +trainer.v1.padding_row_tokens=128")


@pytest.mark.parametrize(
    ("run", "seeds"),
    [("sync_x1_s3", "3 44"), ("colo_x1_s3", "3 44"), ("sync_x1_s4", "4 45"), ("colo_x1_s4", "4 45")],
)
def test_a_further_seed_differs_from_seed_one_only_in_its_seeds(run: str, seeds: str) -> None:
    """T's accuracy runs are A's validated 1-GPU runs (the same mode, validation, steps) with other seeds."""
    first = run.rsplit("_", 1)[0]  # sync_x1 or colo_x1
    data_seed, rollout_seed = seeds.split()
    lines = {name: dry_lines(wave)[name].split(" ", 1)[1] for wave, name in (("T", run), ("A", first))}
    expected = (
        lines[first]
        .replace(first, run)
        .replace(
            " trainer.test_freq=10",
            f" data.seed={data_seed} actor_rollout_ref.rollout.seed={rollout_seed} trainer.test_freq=10",
        )
    )
    assert lines[run] == expected


def test_folding_strong_scaling_runs_one_gpus_batch_on_two() -> None:
    """Y's runs are the 2-GPU preset with gpus/x1's batch and mini-batch (16 ledgers x 8, 192): the same samples a
    step as fold_sync_x1, so the step time compares directly."""
    lines = dry_lines("Y")
    sync, colo = lines["fold_sync_x2_16"], lines["fold_colo_x2_16"]
    assert sync.endswith(
        " +gpus=x2 +mode=sync data.train_batch_size=16 actor_rollout_ref.actor.ppo_mini_batch_size=192"
    )
    assert colo == sync.replace("0,1", "2,3").replace("fold_sync_x2_16", "fold_colo_x2_16").replace(
        "+mode=sync", "+mode=colocate_async"
    )


def test_z_runs_h_and_m_side_by_side_with_their_own_commands() -> None:
    z, h, m = dry_lines("Z"), dry_lines("H"), dry_lines("M")
    assert z["verify_sep_x1"] == h["verify_sep_x1"].replace("CUDA_VISIBLE_DEVICES=2,3", "CUDA_VISIBLE_DEVICES=0,1")
    assert z["fold_sync_x2"] == m["fold_sync_x2"].replace("CUDA_VISIBLE_DEVICES=0,1", "CUDA_VISIBLE_DEVICES=2,3")
    assert not any("hybrid_engine" in line for line in z.values())


def test_folding_on_four_gpus_uses_the_x4_preset() -> None:
    lines = dry_lines("W") | dry_lines("X")
    assert lines["fold_sync_x4"].startswith("CUDA_VISIBLE_DEVICES=0,1,2,3 VARIANT=ledger_fold ")
    assert lines["fold_sync_x4"].endswith(" +gpus=x4 +mode=sync")
    assert lines["fold_colo_x4"] == lines["fold_sync_x4"].replace("fold_sync_x4", "fold_colo_x4").replace(
        "+mode=sync", "+mode=colocate_async"
    )


def test_the_no_delay_control_differs_from_the_delayed_runs_only_in_its_tools() -> None:
    """a's sync_x1_nd and sync_x2_nd are I's sync_x1_b and D's sync_x2_b with tools_no_delay.yaml."""
    assert hold("a b c", "plan").returncode == 2  # a reruns b's and c's runs: another machine
    assert (
        hold("a", "plan").stdout == "wave a, 4 GPU(s): sync_x1_nd (GPU 0), sync_x1_b (GPU 1), sync_x2_nd (GPUs 2,3)\n"
    )
    assert hold("b c", "plan").stdout.splitlines() == [
        "wave b, 2 GPU(s): sync_x1_nd (GPU 0), sync_x1_b (GPU 1)",
        "wave c, 2 GPU(s): sync_x2_nd (GPUs 0,1)",
    ]
    a, d, i = dry_lines("a"), dry_lines("D"), dry_lines("I")
    assert a["sync_x1_b"] == i["sync_x1_b"].replace("CUDA_VISIBLE_DEVICES=0", "CUDA_VISIBLE_DEVICES=1")
    assert a["sync_x1_nd"] == i["sync_x1_b"].replace("sync_x1_b", "sync_x1_nd").replace(
        "tools_long_tail.yaml", "tools_no_delay.yaml"
    )
    assert a["sync_x2_nd"] == d["sync_x2_b"].replace("sync_x2_b", "sync_x2_nd").replace(
        "tools_long_tail.yaml", "tools_no_delay.yaml"
    )


def test_the_no_delay_tools_are_the_long_tail_tools_without_the_delay() -> None:
    def tools(name: str) -> list[dict]:
        return yaml.safe_load((ROOT / "experiments/gsm8k_learn" / name).read_text())["tools"]

    delayed, control = tools("tools_long_tail.yaml"), tools("tools_no_delay.yaml")
    assert delayed[0]["config"].pop("latency")["distribution"] == "lognormal"
    assert control[0]["config"].pop("latency") == {"distribution": "none"}
    assert control == delayed
    config = tools("tools_no_delay.yaml")[0]["config"]
    assert PythonExecTool(dict(config)).latency.draw() == 0.0


def test_folding_under_separate_async_runs_beside_sync_on_the_same_gpus_and_batch() -> None:
    """l/m (a 2-GPU machine) and n (4 GPUs): fold_sep_x1_wb is fold_sync_x1_wb under separate_async (1 trainer GPU +
    1 rollout GPU, one whole-batch actor update a step); fold_sync_x2_16_wb is Y's fold_sync_x2_16 with the
    whole-batch update: the same 16 ledgers x 8 a step on 2 GPUs."""
    assert hold("l m", "plan").stdout.splitlines() == [
        "wave l, 2 GPU(s): fold_sep_x1_wb (GPUs 0,1)",
        "wave m, 2 GPU(s): fold_sync_x2_16_wb (GPUs 0,1)",
    ]
    assert hold("n", "plan").stdout == "wave n, 4 GPU(s): fold_sync_x2_16_wb (GPUs 0,1), fold_sep_x1_wb (GPUs 2,3)\n"
    done = hold("l m n", "plan")
    assert done.returncode == 2 and "run fold_sep_x1_wb fold_sync_x2_16_wb twice" in done.stderr
    lm, n, e, y = dry_lines("l m"), dry_lines("n"), dry_lines("e"), dry_lines("Y")
    assert lm["fold_sep_x1_wb"] == e["fold_sync_x1_wb"].replace(
        "CUDA_VISIBLE_DEVICES=1 ", "CUDA_VISIBLE_DEVICES=0,1 "
    ).replace("fold_sync_x1_wb", "fold_sep_x1_wb").replace("+mode=sync", "+mode=separate_async") + (
        " trainer.v1.separate_async.parameter_sync_step=1 actor_rollout_ref.actor.ppo_mini_batch_size=16"
    )
    assert lm["fold_sync_x2_16_wb"] == y["fold_sync_x2_16"].replace("fold_sync_x2_16", "fold_sync_x2_16_wb") + (
        " +trainer.v1.whole_batch_update=true"
    )
    assert n["fold_sync_x2_16_wb"] == lm["fold_sync_x2_16_wb"]
    assert n["fold_sep_x1_wb"] == lm["fold_sep_x1_wb"].replace("CUDA_VISIBLE_DEVICES=0,1", "CUDA_VISIBLE_DEVICES=2,3")


def test_colocate_async_folding_with_the_whole_batch_update_at_two_and_four_gpus() -> None:
    """o and p are f's fold_colo_x2_wb alone and its 4-GPU preset: colocate_async's weak scaling at 1, 2 and 4 GPUs
    (WAVES="f p" on a 4-GPU machine; o beside wave j's fold_colo_x1_wb on a 2-GPU one)."""
    assert hold("f p", "plan").stdout.splitlines() == [
        "wave f, 4 GPU(s): fold_colo_x1 (GPU 0), fold_colo_x1_wb (GPU 1), fold_colo_x2_wb (GPUs 2,3)",
        "wave p, 4 GPU(s): fold_colo_x4_wb (GPUs 0,1,2,3)",
    ]
    f, o, p = dry_lines("f"), dry_lines("o"), dry_lines("p")
    assert o["fold_colo_x2_wb"] == f["fold_colo_x2_wb"].replace("CUDA_VISIBLE_DEVICES=2,3", "CUDA_VISIBLE_DEVICES=0,1")
    assert p["fold_colo_x4_wb"] == o["fold_colo_x2_wb"].replace("0,1", "0,1,2,3").replace("x2", "x4")


def test_the_time_bound_run_differs_from_its_control_only_in_the_agent_loop_yaml() -> None:
    """q/r (a 1-GPU machine) and s (2 GPUs): sync_x1_dump is I's sync_x1_b with its training rollouts dumped;
    sync_x1_bound8 is the same with agent_loops_time_bound.yaml, which is agent_loops.yaml plus max_trajectory_s."""
    assert hold("q r", "plan").stdout.splitlines() == [
        "wave q, 1 GPU(s): sync_x1_dump (GPU 0)",
        "wave r, 1 GPU(s): sync_x1_bound8 (GPU 0)",
    ]
    assert hold("s", "plan").stdout == "wave s, 2 GPU(s): sync_x1_dump (GPU 0), sync_x1_bound8 (GPU 1)\n"
    qr, s, i = dry_lines("q r"), dry_lines("s"), dry_lines("I")
    assert qr["sync_x1_dump"] == i["sync_x1_b"].replace("sync_x1_b", "sync_x1_dump") + (
        " trainer.rollout_data_dir=/tmp/runs/sync_x1_dump/rollouts"
    )
    assert qr["sync_x1_bound8"] == qr["sync_x1_dump"].replace("sync_x1_dump", "sync_x1_bound8") + (
        " actor_rollout_ref.rollout.agent.agent_loop_config_path="
        "/tmp/runs/sync_x1_bound8/src/experiments/gsm8k_learn/agent_loops_time_bound.yaml"
    )
    assert s["sync_x1_dump"] == qr["sync_x1_dump"]
    assert s["sync_x1_bound8"] == qr["sync_x1_bound8"].replace("CUDA_VISIBLE_DEVICES=0", "CUDA_VISIBLE_DEVICES=1")

    def entries(name: str) -> list[dict]:
        return yaml.safe_load((ROOT / "experiments/gsm8k_learn" / name).read_text())

    (bounded,), (plain,) = entries("agent_loops_time_bound.yaml"), entries("agent_loops.yaml")
    assert bounded.pop("max_trajectory_s") == 8.0
    assert bounded == plain


def test_the_bounded_weak_scaling_runs_differ_from_the_1_gpu_one_only_in_gpus() -> None:
    """u (after s on 2 GPUs) and v, w (4 GPUs): the bounded run with the batch grown with the GPUs (the gpus/ presets)."""
    assert hold("s u", "plan").stdout.splitlines() == [
        "wave s, 2 GPU(s): sync_x1_dump (GPU 0), sync_x1_bound8 (GPU 1)",
        "wave u, 2 GPU(s): sync_x2_bound8 (GPUs 0,1)",
    ]
    assert hold("v w", "plan").stdout.splitlines() == [
        "wave v, 4 GPU(s): sync_x1_dump (GPU 0), sync_x1_bound8 (GPU 1), sync_x2_bound8 (GPUs 2,3)",
        "wave w, 4 GPU(s): sync_x4_bound8 (GPUs 0,1,2,3)",
    ]
    su, vw = dry_lines("s u"), dry_lines("v w")
    one = su["sync_x1_bound8"].replace("CUDA_VISIBLE_DEVICES=1", "CUDA_VISIBLE_DEVICES=0")
    assert su["sync_x2_bound8"] == one.replace("CUDA_VISIBLE_DEVICES=0", "CUDA_VISIBLE_DEVICES=0,1").replace("x1", "x2")
    assert vw["sync_x4_bound8"] == one.replace("CUDA_VISIBLE_DEVICES=0", "CUDA_VISIBLE_DEVICES=0,1,2,3").replace(
        "x1", "x4"
    )
    assert vw["sync_x2_bound8"] == su["sync_x2_bound8"].replace("CUDA_VISIBLE_DEVICES=0,1", "CUDA_VISIBLE_DEVICES=2,3")
    assert {k: vw[k] for k in ("sync_x1_dump", "sync_x1_bound8")} == {
        k: su[k] for k in ("sync_x1_dump", "sync_x1_bound8")
    }


def test_the_masked_bound_run_differs_from_the_bound_run_only_in_its_agent_loop_yaml() -> None:
    """x (after r on 1 GPU) and y (2 GPUs, side by side): sync_x1_bound8_mask is sync_x1_bound8 with
    agent_loops_time_bound_masked.yaml, which is agent_loops_time_bound.yaml plus mask_time_budget."""
    assert hold("r x", "plan").stdout.splitlines() == [
        "wave r, 1 GPU(s): sync_x1_bound8 (GPU 0)",
        "wave x, 1 GPU(s): sync_x1_bound8_mask (GPU 0)",
    ]
    assert hold("y", "plan").stdout == "wave y, 2 GPU(s): sync_x1_bound8 (GPU 0), sync_x1_bound8_mask (GPU 1)\n"
    rx, y = dry_lines("r x"), dry_lines("y")
    assert rx["sync_x1_bound8_mask"] == rx["sync_x1_bound8"].replace("sync_x1_bound8", "sync_x1_bound8_mask").replace(
        "agent_loops_time_bound.yaml", "agent_loops_time_bound_masked.yaml"
    )
    assert y["sync_x1_bound8"] == rx["sync_x1_bound8"]
    assert y["sync_x1_bound8_mask"] == rx["sync_x1_bound8_mask"].replace("DEVICES=0", "DEVICES=1")
    (masked,) = yaml.safe_load((ROOT / "experiments/gsm8k_learn/agent_loops_time_bound_masked.yaml").read_text())
    (bounded,) = yaml.safe_load((ROOT / "experiments/gsm8k_learn/agent_loops_time_bound.yaml").read_text())
    assert masked.pop("mask_time_budget") is True
    assert masked == bounded


def test_the_gathered_update_differs_from_its_twin_only_in_two_fsdp_settings() -> None:
    """t is h's fold_sync_x2_wb with one gradient reduce-scatter a step and no re-gather for the backward."""
    assert hold("h t", "plan").stdout.splitlines() == [
        "wave h, 2 GPU(s): fold_sync_x2_wb (GPUs 0,1)",
        "wave t, 2 GPU(s): fold_sync_x2_wb_ns (GPUs 0,1)",
    ]
    ht = dry_lines("h t")
    assert ht["fold_sync_x2_wb_ns"] == ht["fold_sync_x2_wb"].replace("fold_sync_x2_wb", "fold_sync_x2_wb_ns") + (
        " actor_rollout_ref.actor.fsdp_config.use_no_sync_for_gradient_accumulation=true"
        " actor_rollout_ref.actor.fsdp_config.reshard_after_forward=false"
    )
