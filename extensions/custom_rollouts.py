"""Agent loops of verl-longflow, registered for verl 0.9.1 by ``custom_rollouts.yaml``.

``LongWorkflowAgent`` keeps a whole multi-turn trace — prompt → assistant (thinking kept)
→ tool call(s) → tool results → assistant → user feedback → … — for up to 15 assistant
turns, and records why and how each trajectory ended. Per sample, by the dataset's
``agent_name`` column:

    actor_rollout_ref.rollout.agent.agent_loop_config_path=extensions/custom_rollouts.yaml

State machine: PENDING → GENERATING → (PROCESSING_TOOLS | INTERACTING) → GENERATING … →
TERMINATED. Limits on assistant turns, tool rounds and user turns are counted separately.
The class holds the state handlers and the few hooks a subclass overrides (the budget, what
ends a trajectory, its outputs: ``folding_loop.FoldingWorkflowAgent``); the work lives in plain
functions of the modules that own it: ``episode`` (state, lifecycle, output), ``assistant_turn``
(one server call, its merge and parse), ``code_fence_loop`` (a turn that runs code blocks as they
close), ``context_budget`` (room, fitting), ``tool_session`` (tools of one trajectory). verl's
private names are reached only through ``verl_compat``. How a trajectory flows through the pack:
README.md.
"""

from __future__ import annotations

import logging
import time
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopOutput
from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop
from verl.utils.profiler import simple_timer
from verl.utils.rollout_trace import rollout_trace_op

from extensions.assistant_turn import generate_reply, masked_think_ids, parse_turn, request_params, tool_parser_for
from extensions.code_fence_loop import (
    code_fence_settings,
    end_token_ids,
    fenced_reply,
    forget_failed_calls,
    refuse_trailing_calls,
)
from extensions.context_budget import append_context, cache_prefix_renders, fits, room_left
from extensions.engine_rules import check_loop_stop_strings
from extensions.episode import (
    Episode,
    Phase,
    after_assistant,
    build_output,
    close_episode,
    context_anchor,
    keep_calls,
    open_episode,
    record_tool_round,
    sample_label,
    user_turn_limit,
)
from extensions.interactions.registry import load_interactions
from extensions.loop_settings import VERL_LOOP_KWARGS, LoopSettings, parse_settings
from extensions.records_schema import Reason
from extensions.rewards.turns import settings_from_trainer_config
from extensions.time_budget import over_time
from extensions.tool_session import check_tool_selection, result_messages, run_calls, tool_message, tool_schemas
from extensions.tools.submit import submission
from extensions.verl_compat import build_assistant_message

logger = logging.getLogger(__name__)


class LongWorkflowAgent(ToolAgentLoop):
    """ToolAgentLoop with user turns, separate limits, termination reasons and safe tools.

    Each handler replaces the ``ToolAgentLoop`` handler of the same name
    (verl/experimental/agent_loop/tool_agent_loop.py), one to one:

    - ``run`` → ``ToolAgentLoop.run``
    - ``_handle_pending_state`` → ``ToolAgentLoop._handle_pending_state``
    - ``_handle_generating_state`` → ``ToolAgentLoop._handle_generating_state``
    - ``_handle_processing_tools_state`` → ``ToolAgentLoop._handle_processing_tools_state``
    - ``_handle_interacting_state`` → verl <= 0.7's ``_handle_interacting_state`` (0.9.1 has none)
    """

    def __init__(self, *args: Any, name: str = "long_workflow", **kwargs: Any):
        own = {k: v for k, v in kwargs.items() if k not in VERL_LOOP_KWARGS}
        self.agent_name = name
        self.settings: LoopSettings = parse_settings(own, entry=name)
        super().__init__(*args, **{k: v for k, v in kwargs.items() if k in VERL_LOOP_KWARGS})
        s = self.settings
        self.max_assistant_turns, self.max_user_turns = s.max_assistant_turns, s.max_user_turns
        self.max_parallel_calls = s.max_parallel_calls or self.max_parallel_calls
        self.interactions = load_interactions(s.interaction_config_path) if s.interaction_config_path else {}
        check_tool_selection(s.tool_selection, self.tools, entry=name)
        if s.tool_parser:
            self.tool_parser = tool_parser_for(s.tool_parser, self.tokenizer, entry=name)
            self.tool_parser_name = s.tool_parser
        self.fence = code_fence_settings(s, self.tool_parser_name, name, self.tools)
        if self.fence is not None:
            self.tool_parser.configure(self.fence)
        check_loop_stop_strings(self.config.actor_rollout_ref.rollout, name, self.fence, self.interactions)
        self.end_ids = end_token_ids(self.tokenizer)
        self.think_ids = masked_think_ids(self.tokenizer, s.thinking_in_loss, entry=name)
        cache_prefix_renders(self.continuous_token_builder)
        self.reward_settings = settings_from_trainer_config(self.config)

    # -- the state machine -------------------------------------------------------------

    @rollout_trace_op
    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        """Replaces ``ToolAgentLoop.run``.

        Adds: the sample is checked and its tool session and user opened before PENDING
        (``episode.open_episode``); an exception becomes a trajectory with reason ``error``
        (``catch_errors``); tools and user are always closed (``episode.close_episode``); the
        output carries ``extras`` and per-turn rewards (``episode.build_output``).
        """
        episode = Episode(
            messages=list(kwargs.get("raw_prompt") or []),
            request_id=str(kwargs.get("trajectory_id") or uuid4().hex),
            tools_kwargs=dict(kwargs.get("tools_kwargs") or {}),
        )
        try:
            services = {"server_manager": self.server_manager, "tokenizer": self.tokenizer}
            await open_episode(episode, kwargs, self.tools, self.interactions, self.settings, self.agent_name, services)
            phase = Phase.PENDING
            while phase != Phase.TERMINATED:
                phase = await self._step(phase, episode, sampling_params)
        except Exception as exc:
            if not self.settings.catch_errors:
                raise
            logger.warning("sample %s failed: %s: %s", sample_label(kwargs), type(exc).__name__, exc)
            episode.reason, episode.error = Reason.ERROR, f"{type(exc).__name__}: {exc}"
        finally:
            await close_episode(episode)
        return self._outputs(episode)

    def _outputs(self, episode: Episode) -> AgentLoopOutput | list[AgentLoopOutput]:
        """What ``run`` returns: the trajectory's one output (a folding loop: one per segment)."""
        return self._build_output(episode)

    def _build_output(self, episode: Episode) -> AgentLoopOutput:
        """The episode's stream so far as verl's ``AgentLoopOutput`` (``episode.build_output``)."""
        return build_output(
            episode,
            self.tokenizer,
            agent_name=self.agent_name,
            response_length=self.response_length,
            calculate_log_probs=self.rollout_config.calculate_log_probs,
            reward_settings=self.reward_settings,
            masked_reasons=self.settings.masked_reasons(),
        )

    async def _step(self, phase: Phase, episode: Episode, sampling_params: dict[str, Any]) -> Phase:
        if phase == Phase.PENDING:
            return await self._handle_pending_state(episode, sampling_params)
        if phase == Phase.GENERATING:
            return await self._handle_generating_state(episode, sampling_params)
        if phase == Phase.PROCESSING_TOOLS:
            return await self._handle_processing_tools_state(episode)
        if phase == Phase.INTERACTING:
            return await self._handle_interacting_state(episode)
        raise RuntimeError(f"invalid phase {phase}")

    async def _handle_pending_state(self, episode: Episode, sampling_params: dict[str, Any]) -> Phase:
        """Replaces ``ToolAgentLoop._handle_pending_state``: build the prompt tokens.

        Differs: the schemas are the session's tools' (minus a code-fence tool); a prompt over ``prompt_length`` ends the
        trajectory as ``prompt_too_long`` (verl sends it to the server anyway).
        """
        hidden = {self.fence.tool} if self.fence else set()  # the system prompt describes the fence instead
        episode.schemas = tool_schemas({k: t for k, t in episode.tool_session.tools.items() if k not in hidden})
        builder = self.continuous_token_builder
        prompt_ids = await self.loop.run_in_executor(
            None, lambda: builder.build_initial_tokens(episode.messages, tools=episode.schemas)
        )
        if len(prompt_ids) > self.prompt_length:
            episode.prompt_ids = prompt_ids[-self.prompt_length :]
            return episode.finish(
                Reason.PROMPT_TOO_LONG,
                f"prompt has {len(prompt_ids)} tokens; rollout.prompt_length is {self.prompt_length}",
            )
        episode.prompt_ids = prompt_ids
        return Phase.GENERATING

    async def _handle_generating_state(
        self, episode: Episode, sampling_params: dict[str, Any], ignore_termination: bool = False
    ) -> Phase:
        """Replaces ``ToolAgentLoop._handle_generating_state``: one assistant turn.

        Differs: ``max_tokens`` is the budget left; ``<think>`` may be masked out; the parser
        reports malformed calls (sent back as tool messages) and calls past
        ``max_parallel_calls``; the turn is recorded; limits are checked after parsing, per
        kind (``episode.after_assistant``); a reply without calls goes to the user, if any.
        """
        if (late := over_time(episode, self.settings.max_trajectory_s)) is not None:
            return episode.finish(Reason.TIME_BUDGET, late)
        start, started = len(episode.response_mask), time.perf_counter()
        anchor = context_anchor(episode.prompt_ids)
        episode.assistant_turns += 1
        token_ids = await self._reply(episode, sampling_params)
        content, calls, errors = await parse_turn(self.tool_parser, token_ids, self.tools)
        episode.last_assistant_ids = token_ids
        keep_calls(episode, calls, errors, self.max_parallel_calls)
        if self.fence is not None:
            refuse_trailing_calls(episode, self.fence)
        episode.add_turn(
            "assistant",
            start,
            len(episode.response_mask),
            latency_s=round(time.perf_counter() - started, 6),
            tool_calls=[c.name for c in episode.tool_calls],
            malformed_tool_calls=errors,
            anchor=anchor,
            **episode.take_inline_record(),
        )
        if (answer := submission(episode)) is not None:  # submit_answer ends the task before any limit or fold
            episode.submitted_answer = answer
            return episode.finish(Reason.FINAL_ANSWER)
        if episode.ending is not None:
            return episode.finish(*episode.ending)
        if episode.out_of_room or self._generation_budget(episode) <= 0:
            detail, episode.out_of_room = episode.out_of_room or "the response budget ran out while generating", None
            return self._out_of_budget(episode, detail)
        episode.messages.append(build_assistant_message(self, content, episode))
        return after_assistant(
            episode, max_assistant_turns=self.max_assistant_turns, max_tool_rounds=self.settings.max_tool_rounds
        )

    async def _handle_processing_tools_state(self, episode: Episode) -> Phase:
        """Replaces ``ToolAgentLoop._handle_processing_tools_state``: one round of tool results.

        Differs: tools run only if every result has room (``context_budget.fits``); calls go
        through the trajectory's ``ToolSession`` (one instance per tool, timeout, concurrency
        cap); results are cut by tokens and shrunk to fit rather than dropped; parse errors
        are answered too; the round counts as a tool round, not a user turn, and is recorded.
        """
        if (late := over_time(episode, self.settings.max_trajectory_s)) is not None:
            return episode.finish(Reason.TIME_BUDGET, late)
        start = len(episode.response_mask)
        placeholders = [tool_message("", c.tool_call_id) for c in episode.tool_calls]
        placeholders += [tool_message("") for _ in episode.parse_errors]
        if not await fits(self.ct_merge_context_msg, episode, placeholders, room=self._room(episode)):
            return self._out_of_budget(episode, "no room left for tool results; tools were not run")
        with simple_timer("tool_calls", episode.metrics):
            outcomes = await run_calls(episode.tool_session, episode.tool_calls, episode)
        if self.fence is not None:
            forget_failed_calls(episode, self.fence, outcomes)
        cap = self.settings.max_tool_response_tokens
        messages = result_messages(self.tokenizer, outcomes, episode.tool_calls, episode.parse_errors, cap)
        await append_context(
            self.ct_merge_context_msg, self.tokenizer, episode, messages, room=self._room(episode), shrink=True
        )
        record_tool_round(episode, outcomes, start)
        return Phase.GENERATING

    async def _handle_interacting_state(self, episode: Episode) -> Phase:
        """Replaces verl <= 0.7's ``ToolAgentLoop._handle_interacting_state``: one user turn.

        The user (``interaction.generate_response``) scores the last answer and may stop; a
        message past ``max_user_turns``/``max_assistant_turns`` or without room ends the
        trajectory and is recorded but not appended.
        """
        if (late := over_time(episode, self.settings.max_trajectory_s)) is not None:
            return episode.finish(Reason.TIME_BUDGET, late)
        start, started = len(episode.response_mask), time.perf_counter()
        stop, text, score, _ = await episode.interaction.generate_response(
            episode.interaction_id, episode.messages, **episode.interaction_kwargs
        )
        episode.turn_scores.append(float(score))
        record = {"latency_s": round(time.perf_counter() - started, 6), "score": float(score), "text": text}
        limits = {"max_user_turns": self.max_user_turns, "max_assistant_turns": self.max_assistant_turns}
        reason = Reason.INTERACTION_DONE if stop else user_turn_limit(episode, **limits)
        if reason is None:
            message = [{"role": "user", "content": text}]
            merge, room = self.ct_merge_context_msg, self._room(episode)
            if await append_context(merge, self.tokenizer, episode, message, room=room, shrink=False):
                episode.user_turns += 1
                episode.add_turn("user", start, len(episode.response_mask), appended=True, **record)
                return Phase.GENERATING
            return self._user_message_without_room(episode, start, record)
        episode.add_turn("user", start, start, appended=False, **record)
        return episode.finish(reason)

    def _user_message_without_room(self, episode: Episode, start: int, record: dict[str, Any]) -> Phase:
        """The user's message does not fit: it is recorded, not appended, and the trajectory ends."""
        episode.add_turn("user", start, start, appended=False, **record)
        return episode.finish(Reason.RESPONSE_BUDGET, "no room left for the user's message")

    # -- the budget (a folding loop keeps a reserve) and the turn's server calls --------------

    def _room(self, episode: Episode) -> int:
        """Response tokens free for context messages (tool results, user messages)."""
        return room_left(episode, self.response_length, self.settings.reserve_final_tokens)

    def _generation_budget(self, episode: Episode) -> int:
        """Response tokens the policy may still generate."""
        return self.response_length - len(episode.response_mask)

    def _out_of_budget(self, episode: Episode, detail: str) -> Phase:
        """The budget ran out (a turn used it up, or tool results have no room): the trajectory ends."""
        return episode.finish(Reason.RESPONSE_BUDGET, detail)

    async def _reply(self, episode: Episode, sampling_params: dict[str, Any]) -> list[int]:
        """One assistant turn's tokens; with ``code_fence``, blocks run as they close (``code_fence_loop.fenced_reply``)."""
        if self.fence is not None:
            return await fenced_reply(self, episode, sampling_params)
        return list((await self._generate(episode, sampling_params)).token_ids)

    async def _generate(
        self, episode: Episode, sampling_params: dict[str, Any], *, stop: bool = False, max_tokens: int | None = None
    ) -> Any:
        """One server call with ``max_tokens`` = the budget left (or less), the parser's stop tokens, the fence stop;
        the reply is merged into the stream (``assistant_turn.generate_reply``)."""
        budget = self._generation_budget(episode) if max_tokens is None else max_tokens
        stop_ids = self.tool_parser.stop_token_ids
        params = request_params(sampling_params, budget, pause_at_fences=stop, stop_token_ids=stop_ids)
        return await generate_reply(self.server_manager, episode, params, self.ct_merge_assistant_token, self.think_ids)
