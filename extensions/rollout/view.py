"""Static HTML viewer for rollout trajectories: one self-contained page, no network.

    python -m extensions.rollout.view outputs/rollout/trajectories.jsonl -o report.html \\
        [--summary outputs/rollout/summary.json] [--tokenizer <model dir>]

The page opens with a summary (termination reasons, accuracy, mean turns) and a filter by
termination reason and agent; then one section per trajectory: a header (badge, error,
reward and its pieces, turn scores, tool rewards, counts, timings) and the turns as cards.
Each card's token view colours trained tokens (mask 1) against context (mask 0): per token
with ``--tokenizer`` (rendered when opened; open the page with ``#tokens`` to render them
all), else the whole turn coloured by its span's mask (all 1, all 0 or mixed). All model
text is escaped. A file that is not trajectories exits with code 2 and the reason on stderr.
"""

from __future__ import annotations

import argparse
import codecs
import json
import logging
import re
import sys
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2

from extensions.errors import ConfigError, LongflowError
from extensions.rollout.records import SegmentRecord, TrajectoryRecord, TurnRecord, read_jsonl

logger = logging.getLogger(__name__)

TEMPLATE = "view_template.html.jinja"
OPEN_TURNS_UP_TO = 100
"""Pages with more trajectories start with their turn lists collapsed."""
BADGES = {
    "final_answer": "ok",
    "interaction_done": "ok",
    "response_budget": "budget",
    "prompt_too_long": "budget",
    "time_budget": "budget",
    "repeat_loop": "limit",
    "error": "err",
}
"""Badge colour per termination reason; ``max_*`` reasons are ``limit``, unknown ones ``other``."""
TOOL_CALL_RE = re.compile(r"\s*<tool_call>.*?</tool_call>\s*", re.DOTALL)
CHAT_MARKUP_RE = re.compile(r"<\|im_start\|>(?:user|tool|assistant|system)?\n?|<\|im_end\|>\n?|<\|endoftext\|>")


# 1. Per-token text -------------------------------------------------------------------------


def _byte_level_alphabet() -> dict[str, int]:
    """GPT-2's byte-level BPE alphabet, reversed: printable character -> byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = list(printable), 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


BYTE_OF_CHAR = _byte_level_alphabet()


def _token_bytes(tokenizer: Any, token: str, added: bool) -> bytes:
    if added:
        return token.encode()
    if all(c in BYTE_OF_CHAR for c in token):
        return bytes(BYTE_OF_CHAR[c] for c in token)
    return tokenizer.convert_tokens_to_string([token]).encode()


def token_pieces(tokenizer: Any, ids: list[int], byte_cache: dict[int, bytes] | None = None) -> list[str]:
    """The text each token adds, in order; ``"".join`` of the result is the decoded text.

    Byte-level tokens (Qwen, Llama 3, GPT-2) are mapped back to bytes and decoded as a UTF-8
    stream, so a character split across tokens shows on the token that completes it. Added
    tokens are kept verbatim; other vocabularies fall back to ``convert_tokens_to_string``.
    Pass one ``byte_cache`` to many calls to convert each distinct id once.
    """
    cache = {} if byte_cache is None else byte_cache
    missing = sorted({i for i in ids if i not in cache})
    if missing:
        added = set(getattr(tokenizer, "added_tokens_decoder", {}))
        for token_id, token in zip(missing, tokenizer.convert_ids_to_tokens(missing), strict=True):
            cache[token_id] = _token_bytes(tokenizer, token or "", token_id in added)
    stream = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pieces = [stream.decode(cache[i]) for i in ids]
    if pieces:
        pieces[-1] += stream.decode(b"", final=True)
    return pieces


def mask_class(mask: list[int]) -> str:
    """``m1`` if every token is trained, ``m0`` if none (or no tokens), else ``mixed``."""
    if mask and all(mask):
        return "m1"
    return "mixed" if any(mask) else "m0"


# 2. View models ----------------------------------------------------------------------------


def badge_kind(reason: str) -> str:
    """CSS class of a termination reason's badge: ok, limit, budget, err or other."""
    return BADGES.get(reason, "limit" if reason.startswith("max_") else "other")


def _parts(record: TrajectoryRecord) -> list[tuple[str, TrajectoryRecord | SegmentRecord]]:
    """(key prefix, part): a folded trajectory's earlier segments, then the record's own turns."""
    return [*((f"s{k}-", seg) for k, seg in enumerate(record.segments)), ("", record)]


def _turn_views(record: TrajectoryRecord) -> list[dict[str, Any]]:
    views, n = [], len(record.segments) + 1
    for k, (prefix, part) in enumerate(_parts(record)):
        for i, turn in enumerate(part.turns):
            lo, hi = turn.span
            mask = part.response_mask[lo:hi]
            view = {"i": i, "key": f"{prefix}{i}", "turn": turn, "n_tokens": hi - lo, "n_trained": sum(mask)}
            view["mask_class"] = mask_class(mask)
            # the first turn of a later segment: say the context was folded
            view["fold"] = {"segment": k + 1, "of": n, "prompt_tokens": len(part.prompt_ids)} if k and not i else None
            views.append(view)
    return views


def _token_data(record: TrajectoryRecord, tokenizer: Any, byte_cache: dict[int, bytes]) -> dict[str, Any]:
    """Per turn (of every segment): token texts, mask string, ids and log-probs; read by the page's script."""
    data = {}
    for prefix, part in _parts(record):
        for i, turn in enumerate(part.turns):
            lo, hi = turn.span
            ids = part.response_ids[lo:hi]
            lp = None if part.logprobs is None else [round(x, 3) for x in part.logprobs[lo:hi]]
            mask = "".join("1" if m else "0" for m in part.response_mask[lo:hi])
            data[f"{prefix}{i}"] = {
                "start": lo,
                "t": token_pieces(tokenizer, ids, byte_cache),
                "m": mask,
                "id": ids,
                "lp": lp,
            }
    return data


def trajectory_view(
    record: TrajectoryRecord, pos: int, tokenizer: Any | None = None, byte_cache: dict[int, bytes] | None = None
) -> dict[str, Any]:
    """What the template needs for one trajectory section."""
    all_turns = [t for _, part in _parts(record) for t in part.turns]
    roles = Counter(t.role for t in all_turns)
    tool_turns = [t for t in all_turns if t.role == "tool"]
    calls = [c for t in tool_turns for c in t.tool_calls] + [c for t in all_turns for c in t.code_calls]
    return {
        "pos": pos,
        "r": record,
        "badge": badge_kind(record.termination_reason),
        "roles": roles,
        "n_calls": len(calls) or sum(len(t.tool_calls) for t in all_turns if t.role == "assistant"),
        "n_call_errors": sum(c.error is not None for c in calls),
        "n_malformed": sum(len(t.malformed_tool_calls) for t in all_turns),
        "n_trained": sum(sum(part.response_mask) for _, part in _parts(record)),
        "n_segments": len(record.segments) + 1,
        "turns": _turn_views(record),
        "tokens": None
        if tokenizer is None
        else _token_data(record, tokenizer, {} if byte_cache is None else byte_cache),
    }


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summary_view(records: list[TrajectoryRecord]) -> dict[str, Any]:
    """Counts by termination reason and agent, accuracy, mean reward, turns and tokens."""
    rewarded = [r for r in records if r.reward is not None]
    if rewarded and all("acc" in r.reward_extra_info for r in rewarded):
        accuracy, accuracy_rule = _mean([r.reward_extra_info["acc"] for r in rewarded]), "mean acc"
    else:
        accuracy, accuracy_rule = _mean([float(r.reward > 0) for r in rewarded]), "reward > 0"
    n_response = sum(len(r.response_ids) for r in records)
    return {
        "n": len(records),
        "reasons": Counter(r.termination_reason for r in records).most_common(),
        "agents": Counter(r.agent_name for r in records).most_common(),
        "n_rewarded": len(rewarded),
        "accuracy": accuracy,
        "accuracy_rule": accuracy_rule,
        "mean_reward": _mean([r.reward for r in rewarded]),
        "mean_turns": _mean([len(r.turns) for r in records]),
        "mean_response_tokens": n_response / len(records) if records else None,
        "trained_fraction": sum(sum(r.response_mask) for r in records) / n_response if n_response else None,
    }


# 3. Rendering ------------------------------------------------------------------------------


def fmt_number(value: float | None, digits: int = 4) -> str:
    """Short number for display; ``—`` for None."""
    if value is None:
        return "—"
    return str(value) if isinstance(value, int) else f"{value:.{digits}g}"


def call_arguments(text: str) -> list[tuple[str, str]] | None:
    """A tool call's arguments as (name, value) pairs, strings as written (code keeps its lines);
    None if they are not a JSON object."""
    try:
        arguments = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return None
    if not isinstance(arguments, dict):
        return None
    return [(k, v if isinstance(v, str) else json.dumps(v, indent=2, ensure_ascii=False)) for k, v in arguments.items()]


def plain_text(text: str) -> str:
    """A tool or user turn's text without the chat template's markup."""
    return CHAT_MARKUP_RE.sub("", text).strip()


def without_calls(turn: TurnRecord) -> str:
    """An assistant turn's visible text less its ``<tool_call>`` blocks, when they were parsed into calls."""
    return TOOL_CALL_RE.sub("\n", turn.visible_text).strip() if turn.tool_calls else turn.visible_text


def _compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(autoescape=True, trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    env.policies["json.dumps_kwargs"] = {"separators": (",", ":"), "ensure_ascii": False}
    env.filters |= {
        "num": fmt_number,
        "badge": badge_kind,
        "arguments": call_arguments,
        "plain": plain_text,
        "without_calls": without_calls,
        "json": _compact_json,
    }
    return env


def render_html(
    records: list[TrajectoryRecord],
    *,
    summary: dict[str, Any] | None = None,
    tokenizer: Any | None = None,
    source: str = "trajectories",
) -> str:
    """The whole page as one string."""
    byte_cache: dict[int, bytes] = {}
    template_text = resources.files("extensions.rollout").joinpath(TEMPLATE).read_text(encoding="utf-8")
    return (
        _environment()
        .from_string(template_text)
        .render(
            source=source,
            stats=summary_view(records),
            run_summary=summary,
            trajs=[trajectory_view(r, pos, tokenizer, byte_cache) for pos, r in enumerate(records)],
            per_token=tokenizer is not None,
            open_turns=len(records) <= OPEN_TURNS_UP_TO,
        )
    )


# 4. CLI ------------------------------------------------------------------------------------


def load_summary(path: Path) -> dict[str, Any]:
    """The driver's summary.json (any JSON object; shown as a table)."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"--summary {path}: no such file (expected the rollout driver's summary.json)") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"--summary {path}: not JSON ({exc.msg}); expected the rollout driver's summary.json"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"--summary {path}: expected a JSON object, got {type(data).__name__}")
    return data


class TokenizerFile:
    """A model directory's ``tokenizer.json`` read with the ``tokenizers`` library: the three things
    ``token_pieces`` needs, in a second rather than the ~10 s that importing transformers (and torch) takes."""

    def __init__(self, path: Path):
        from tokenizers import Tokenizer

        self.backend = Tokenizer.from_file(str(path))
        self.added_tokens_decoder = self.backend.get_added_tokens_decoder()

    def convert_ids_to_tokens(self, ids: list[int]) -> list[str | None]:
        return [self.backend.id_to_token(i) for i in ids]

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        decoder = self.backend.decoder
        return decoder.decode(tokens) if decoder is not None else "".join(tokens)


def load_tokenizer(path: Path) -> Any:
    """The tokenizer of a local model directory: its ``tokenizer.json`` if any, else transformers' AutoTokenizer."""
    if not path.is_dir():
        raise ConfigError(f"--tokenizer {path}: not a directory (expected a model directory with tokenizer files)")
    try:
        if (path / "tokenizer.json").is_file():
            return TokenizerFile(path / "tokenizer.json")
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(path)
    except Exception as exc:  # transformers raises many types for unreadable directories
        raise ConfigError(f"--tokenizer {path}: cannot load a tokenizer ({type(exc).__name__}: {exc})") from None


def render_file(
    trajectories: str | Path,
    output: str | Path,
    *,
    summary_path: str | Path | None = None,
    tokenizer: Any | str | Path | None = None,
) -> Path:
    """Read ``trajectories`` and write the page to ``output``; ``tokenizer`` is a tokenizer or a model dir.

    Raises ``TrajectoryFileError`` / ``ConfigError`` for unusable inputs.
    """
    records = read_jsonl(trajectories)
    summary = load_summary(Path(summary_path)) if summary_path else None
    if isinstance(tokenizer, (str, Path)):
        tokenizer = load_tokenizer(Path(tokenizer))
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    page = render_html(records, summary=summary, tokenizer=tokenizer, source=Path(trajectories).name)
    output.write_text(page, encoding="utf-8")
    logger.info("wrote %s (%d trajectories, %.1f MB)", output, len(records), len(page.encode()) / 1e6)
    return output


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m extensions.rollout.view", description=__doc__.split("\n")[0])
    parser.add_argument("trajectories", type=Path, help="JSONL written by the rollout driver")
    parser.add_argument("-o", "--output", type=Path, help="HTML file to write (default: <trajectories>.html)")
    parser.add_argument("--summary", type=Path, help="the driver's summary.json, shown at the top")
    parser.add_argument("--tokenizer", type=Path, help="model directory; enables the per-token view")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    output = args.output or args.trajectories.with_suffix(".html")
    try:
        render_file(args.trajectories, output, summary_path=args.summary, tokenizer=args.tokenizer)
    except LongflowError as exc:
        sys.stderr.write(f"{exc}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
