"""scripts/readme_commands.py (run by .ci/run after the main job) finds every command of README.md and the docs
site's pages and runs it, or skips it for a stated reason."""

from __future__ import annotations

from types import ModuleType

import pytest

from tests.scripts import ROOT, load_script


@pytest.fixture(scope="module")
def rc() -> ModuleType:
    return load_script("readme_commands")


def test_every_readme_command_is_run_or_skipped_for_a_stated_reason(rc: ModuleType) -> None:
    commands = rc.readme_commands((ROOT / "README.md").read_text())
    run = [c for c in commands if rc.skip_reason(c) is None]
    skipped = {c.split("#")[0].strip(): rc.skip_reason(c) for c in commands if rc.skip_reason(c)}
    assert (
        skipped["bash scripts/main_job.sh"] == skipped["bash scripts/test.sh"] == ".ci/run runs it before this script"
    )
    assert all(c.startswith(("python -m extensions.", "python -m benchmarks.")) for c in run), run  # CPU only
    assert sum(c.startswith("python -m benchmarks.") for c in run) == 3
    assert "python -m extensions.rollout experiments/gsm8k_code_verify --replay outputs/r/trajectories.jsonl" in run
    assert any(c.startswith("python -m extensions.rollout.view ") for c in run)
    assert any(rc.ROLLOUT_RUN.search(c) for c in run)


def test_parsing_joins_continuations_and_drops_comment_lines(rc: ModuleType) -> None:
    text = "x\n```bash\n# a comment\npython -m a \\\n  --b c   # note\n\necho hi\n```\n```yaml\nk: v\n```\n"
    assert rc.readme_commands(text) == ["python -m a --b c # note", "echo hi"]


def test_ci_arguments_go_to_rollout_runs_only(rc: ModuleType) -> None:
    extra = "--limit 1 x=1"
    assert rc.with_extra_args("python -m extensions.rollout e --limit 4", extra) == (
        "python -m extensions.rollout e --limit 4 --limit 1 x=1"
    )
    assert rc.with_extra_args("python -m extensions.rollout e --replay t.jsonl", extra).endswith("t.jsonl " + extra)
    assert rc.with_extra_args("python -m extensions.rollout.view t.jsonl", extra).endswith("t.jsonl")


def test_a_command_fails_on_its_exit_status_or_a_false_warning(rc: ModuleType) -> None:
    assert rc.run("python -c 'print(1)'") == (True, "1\n")
    ok, output = rc.run("echo 'tokenizer with an incorrect regex pattern' >&2")
    assert not ok and output.endswith("FAILED: printed 'incorrect regex pattern'\n")
    ok, output = rc.run("exit 3")
    assert not ok and output == "\nFAILED: exit 3\n"


def test_sh_blocks_count_and_gpu_engines_are_skipped(rc: ModuleType) -> None:
    text = "```sh\npip install uv && uv pip install x\npython -m extensions.rollout e --backend sglang\n```\n"
    commands = rc.readme_commands(text)
    assert len(commands) == 2
    assert [rc.skip_reason(c) for c in commands] == [
        "installs SGLang's GPU stack into its own environment",
        "rolls out on verl's GPU engine: needs a GPU and that engine",
    ]


def test_short_forms_apply_to_benchmarks_only(rc: ModuleType) -> None:
    assert rc.short_form("python -m benchmarks.load --out o.json") == (
        "python -m benchmarks.load --out o.json --trajectories 50 --batches 1"
    )
    assert rc.short_form("python -m extensions.config_check") == "python -m extensions.config_check"
    with pytest.raises(ValueError, match="with a comment"):
        rc.short_form("python -m benchmarks.load  # note")


def test_the_docs_pages_are_the_sites_nav_minus_results_and_benchmarks(rc: ModuleType) -> None:
    pages = [page.relative_to(ROOT).as_posix() for page in rc.site_pages()]
    assert pages[:3] == ["docs/index.md", "docs/quickstart.md", "docs/concepts.md"]
    assert {"docs/guides/offline-install.md", "docs/guides/sglang.md", "docs/troubleshooting.md"} <= set(pages)
    assert not [page for page in pages if page.startswith(("docs/results/", "docs/benchmarks/"))]


def test_every_docs_command_is_run_or_skipped_for_a_stated_reason(rc: ModuleType) -> None:
    found = rc.page_commands([ROOT / "README.md", *rc.site_pages()])
    docs = [(command, page, earlier) for command, page, earlier in found if page.parent != ROOT]
    assert len(docs) >= 20
    run = [command for command, _, earlier in docs if earlier is None and rc.skip_reason(command) is None]
    assert run and all(c.startswith(("python -m extensions.", "python -m benchmarks.")) for c in run), run  # CPU only
    skipped = {command.split("#")[0].strip(): rc.skip_reason(command) for command, _, _ in docs}
    offline = "the offline GPU install: downloads ~2 GiB, or runs on the GPU machine"
    assert skipped["bash scripts/gpu/build_wheelhouse.sh"] == skipped["bash scripts/gpu/install_on_gpu.sh"] == offline
    assert skipped["LONGFLOW_STEPS=verify bash scripts/gpu/install_on_gpu.sh"] == offline
    assert any(c.startswith("source /tmp/longflow-env.sh") and r for c, r in skipped.items())
    sglang_train = next(c for c in skipped if c.startswith("python -m verl.trainer.main_ppo --config-path"))
    assert skipped[sglang_train] == "trains with stock verl on vLLM or SGLang: needs a GPU"


def test_a_command_an_earlier_page_has_runs_once(rc: ModuleType, tmp_path) -> None:
    first, second = tmp_path / "a.md", tmp_path / "b.md"
    first.write_text("```bash\npython -m extensions.config_check   # all\necho one\n```\n")
    second.write_text("```bash\npython -m extensions.config_check  # again\necho two\n```\n")
    found = rc.page_commands([first, second])
    assert [(c, p.name, e and e.name) for c, p, e in found] == [
        ("python -m extensions.config_check   # all", "a.md", None),
        ("echo one", "a.md", None),
        ("python -m extensions.config_check  # again", "b.md", "a.md"),
        ("echo two", "b.md", None),
    ]
