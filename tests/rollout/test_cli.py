"""The rollout driver's exit status: invalid experiments fail before any model loads (every problem
listed), too many `error` trajectories fail after the outputs are written, replay needs no model path,
and verl's console noise stays off stdout unless --verbose.

The LLM is the scripted fake (no LLM runs on CPU), put in place of the vllm backend's servers; the
worker, tools, interactions, data loading, scoring and outputs are the real ones.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from extensions.data.gsm8k import main as prepare_main
from extensions.rollout import cli
from extensions.rollout.backends import InProcessBackend
from extensions.testing.scripted_server import ScriptedServer, ServerFault

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENT = str(ROOT / "experiments" / "gsm8k_code_verify")
GOOD, BAD = "Ann has 3 pens and buys 4 more. How many pens?", "Bo has 10 cups and breaks 2. How many cups?"
BAD_LOOPS = (
    "- name: long_workflow\n  _target_: extensions.custom_rollouts.LongWorkflowAgent\n"
    '  max_assistant_turns: "fifteen"\n  max_tool_round: 3\n'
)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("cli")
    rows = [{"question": GOOD, "answer": "3 + 4 = 7\n#### 7"}, {"question": BAD, "answer": "10 - 2 = 8\n#### 8"}]
    (tmp / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert (
        prepare_main(["--input", str(tmp / "in.jsonl"), "--output-dir", str(tmp), "--interaction", "code_verify"]) == 0
    )
    return tmp / "train.parquet"


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch, qwen_dir: Path) -> dict[str, Any]:
    """``--backend vllm`` runs verl's worker in-process on the scripted fake; records what was built."""
    built: dict[str, Any] = {}

    def make_backend(name: str, config: Any, **_: Any) -> InProcessBackend:
        backend = InProcessBackend(config, llm_client=None)
        backend.llm_client = backend.worker.llm_client = ScriptedServer(
            backend.tokenizer, {GOOD: ["It is 7.\n#### 7", "Checked: 7.\n#### 7"], BAD: [ServerFault("GPU fell off")]}
        )
        built["backend"] = name
        built["starts"] = built.get("starts", 0) + 1
        return backend

    monkeypatch.setattr(cli, "make_backend", make_backend)
    monkeypatch.chdir(ROOT)  # the experiment's relative paths
    monkeypatch.setenv("LONGFLOW_MODEL_PATH", str(qwen_dir))
    return built


def run(*argv: str) -> int:
    return cli.main(["--backend", "vllm", *argv])


def test_invalid_experiment_exits_2_listing_every_problem_before_the_model_loads(
    tmp_path: Path, data: Path, scripted: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "bad.yaml").write_text(BAD_LOOPS)
    (tmp_path / "rows.jsonl").write_text(json.dumps({"question": "no prompt column"}) + "\n")
    code = run(
        EXPERIMENT,
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={tmp_path / 'bad.yaml'}",
        "reward.custom_reward_function.reward_kwargs.mode=loose",
        "--data",
        str(tmp_path / "rows.jsonl"),
        "--out",
        str(tmp_path / "out"),
    )
    assert code == cli.EXIT_INVALID == 2
    assert scripted == {} and not (tmp_path / "out").exists()  # no backend built, nothing written
    err = capsys.readouterr().err.splitlines()
    bad, config = tmp_path / "bad.yaml", Path(EXPERIMENT) / "config.yaml"
    assert err[0] == (
        f"{bad}[0]: agent loop 'long_workflow': key 'max_assistant_turns': Input should be a valid integer "
        "(got 'fifteen')"
    )
    assert err[1].startswith(f"{bad}[0]: agent loop 'long_workflow': unknown key 'max_tool_round'; valid keys: ")
    assert err[2] == (
        f"{config}: reward.custom_reward_function.reward_kwargs: key 'mode': Input should be 'strict' or 'flexible' "
        "(got 'loose')"
    )
    assert err[3] == (
        f"data file {str(tmp_path / 'rows.jsonl')!r}: no prompt column 'prompt' (data.prompt_key); columns: "
        "['question']"
    )
    assert err[4:] == [f"error: 4 problem(s) in experiment {EXPERIMENT}; nothing was run"]


def test_samples_with_unknown_loops_or_interactions_exit_2(
    tmp_path: Path, data: Path, scripted: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    code = run(EXPERIMENT, "--data", str(data), "--force-agent-name", "nosuch", "--out", str(tmp_path))
    assert code == 2 and scripted == {}
    first = capsys.readouterr().err.splitlines()[0]
    assert first.startswith("--force-agent-name 'nosuch' is not a registered agent loop; valid: ")
    assert {"'long_workflow'", "'single_turn_agent'", "'tool_agent'"} <= set(first.split("valid: ")[1].split(", "))
    rows = tmp_path / "rows.jsonl"
    prompt = [{"role": "user", "content": "hi"}]
    rows.write_text(
        "".join(
            json.dumps({"prompt": prompt, "extra_info": {"interaction_kwargs": {"name": name}}}) + "\n"
            for name in ("code_verify", "nosuch_user", "nosuch_user")
        )
    )
    assert run(EXPERIMENT, "--data", str(rows), "--out", str(tmp_path)) == 2
    assert capsys.readouterr().err.splitlines()[0] == (
        f"2 sample(s) (first: {rows} row 1) ask for interaction 'nosuch_user', which agent loop 'long_workflow' does "
        "not define; valid: 'code_verify'"
    )


def test_several_forced_loops_share_one_engine_start_and_write_one_folder_each(
    tmp_path: Path, data: Path, scripted: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """An A/B in one engine start: every sample once per loop, each loop's outputs and summary in OUT/<loop>; the
    exit status is the worst loop's. verl's single_turn_agent lets the scripted fault fail its whole batch."""
    loops = "long_workflow,single_turn_agent"
    args = ("--data", str(data), "--no-html", "--max-error-rate", "0.5", "--force-agent-name", loops)
    assert run(EXPERIMENT, *args, "--out", str(tmp_path)) == cli.EXIT_ERRORS
    assert scripted["starts"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["long_workflow", "single_turn_agent"]
    ends = {}
    for loop, errors in (("long_workflow", 1), ("single_turn_agent", 2)):
        summary = json.loads((tmp_path / loop / "summary.json").read_text())
        assert (summary["agent_name"], summary["engine_shared_by"]) == (loop, loops.split(","))
        assert (summary["trajectories"], summary["errors"], summary["backend"]) == (2, errors, "vllm")
        records = [json.loads(line) for line in (tmp_path / loop / "trajectories.jsonl").read_text().splitlines()]
        assert {r["agent_name"] for r in records} == {loop}
        ends[loop] = [r["termination_reason"] for r in records]
    assert ends == {"long_workflow": ["interaction_done", "error"], "single_turn_agent": ["error", "error"]}
    captured = capsys.readouterr()
    assert captured.out.count("wrote ") == 2
    assert f"wrote {tmp_path / 'single_turn_agent' / 'trajectories.jsonl'} (2 trajectories)" in captured.out
    assert captured.err.splitlines()[-1] == (
        "error: 2 of 2 trajectories ended in `error` (more than --max-error-rate 0.5); "
        f"see {tmp_path / 'single_turn_agent' / 'trajectories.jsonl'}"
    )

    assert run(EXPERIMENT, *args[:-1], "long_workflow,nosuch", "--out", str(tmp_path / "x")) == 2
    assert capsys.readouterr().err.splitlines()[0].startswith("--force-agent-name 'nosuch' is not a registered")
    with pytest.raises(SystemExit) as exit_:
        run(EXPERIMENT, *args[:-1], "long_workflow,,long_workflow")
    assert exit_.value.code == 2 and "expected distinct loop names separated by commas" in capsys.readouterr().err
    assert scripted["starts"] == 1  # neither bad command started an engine


def test_error_trajectories_exit_3_unless_within_max_error_rate(
    tmp_path: Path, data: Path, scripted: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(EXPERIMENT, "--data", str(data), "--out", str(tmp_path / "a"), "--no-html") == cli.EXIT_ERRORS == 3
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert (summary["trajectories"], summary["errors"]) == (2, 1)
    records = [json.loads(line) for line in (tmp_path / "a" / "trajectories.jsonl").read_text().splitlines()]
    assert [r["termination_reason"] for r in records] == ["interaction_done", "error"]
    captured = capsys.readouterr()
    assert captured.err.splitlines()[-1] == (
        "error: 1 of 2 trajectories ended in `error` (more than --max-error-rate 0.0); "
        f"see {tmp_path / 'a' / 'trajectories.jsonl'}"
    )
    assert '"type": "function"' not in captured.out  # verl's tool-schema dump stays off the console
    assert "Using dataset class" not in captured.out
    assert "Generating train split" not in captured.err  # datasets' progress bar

    args = ("--data", str(data), "--out", str(tmp_path / "b"), "--no-html", "--max-error-rate", "0.5", "--verbose")
    assert run(EXPERIMENT, *args) == 0
    assert '"name": "python_exec"' in capsys.readouterr().out  # --verbose brings it back


def test_replay_needs_no_model_path(
    tmp_path: Path,
    data: Path,
    scripted: dict[str, Any],
    qwen_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The README's replay command after a run: the model comes from summary.json, else the offline tokenizer."""
    out = tmp_path / "run"
    assert run(EXPERIMENT, "--data", str(data), "--out", str(out), "--no-html", "--max-error-rate", "1") == 0
    monkeypatch.setenv("LONGFLOW_MODEL_PATH", str(tmp_path / "never-created"))  # the config's default is absent
    monkeypatch.setenv("LONGFLOW_CACHE", str(tmp_path / "cache"))  # no embedded model built there
    capsys.readouterr()
    assert cli.main([EXPERIMENT, "--replay", str(out / "trajectories.jsonl"), "--out", str(tmp_path / "r1")]) == 0
    assert capsys.readouterr().out == (
        "replayed 1 trajectories (1 skipped: errors or prompt_too_long), 0 mismatch(es)\n"
    )  # the verdict only: verl's prints stay off the console
    assert len((tmp_path / "r1" / "replayed.jsonl").read_text().splitlines()) == 1  # the error one is skipped

    (out / "summary.json").unlink()  # no summary: the pack's offline Qwen tokenizer (copied in, not rebuilt)
    shutil.copytree(qwen_dir, tmp_path / "cache" / "qwen25-tokenizer")
    assert cli.main([EXPERIMENT, "--replay", str(out / "trajectories.jsonl"), "--out", str(tmp_path / "r2")]) == 0

    code = cli.main(
        [EXPERIMENT, "--replay", str(out / "trajectories.jsonl"), f"actor_rollout_ref.model.path={tmp_path / 'x'}"]
    )
    assert code == 2  # an explicit path that is not a model dir is a config error, not a traceback


def test_help_documents_the_exit_status(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert cli.EXIT_STATUS in out
    assert "--max-error-rate MAX_ERROR_RATE" in out and "--verbose" in out
