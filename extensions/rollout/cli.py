"""Rollout-only driver: an experiment's data through its agent loops, without the trainer.

    python -m extensions.rollout experiments/gsm8k_code_verify [hydra.overrides=...] \
        [--backend hf|vllm|sglang|demo] [--demo-policy MODULE:FUNCTION] [--data FILE] [--limit N] [--batch-size N] \
        [--agent-name NAME] [--force-agent-name NAME[,NAME...]] [--interaction NAME] [--out DIR] [--no-html] \
        [--replay FILE] \
        [--max-error-rate R] [--verbose]

Steps: 1. compose the experiment's config.yaml (on verl's ppo_trainer) with the overrides, and
validate the whole experiment (``extensions/rollout/preflight.py``) before any model loads;
2. pick the model (``hf`` defaults to the embedded Qwen2.5-Coder-0.5B); 3. load samples with
verl's RLHFDataset; 4. run them through verl's agent loops, batch by batch; 5. score each
trajectory with the experiment's reward function; 6. write trajectories.jsonl,
summary.json and report.html under ``--out``. The exit status (``EXIT_STATUS``) says how it went.
``--force-agent-name A,B`` runs every sample once with each loop against one engine start (an A/B
without a second server start: minutes on a GPU); each loop's outputs go to ``--out``/A and ``--out``/B.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import logging
import sys
import time
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, open_dict

from extensions.errors import ConfigError, LongflowError
from extensions.rollout.backends import BACKENDS, make_backend, set_engine
from extensions.rollout.convert import failed_records, to_record
from extensions.rollout.data import batches, file_list, fill_defaults, load_dataset
from extensions.rollout.preflight import validate_experiment
from extensions.rollout.records import TrajectoryRecord, write_jsonl
from extensions.rollout.scoring import load_reward_fn, score
from extensions.rollout.summary import format_summary, summarize

logger = logging.getLogger("extensions.rollout")

EXIT_OK, EXIT_CRASH, EXIT_INVALID, EXIT_ERRORS, EXIT_REPLAY_MISMATCH = 0, 1, 2, 3, 4
EXIT_STATUS = """exit status:
  0  done: at most --max-error-rate of the trajectories ended in `error`
     (with --replay: every trajectory rebuilt token for token)
  1  an unexpected failure (Python prints its traceback)
  2  invalid command line or experiment (config, agent-loop/tool/interaction files, reward
     settings, dataset columns): every problem is listed; no model was loaded, nothing ran
  3  more than --max-error-rate of the trajectories ended in `error`; trajectories.jsonl,
     summary.json and report.html are written all the same
  4  --replay: some trajectory did not rebuild identically"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m extensions.rollout",
        description=__doc__.split("\n\n")[0],
        epilog=EXIT_STATUS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("experiment", help="experiment folder (with config.yaml) or a config .yaml file")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. actor_rollout_ref.rollout.n=2")
    parser.add_argument("--backend", choices=BACKENDS, default=None, help="default: vllm with a GPU, else hf")
    parser.add_argument(
        "--demo-policy",
        default=None,
        help="--backend demo: the demonstrator, module:function of the decoded prompt "
        "(default extensions.warm_start.ledger_demo:flagged_ledger)",
    )
    parser.add_argument("--data", help="a .parquet/.jsonl file (default: the config's data.train_files)")
    parser.add_argument("--limit", type=int, default=None, help="first N samples only")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--agent-name", help="agent loop for samples without an agent_name column")
    parser.add_argument(
        "--force-agent-name",
        help="run every sample with this agent loop; with NAME,NAME,... once with each, one engine start for all, "
        "each loop's outputs in OUT/NAME (A/B comparisons)",
    )
    parser.add_argument("--interaction", help="interaction name for samples without interaction_kwargs.name")
    parser.add_argument("--out", default=None, help="output folder (default outputs/rollout/<experiment>)")
    parser.add_argument("--no-html", action="store_true", help="skip report.html")
    parser.add_argument("--replay", help="re-run recorded trajectories and check tokens and masks are identical")
    parser.add_argument(
        "--max-error-rate",
        type=float,
        default=0.0,
        help="exit 3 when more than this fraction of trajectories end in `error` (default 0: any error)",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show verl's console output (tool schemas, ...), library progress bars and INFO logs",
    )
    args, extra = parser.parse_known_args(argv)
    if not 0.0 <= args.max_error_rate <= 1.0:
        parser.error(f"--max-error-rate must be between 0 and 1, got {args.max_error_rate}")
    unknown = [a for a in extra if a.startswith("-") or "=" not in a]
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)} (Hydra overrides look like key=value)")
    args.forced = args.force_agent_name.split(",") if args.force_agent_name else [None]
    if args.force_agent_name and (not all(args.forced) or len(set(args.forced)) < len(args.forced)):
        parser.error(f"--force-agent-name {args.force_agent_name!r}: expected distinct loop names separated by commas")
    if args.replay and len(args.forced) > 1:
        parser.error("--replay takes at most one --force-agent-name")
    args.overrides = [*args.overrides, *extra]
    return args


def compose_experiment(experiment: str, overrides: list[str]) -> tuple[DictConfig, Path]:
    path = Path(experiment)
    config_file = path / "config.yaml" if path.is_dir() else path
    if not config_file.is_file():
        raise ConfigError(f"experiment {experiment!r}: no config.yaml there (expected a folder under experiments/)")
    try:
        with initialize_config_dir(config_dir=str(config_file.parent.resolve()), version_base=None):
            return compose(config_name=config_file.stem, overrides=overrides), config_file
    except Exception as exc:  # Hydra: a bad override or YAML
        raise ConfigError(f"{config_file}: Hydra cannot compose it: {type(exc).__name__}: {exc}") from exc


def default_backend() -> str:
    import torch

    return "vllm" if torch.cuda.is_available() else "hf"


def demo_policy(args: argparse.Namespace, backend: str) -> Any:
    """The demonstrator ``--backend demo`` plays (None for the other backends, which take no policy)."""
    from extensions.backends.demo_server import DEFAULT_POLICY, load_policy

    if backend != "demo":
        if args.demo_policy:
            raise ConfigError(f"--demo-policy is for --backend demo; --backend is {backend}")
        return None
    return load_policy(args.demo_policy or DEFAULT_POLICY)


def prepare_model(config: DictConfig, backend: str, overrides: list[str]) -> None:
    """For ``hf`` and ``demo``: use the embedded model unless model.path was given; check the path is a model
    (``demo`` reads only its tokenizer)."""
    if backend not in ("hf", "demo"):
        return
    from extensions.backends.embedded_model import ensure_embedded_model, validate_model_dir

    given = any(o.startswith("actor_rollout_ref.model.path=") for o in overrides)
    path = Path(str(config.actor_rollout_ref.model.path)).expanduser()
    if not given and not path.is_dir():
        path = ensure_embedded_model()
    with open_dict(config):
        config.actor_rollout_ref.model.path = str(validate_model_dir(path, weights=backend == "hf"))


async def run_batches(
    backend: Any, dataset: Any, args: argparse.Namespace, reward_fn: Any, forced: str | None = None
) -> list[TrajectoryRecord]:
    """Every sample through its agent loop (``forced``: through that one), batch by batch, scored."""
    from tqdm import tqdm

    records: list[TrajectoryRecord] = []
    total = min(args.limit or len(dataset), len(dataset))
    with tqdm(total=total, desc=forced or "trajectories", unit="traj") as bar:
        for batch in batches(dataset, args.batch_size, args.limit):
            if forced:
                batch.non_tensor_batch["agent_name"][:] = forced
            fill_defaults(batch, agent_name=args.agent_name, interaction=args.interaction)
            started = time.perf_counter()
            try:
                out = await backend.generate(batch)
                new = [to_record(out, i, backend.tokenizer) for i in range(len(out))]
                extras = [out.non_tensor_batch["extras"][i] for i in range(len(out))]
            except Exception as exc:  # the whole batch failed: record every sample, go on
                logger.error("batch failed: %s: %s", type(exc).__name__, exc)
                new, extras = failed_records(batch, exc), [None] * len(batch)
            for record, extra in zip(new, extras, strict=True):
                record.timings["batch_wall_s"] = round(time.perf_counter() - started, 3)
                if reward_fn is not None and record.response_ids:
                    score(record, reward_fn, backend.tokenizer, extra)
            records += new
            bar.update(len(batch))
    return records


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    if not args.verbose:
        quiet_progress_bars()
    try:
        return _main(args)
    except LongflowError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INVALID


def quiet_progress_bars() -> None:
    """Hide the libraries' progress bars (transformers' weight loading, datasets' split generation)."""
    import datasets
    import transformers

    datasets.disable_progress_bars()
    transformers.utils.logging.disable_progress_bar()


@contextlib.contextmanager
def console(verbose: bool) -> Any:
    """Unless ``verbose``: keep what verl prints (every tool schema as JSON, ...) off stdout, logged at DEBUG."""
    if verbose:
        yield
        return
    captured = io.StringIO()
    try:
        with contextlib.redirect_stdout(captured):
            yield
    finally:
        if captured.getvalue():
            logger.debug("verl printed:\n%s", captured.getvalue())


def _main(args: argparse.Namespace) -> int:
    config, config_file = compose_experiment(args.experiment, args.overrides)
    out_dir = Path(args.out or f"outputs/rollout/{config_file.parent.name}")
    files = None if args.replay else [args.data] if args.data else file_list(config.data.train_files)
    backend_name = args.backend or default_backend()
    policy = demo_policy(args, backend_name)  # a bad policy is a command-line error: nothing is checked or loaded
    if backend_name in ("vllm", "sglang") and not args.replay:
        set_engine(config, backend_name)  # the checks below see the engine's settings (extensions/engine_rules.py)
    problems = [
        problem
        for forced in args.forced
        for problem in validate_experiment(
            config,
            str(config_file),
            data_files=files,
            limit=args.limit,
            agent_name=args.agent_name,
            force_agent_name=forced,
            interaction=args.interaction,
        )
    ]
    problems = list(dict.fromkeys(problems))
    if problems:
        print("\n".join(problems), file=sys.stderr)
        print(f"error: {len(problems)} problem(s) in experiment {args.experiment}; nothing was run", file=sys.stderr)
        return EXIT_INVALID
    if args.replay:
        from extensions.rollout.replay import replay_file, resolve_replay_model

        resolve_replay_model(config, args.overrides, args.replay)
        mismatched = replay_file(args.replay, config, out_dir, quiet=lambda: console(args.verbose))
        return EXIT_REPLAY_MISMATCH if mismatched else EXIT_OK
    prepare_model(config, backend_name, args.overrides)
    with console(args.verbose):
        built = time.perf_counter()
        backend = make_backend(backend_name, config, demo_policy=policy)
        backend_start_s = time.perf_counter() - built  # engine servers up (or the in-process model loaded)
    try:
        with console(args.verbose):
            dataset = load_dataset(files, backend.tokenizer, config.data)
            reward_fn = load_reward_fn(config)
        engine = {"backend": backend_name, "model": str(config.actor_rollout_ref.model.path)}
        engine["backend_start_s"] = round(backend_start_s, 3)
        return asyncio.run(run_loops(backend, dataset, args, reward_fn, out_dir, engine))
    finally:
        with console(args.verbose):
            backend.close()


async def run_loops(
    backend: Any, dataset: Any, args: argparse.Namespace, reward_fn: Any, out_dir: Path, engine: dict[str, Any]
) -> int:
    """Each forced loop in turn (one event loop, one engine start for all); its outputs written as soon as done."""
    status = EXIT_OK
    for forced in args.forced:
        loop_out = out_dir / forced if len(args.forced) > 1 else out_dir
        started = time.perf_counter()
        with console(args.verbose):
            records = await run_batches(backend, dataset, args, reward_fn, forced)
        summary = {**summarize(records, time.perf_counter() - started), **engine}
        if len(args.forced) > 1:
            summary["agent_name"], summary["engine_shared_by"] = forced, args.forced
        write_outputs(records, summary, loop_out, html=not args.no_html, tokenizer=backend.tokenizer)
        print(format_summary(summary))
        status = max(status, check_errors(summary, len(records), args.max_error_rate, loop_out))
    return status


def check_errors(summary: dict[str, Any], n: int, max_error_rate: float, out_dir: Path) -> int:
    """EXIT_ERRORS (and why, on stderr) when more than ``max_error_rate`` of ``n`` trajectories ended in `error`."""
    if summary["errors"] > max_error_rate * n:
        print(
            f"error: {summary['errors']} of {n} trajectories ended in `error` "
            f"(more than --max-error-rate {max_error_rate}); see {out_dir / 'trajectories.jsonl'}",
            file=sys.stderr,
        )
        return EXIT_ERRORS
    return EXIT_OK


def write_outputs(
    records: list[TrajectoryRecord], summary: dict[str, Any], out_dir: Path, *, html: bool, tokenizer: Any = None
) -> None:
    import json

    write_jsonl(records, out_dir / "trajectories.jsonl")
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if html:
        from extensions.rollout.view import render_file

        render_file(
            out_dir / "trajectories.jsonl",
            out_dir / "report.html",
            summary_path=out_dir / "summary.json",
            tokenizer=tokenizer,
        )
    print(f"wrote {out_dir / 'trajectories.jsonl'} ({len(records)} trajectories)")
