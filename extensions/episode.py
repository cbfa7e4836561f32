"""One trajectory of ``LongWorkflowAgent``: its state, its lifecycle, and its output.

``Episode`` is verl's ``AgentData`` plus what the long-workflow loop tracks (counters, turn
records, termination reason). The plain functions here are the loop's bookkeeping, so that
each state handler in ``extensions/custom_rollouts.py`` reads as a list of steps:

- ``open_episode`` (with ``start_interaction``) / ``close_episode``: the tool session's and the user's lifecycle;
- ``absorb_generation``, ``mask_thinking``, ``keep_calls``, ``after_assistant``: one assistant turn;
- ``record_tool_round``: one round of tool results; ``user_turn_limit``: one user turn;
- ``build_output``: the ``AgentLoopOutput`` (per-turn process rewards written here).

Everything a user needs to understand a trajectory ends up in ``extra_fields["extras"]``
(one stable key, so verl's batch concat works when loops of other kinds share a batch).
"""

from __future__ import annotations

import hashlib
import logging
import time
from array import array
from collections.abc import Sequence
from enum import Enum
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopOutput
from verl.experimental.agent_loop.tool_agent_loop import AgentData

from extensions.errors import SampleError, choices
from extensions.interactions.base import BaseInteraction
from extensions.loop_settings import LoopSettings
from extensions.records_schema import COUNTS, Extras, Reason, TurnRecord
from extensions.rewards.settings import RewardSettings
from extensions.rewards.turns import step_rewards
from extensions.thinking import token_thinking_spans
from extensions.time_budget import time_left
from extensions.tool_session import ToolSession, select_tools

logger = logging.getLogger(__name__)


class Phase(Enum):
    PENDING = "pending"
    GENERATING = "generating"
    PROCESSING_TOOLS = "processing_tools"
    INTERACTING = "interacting"
    TERMINATED = "terminated"


class Episode(AgentData):
    """verl's AgentData plus what the long-workflow loop tracks.

    As in verl, ``prompt_ids`` is the running context: the prompt and every response token so far
    (assistant, tool, user); the response is its last ``len(response_mask)`` tokens. ``response_ids``
    (verl's) is the last server reply; ``last_assistant_ids`` the whole last assistant turn (several
    replies when code blocks ran inside it).
    """

    def __init__(self, *, messages: list[dict[str, Any]], request_id: str, tools_kwargs: dict[str, Any]):
        super().__init__(
            messages=messages,
            image_data=None,
            video_data=None,
            audio_data=None,
            mm_processor_kwargs=None,
            metrics={},
            request_id=request_id,
            tools_kwargs=tools_kwargs,
        )
        self.tool_rounds = 0
        self.num_tool_calls = 0
        self.num_tool_errors = 0
        self.num_malformed_tool_calls = 0
        self.parse_errors: list[str] = []
        self.turn_calls: list[Any] = []  # every call the turn parsed to, past max_parallel_calls too
        self.turns: list[TurnRecord] = []
        self.reason: Reason | None = None
        self.error: str | None = None
        self.final_answer_text = ""
        self.submitted_answer: str | None = None  # "#### N" of a submit_answer call (extensions/tools/submit.py)
        self.last_assistant_ids: list[int] = []
        self.asked_tools = False  # the last assistant turn asked for tools (a malformed call included)
        self.interaction: BaseInteraction | None = None
        self.interaction_name: str | None = None
        self.interaction_id: str | None = None
        self.interaction_kwargs: dict[str, Any] = {}
        self.tool_session: ToolSession | None = None
        self.schemas: list[dict[str, Any]] | None = None
        self.opening_message: str | None = None
        self.num_executed_calls = 0
        self.num_successful_calls = 0
        self.num_invented_outputs = 0
        self.num_repeated_blocks = 0
        self.code_run: set[str] = set()
        """Code of the blocks run so far (code-fence format): the same code is not run twice."""
        self.code_calls: list[dict[str, Any]] = []
        """This turn's code blocks run inside it (code-fence format), until its record takes them."""
        self.task_messages = len(messages)
        """How many of ``messages`` are the sample's own (a folding loop restarts from them)."""
        self.segment_outputs: list[Any] = []
        """Outputs of the segments closed so far (context folding: ``folding_loop.py``)."""
        self.out_of_room: str | None = None
        """Why this assistant turn was cut short for lack of room (a code block's output did not fit)."""
        self.ending: tuple[Reason, str] | None = None
        """Why the trajectory ends after this (code-fence) turn: ``max_trajectory_s`` or ``end_after_repeats``."""
        self.turn_versions: list[int] | None = None  # [first, last] weight version of this turn's replies so far
        self.started_at = time.time()
        """Wall clock (``time.time()``) when the loop took the sample: ``longflow/rollout/`` metrics."""

    def take_inline_record(self) -> dict[str, Any]:
        """The ``code_calls`` field of this turn's record (empty without any); resets the list."""
        calls, self.code_calls = self.code_calls, []
        return {"code_calls": calls} if calls else {}

    def finish(self, reason: Reason, detail: str | None = None) -> Phase:
        """Set the termination reason (the first one wins) and stop."""
        if self.reason is None:
            self.reason = reason
            self.error = detail
        return Phase.TERMINATED

    def add_turn(self, role: str, start: int, end: int, **fields: Any) -> TurnRecord:
        """Record a turn whose tokens are ``response[start:end]`` (``records_schema.TurnRecord``)."""
        if role == "assistant" and self.turn_versions is not None:
            fields["policy_versions"], self.turn_versions = self.turn_versions, None
        record: TurnRecord = {"index": len(self.turns), "role": role, "span": [start, end], **fields}
        self.turns.append(record)
        return record

    def extras(self, agent_name: str) -> Extras:
        """The ``extra_fields["extras"]`` payload (``records_schema.Extras`` plus its ``COUNTS``)."""
        turns = (self.assistant_turns, self.tool_rounds, self.user_turns)  # COUNTS[:3], named as verl names them
        counts = dict(zip(COUNTS[:3], turns, strict=True)) | {key: getattr(self, key) for key in COUNTS[3:]}
        return {
            "agent_name": agent_name,
            "termination_reason": (self.reason or Reason.ERROR).value,
            "error": self.error,
            "turns": self.turns,
            **counts,
            "final_answer_text": self.final_answer_text,
            "interaction": self.interaction_name,
            "opening_message": self.opening_message,
            "started_at": self.started_at,
            "finished_at": time.time(),
        }


def sample_label(kwargs: dict[str, Any]) -> str:
    """How errors name a sample: its dataset index (``extra_info.index``, else the batch index)."""
    index = (kwargs.get("extra_info") or {}).get("index", kwargs.get("index"))
    return str(index.item() if hasattr(index, "item") else index)


# -- lifecycle -----------------------------------------------------------------------------


async def open_episode(
    episode: Episode,
    kwargs: dict[str, Any],
    tools: dict[str, Any],
    interactions: dict[str, Any],
    settings: LoopSettings,
    agent_name: str,
    services: dict[str, Any] | None = None,
) -> None:
    """Check the sample (``kwargs``: its columns); open its tool session and its user (``agent_name``'s entry)."""
    label = sample_label(kwargs)
    if not episode.messages:
        raise SampleError(f"sample {label}: 'raw_prompt' is missing or empty")
    episode.tool_session = ToolSession(
        select_tools(tools, kwargs.get("extra_info"), sample=label, default=settings.tool_selection),
        episode.tools_kwargs,
        timeout_s=settings.tool_timeout_s,
        concurrency=settings.tool_concurrency,
        default_concurrency=settings.default_tool_concurrency,
        owner=agent_name,
        time_left=time_left(episode, settings.max_trajectory_s),
    )
    await start_interaction(
        episode,
        kwargs,
        interactions,
        agent_name=agent_name,
        required=settings.require_interaction,
        config_path=settings.interaction_config_path,
        services=services,
    )


async def start_interaction(
    episode: Episode,
    kwargs: dict[str, Any],
    interactions: dict[str, Any],
    *,
    agent_name: str,
    required: bool,
    config_path: str | None,
    services: dict[str, Any] | None = None,
) -> None:
    """Start the sample's user (``interaction_kwargs.name``); its opening message joins the prompt.

    A user played by the policy's own model (an interaction with ``uses_policy_server``) also gets
    ``services``: the loop's ``server_manager`` and ``tokenizer``.
    """
    ikwargs = dict(kwargs.get("interaction_kwargs") or {})
    name = ikwargs.get("name")
    if name is None:
        if required:
            raise SampleError(
                f"sample {sample_label(kwargs)}: agent loop {agent_name!r} requires "
                f"interaction_kwargs.name (one of {choices(interactions)}), but the sample has none"
            )
        return
    if name not in interactions:
        where = config_path or "(no interaction_config_path configured)"
        raise SampleError(
            f"sample {sample_label(kwargs)}: interaction_kwargs.name={name!r} is not defined in {where}; "
            f"valid names: {choices(interactions)}"
        )
    episode.interaction, episode.interaction_name, episode.interaction_kwargs = interactions[name], name, ikwargs
    # like verl <= 0.7, the interaction instance is keyed by the request id
    extra = (services or {}) if episode.interaction.uses_policy_server else {}
    episode.interaction_id = await episode.interaction.start_interaction(episode.request_id, **ikwargs, **extra)
    text = await episode.interaction.opening_message(episode.interaction_id)
    if text:  # e.g. an environment's reset() observation: part of the prompt
        episode.opening_message = text
        episode.messages.append({"role": "user", "content": text})


async def close_episode(episode: Episode) -> None:
    """Release the tool instances (problems join ``parse_errors``) and finalize the interaction; never raises."""
    if episode.tool_session is not None:
        for problem in await episode.tool_session.close():
            episode.parse_errors.append(problem)
    if episode.interaction is not None and episode.interaction_id is not None:
        try:
            await episode.interaction.finalize_interaction(episode.interaction_id, **episode.interaction_kwargs)
        except Exception as exc:
            logger.warning("finalize_interaction of %s failed: %s", episode.interaction_name, exc)


# -- one assistant turn --------------------------------------------------------------------


def absorb_generation(episode: Episode, output: Any) -> None:
    """Add a server reply's ``num_preempted`` and ``extra_fields`` to the trajectory's, and its weight versions to
    the turn's (``policy_versions`` of the turn's record)."""
    preempted = output.num_preempted if output.num_preempted is not None else 0
    episode.metrics["num_preempted"] = episode.metrics.get("num_preempted", 0) + preempted
    fields = output.extra_fields or {}
    for key, value in fields.items():
        if key == "max_global_steps" and value is not None:
            episode.extra_fields[key] = value
        else:
            episode.extra_fields.setdefault(key, value)
    lo, hi, seen = fields.get("min_global_steps"), fields.get("max_global_steps"), episode.turn_versions
    if lo is not None and hi is not None:  # a reply resumed after a weight update spans two versions
        episode.turn_versions = [lo, hi] if seen is None else [min(seen[0], lo), max(seen[1], hi)]


def mask_thinking(mask: list[int], token_ids: list[int], think_ids: tuple[int, int]) -> None:
    """Zero, in place, the mask of the ``<think>`` blocks of ``token_ids`` (the last tokens of ``mask``)."""
    offset = len(mask) - len(token_ids)
    for lo, hi in token_thinking_spans(token_ids, *think_ids):
        mask[offset + lo : offset + hi] = [0] * (hi - lo)


def keep_calls(episode: Episode, calls: list[Any], errors: list[str], max_parallel_calls: int) -> None:
    """Keep the first ``max_parallel_calls`` calls; the others and the parse errors become ``parse_errors``."""
    episode.turn_calls, episode.tool_calls = list(calls), calls[:max_parallel_calls]
    episode.asked_tools = bool(calls or errors)  # stays when a fold or close_episode later edits these lists
    episode.parse_errors = errors + [
        f"Tool call '{c.name}' was not run: at most {max_parallel_calls} tool call(s) per turn."
        for c in calls[max_parallel_calls:]
    ]
    episode.num_malformed_tool_calls += len(errors)


def after_assistant(episode: Episode, *, max_assistant_turns: int, max_tool_rounds: int) -> Phase:
    """Where an assistant turn leads: tools, the user, or the end (with its reason)."""
    wants_tools = bool(episode.tool_calls or episode.parse_errors)
    if wants_tools and episode.assistant_turns >= max_assistant_turns:
        return episode.finish(Reason.MAX_ASSISTANT_TURNS)
    if wants_tools and episode.tool_rounds >= max_tool_rounds:
        return episode.finish(Reason.MAX_TOOL_ROUNDS)
    if wants_tools:
        return Phase.PROCESSING_TOOLS
    if episode.interaction is None:
        return episode.finish(Reason.FINAL_ANSWER)
    return Phase.INTERACTING


def user_turn_limit(episode: Episode, *, max_user_turns: int, max_assistant_turns: int) -> Reason | None:
    """The limit a further user message would break, if any (user turns first)."""
    if episode.user_turns >= max_user_turns:
        return Reason.MAX_USER_TURNS
    if episode.assistant_turns >= max_assistant_turns:
        return Reason.MAX_ASSISTANT_TURNS
    return None


def count_outcomes(episode: Episode, outcomes: Sequence[Any]) -> None:
    """Add tool outcomes (``ToolOutcome`` s) to the trajectory's counters and tool rewards."""
    episode.num_tool_calls += len(outcomes)
    episode.num_tool_errors += sum(o.error is not None for o in outcomes)
    episode.num_executed_calls += sum(o.executed for o in outcomes)
    episode.num_successful_calls += sum(o.succeeded for o in outcomes)
    episode.tool_rewards.extend(float(o.reward) for o in outcomes if o.reward is not None)


def record_tool_round(episode: Episode, outcomes: Sequence[Any], start: int) -> None:
    """Count a finished tool round (``ToolOutcome`` s) and record it as the turn ``response[start:]``."""
    episode.tool_rounds += 1
    count_outcomes(episode, outcomes)
    episode.add_turn(
        "tool",
        start,
        len(episode.response_mask),
        tool_calls=[o.record() for o in outcomes],
        malformed_tool_calls=list(episode.parse_errors),
        latency_s=round(max((o.latency_s for o in outcomes), default=0.0), 6),
    )


# -- output --------------------------------------------------------------------------------


def build_output(
    episode: Episode,
    tokenizer: Any,
    *,
    agent_name: str,
    response_length: int,
    calculate_log_probs: bool,
    reward_settings: RewardSettings | None,
    masked_reasons: frozenset[Reason] = frozenset({Reason.ERROR}),
) -> AgentLoopOutput:
    """The trajectory as verl's ``AgentLoopOutput``; ``extra_fields`` carry turn scores, tool rewards, extras.

    A trajectory that ended for one of ``masked_reasons`` (``error``; ``LoopSettings.masked_reasons``) keeps its
    tokens with mask 0. With ``reward_settings``
    (the run's reward is the pack's ``compute_score``) each assistant record gets its ``reward``
    (and ``step_rewards`` when code blocks ran inside it).
    """
    if episode.submitted_answer is not None:
        episode.final_answer_text = episode.submitted_answer
    elif episode.last_assistant_ids and not episode.asked_tools:
        episode.final_answer_text = tokenizer.decode(episode.last_assistant_ids, skip_special_tokens=True)
    # else a last turn that asked for tools (a malformed call included) is a request, not an answer: no text, so
    # the reward finds no number in it (its `"page": 10` once scored a ledger whose answer was 10)
    eos_id = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else 0
    if not episode.prompt_ids:  # failed before the prompt was built
        episode.prompt_ids = [eos_id]
    n = len(episode.response_mask)
    prompt_ids, response_ids = episode.prompt_ids[: len(episode.prompt_ids) - n], episode.prompt_ids[-n:] if n else []
    mask, logprobs = list(episode.response_mask), list(episode.response_logprobs) or None
    if not response_ids:  # verl needs one response token; it carries no loss
        response_ids, mask, logprobs = [eos_id], [0], ([0.0] if logprobs is not None else None)
    if logprobs is None and calculate_log_probs:  # keep the batch's columns uniform
        logprobs = [0.0] * len(response_ids)
    if episode.reason in masked_reasons:
        mask = [0] * len(mask)  # never train on a broken trajectory (nor, if asked, on one a slow tool cut off)
    output = AgentLoopOutput(
        prompt_ids=prompt_ids,
        response_ids=response_ids[:response_length],
        response_mask=mask[:response_length],
        response_logprobs=logprobs[:response_length] if logprobs else None,
        num_turns=episode.assistant_turns + episode.tool_rounds + episode.user_turns + 1,
        metrics=episode.metrics,
        extra_fields=episode.extra_fields,
    )
    if reward_settings is not None:
        assistant = [t for t in episode.turns if t["role"] == "assistant"]
        for record, steps in zip(assistant, step_rewards(episode.turns, reward_settings), strict=True):
            record["reward"] = sum(steps)
            if len(steps) > 1:
                record["step_rewards"] = steps
    output.extra_fields.update(
        turn_scores=episode.turn_scores, tool_rewards=episode.tool_rewards, extras=episode.extras(agent_name)
    )
    return output


# -- token helpers -------------------------------------------------------------------------


def context_anchor(token_ids: list[int]) -> str:
    """A 16-hex-digit fingerprint of an exact token context (GiGPO anchor states: same context, same key)."""
    return hashlib.blake2b(array("q", token_ids).tobytes(), digest_size=8).hexdigest()


def think_token_ids(tokenizer: Any) -> tuple[int, int] | None:
    """The ids of ``<think>`` and ``</think>`` if both are single tokens of ``tokenizer``, else None."""
    ids = [tokenizer.convert_tokens_to_ids(t) for t in ("<think>", "</think>")]
    if any(i is None or i == tokenizer.unk_token_id for i in ids):
        return None
    return ids[0], ids[1]
