"""``FoldingWorkflowAgent``: LongWorkflowAgent that folds its own context and returns one output per segment.

When a fold is due (``extensions/folding.py``: the context reached ``trigger_fraction`` of the window,
or the response budget has no room left for a turn, tool results, a code block's output or the user's
message), the policy is asked for a summary, the segment ends, and the next one starts from the
sample's messages plus the summary (and the last observation, cut until the prompt fits; a user
message that had no room comes after it). ``run`` returns a LIST of
``AgentLoopOutput`` s, one per segment, which verl 0.9.1's v1 trainer accepts
(``AgentLoopWorkerTQ._agent_loop_postprocess``): every segment is its own training row, every response
token is in exactly one segment, the trajectory's reward is scored on the last segment and copied to
the others, and GRPO takes each trajectory's advantage from its last segment and applies it to every
segment through that segment's own mask (``v1/utils.compute_advantage_for_multi_trajectories``).
``extensions/segment_weights.py`` keeps a trajectory of N segments from weighing N times in a
per-row loss mean.

Each segment's ``extras`` has its own turns (spans into its own response) and ``termination_reason``
``folded`` (the last: the trajectory's reason), ``segment``/``num_segments``, the trigger of its fold
(``fold_trigger``: ``context``, ``budget`` or ``tool``: the model called ``fold``, ``extensions/tools/fold.py``) and the summary's length (``summary_tokens``); the
counts are the trajectory's so far, so the last segment carries the whole trajectory's, which the
reward reads. A trajectory that ends in ``error`` trains on none of its segments.
"""

from __future__ import annotations

import copy
import time
import weakref
from dataclasses import dataclass
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopOutput

from extensions.context_budget import append_context, append_tokens
from extensions.custom_rollouts import LongWorkflowAgent
from extensions.episode import Episode, Phase, context_anchor
from extensions.errors import ConfigError
from extensions.folding import carry_message, last_observation, parse_fold_settings, read_summary
from extensions.records_schema import Reason
from extensions.time_budget import over_time
from extensions.token_text import truncate_to_tokens
from extensions.tools.fold import NAME as FOLD_TOOL

MIN_TURN_TOKENS = 32
"""A fold is due when fewer response tokens than this are left for the next turn."""
FRAMING = 16
"""Chat-template tokens around the fold instruction, on top of its own."""


@dataclass(frozen=True)
class TemplateTokens:
    """What folding needs of the tokenizer and its chat template, worked out once per tokenizer."""

    instruction_tokens: int
    """Tokens of the fold instruction's text."""
    turn_closing: list[int]
    """Closes a turn the reserve cut (ChatML's end of turn; the tokenizer's EOS elsewhere)."""
    generation_prompt: list[int]
    """What the template appends to open the assistant's turn (``<|im_start|>assistant\n`` in ChatML)."""


_TEMPLATE_TOKENS: weakref.WeakKeyDictionary[Any, dict[str, TemplateTokens]] = weakref.WeakKeyDictionary()


def template_tokens(tokenizer: Any, instruction: str) -> TemplateTokens:
    """``TemplateTokens`` of ``tokenizer``; cached, since verl builds the loop again for every sample."""
    by_instruction = _TEMPLATE_TOKENS.setdefault(tokenizer, {})
    if instruction not in by_instruction:
        im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
        end = im_end if im_end != tokenizer.unk_token_id else tokenizer.eos_token_id
        one = [{"role": "user", "content": "x"}]
        opened = tokenizer.apply_chat_template(one, add_generation_prompt=True, tokenize=False)
        closed = tokenizer.apply_chat_template(one, add_generation_prompt=False, tokenize=False)
        by_instruction[instruction] = TemplateTokens(
            instruction_tokens=len(tokenizer.encode(instruction, add_special_tokens=False)),
            turn_closing=[end, *tokenizer.encode("\n", add_special_tokens=False)],
            generation_prompt=tokenizer.encode(opened[len(closed) :], add_special_tokens=False),
        )
    return by_instruction[instruction]


def end_turn_for_request(episode: Episode, template: TemplateTokens, end_ids: frozenset[int]) -> None:
    """Make the stream end where a user message may follow: take back the assistant-turn opening that
    tool results or a user message end with (and shorten that turn's record), or close a turn the
    reserve cut off."""
    k = len(template.generation_prompt)
    if k and len(episode.response_mask) >= k and episode.prompt_ids[-k:] == template.generation_prompt:
        end = len(episode.response_mask)
        episode.prompt_ids, episode.response_mask = episode.prompt_ids[:-k], episode.response_mask[:-k]
        if episode.response_logprobs:
            episode.response_logprobs = episode.response_logprobs[:-k]
        if episode.turns and episode.turns[-1]["span"][1] == end:
            episode.turns[-1]["span"] = [episode.turns[-1]["span"][0], end - k]
    elif episode.prompt_ids and episode.prompt_ids[-1] not in end_ids:
        append_tokens(episode, template.turn_closing)


class FoldingWorkflowAgent(LongWorkflowAgent):
    """LongWorkflowAgent with context folding (``fold:`` settings, ``extensions/folding.py``)."""

    def __init__(self, *args: Any, name: str = "folding_workflow", fold: dict[str, Any] | None = None, **kwargs: Any):
        super().__init__(*args, name=name, **kwargs)
        self.fold = parse_fold_settings(fold, entry=name)
        self.window = self.fold.window_tokens or self.prompt_length + self.response_length
        self.template = template_tokens(self.tokenizer, self.fold.instruction)
        instruction = self.template.instruction_tokens
        prefix = self.fold.summary_prefix
        self.summary_prefix_ids = self.tokenizer.encode(prefix, add_special_tokens=False) if prefix else []
        self.fold_reserve = instruction + FRAMING + len(self.summary_prefix_ids) + self.fold.summary_max_tokens
        if self.response_length - self.fold_reserve < MIN_TURN_TOKENS:
            raise ConfigError(
                f"agent loop {name!r}: fold: the fold reserves {self.fold_reserve} response tokens (instruction "
                f"{instruction} + {FRAMING} + summary_prefix {len(self.summary_prefix_ids)} + summary_max_tokens "
                f"{self.fold.summary_max_tokens}), leaving fewer than "
                f"{MIN_TURN_TOKENS} of rollout.response_length={self.response_length} for a turn; lower "
                "summary_max_tokens or raise response_length"
            )
        self._due: str | None = None  # a fold asked for by _out_of_budget (verl builds one loop per sample)
        self._started_past = False  # this segment's first prompt was already past the context trigger
        self._carried_user: str | None = None  # a user message that had no room, for the next segment

    # -- when to fold ------------------------------------------------------------------

    def _folds_left(self, episode: Episode) -> bool:
        return len(episode.segment_outputs) + 1 < self.fold.max_segments

    def _generation_budget(self, episode: Episode) -> int:
        """The base budget minus the fold's reserve while a fold is still possible."""
        return super()._generation_budget(episode) - (self.fold_reserve if self._folds_left(episode) else 0)

    def _room(self, episode: Episode) -> int:
        return super()._room(episode) - (self.fold_reserve if self._folds_left(episode) else 0)

    def _past_trigger(self, episode: Episode) -> bool:
        return len(episode.prompt_ids) >= self.fold.trigger_fraction * self.window

    def _fold_trigger(self, episode: Episode) -> str | None:
        """``context``, ``budget`` or None. Never before the segment's first assistant turn; a segment
        whose first prompt was already past the context trigger folds on its budget alone."""
        if self._due is not None:
            return self._due
        if not any(turn["role"] == "assistant" for turn in episode.turns):
            return None
        if self._past_trigger(episode) and not self._started_past:
            return "context"
        if self._generation_budget(episode) < MIN_TURN_TOKENS:
            return "budget"
        return None

    async def _step(self, phase: Phase, episode: Episode, sampling_params: dict[str, Any]) -> Phase:
        if phase == Phase.PENDING:  # the sample's messages, an environment's opening message included
            phase = await super()._step(phase, episode, sampling_params)
            episode.task_messages, self._started_past = len(episode.messages), self._past_trigger(episode)
            return phase
        if phase == Phase.PROCESSING_TOOLS and self._fold_called(episode):
            return self._fold_asked(episode)
        if phase == Phase.GENERATING and (trigger := self._fold_trigger(episode)) is not None:
            if not self._folds_left(episode):
                detail = f"the context filled in segment {self.fold.max_segments} of {self.fold.max_segments}"
                return episode.finish(Reason.MAX_SEGMENTS, detail)
            if (late := over_time(episode, self.settings.max_trajectory_s)) is not None:  # a summary is a generation
                return episode.finish(Reason.TIME_BUDGET, late)
            return await self._fold(episode, sampling_params, trigger)
        return await super()._step(phase, episode, sampling_params)

    def _out_of_budget(self, episode: Episode, detail: str) -> Phase:
        """A turn cut by the reserve, or tool results without room, fold instead of ending the trajectory;
        the cut turn stays as it is and its calls are not run (the summary says what was going on)."""
        if not self._folds_left(episode):
            return super()._out_of_budget(episode, detail)
        episode.tool_calls, episode.parse_errors = [], []
        self._due = "budget"
        return Phase.GENERATING

    def _fold_called(self, episode: Episode) -> bool:
        """The model called ``fold`` and this sample was offered it (otherwise the call is an unknown tool's)."""
        offered = episode.tool_session is not None and FOLD_TOOL in episode.tool_session.tools
        return offered and any(call.name == FOLD_TOOL for call in episode.tool_calls)

    def _fold_asked(self, episode: Episode) -> Phase:
        """The model called ``fold``: fold now (the turn's other calls are not run); in the last segment
        the call is answered with an error and the other calls run."""
        if self._folds_left(episode):
            episode.tool_calls, episode.parse_errors, self._due = [], [], "tool"
            return Phase.GENERATING
        episode.tool_calls = [call for call in episode.tool_calls if call.name != FOLD_TOOL]
        episode.parse_errors.append(
            f"error: no fold is left (this is segment {self.fold.max_segments} of max_segments "
            f"{self.fold.max_segments}); finish the task in this context"
        )
        return Phase.PROCESSING_TOOLS

    def _user_message_without_room(self, episode: Episode, start: int, record: dict[str, Any]) -> Phase:
        """Fold instead of ending; the next segment opens with the summary and then this message."""
        if not self._folds_left(episode):
            return super()._user_message_without_room(episode, start, record)
        episode.add_turn("user", start, start, appended=False, carried=True, **record)
        self._carried_user, self._due = record["text"], "budget"
        return Phase.GENERATING

    # -- the fold ----------------------------------------------------------------------

    async def _fold(self, episode: Episode, sampling_params: dict[str, Any], trigger: str) -> Phase:
        """Ask for the summary, close the segment, open the next one from the task and the summary."""
        self._due = None
        task = episode.messages[: episode.task_messages]
        observation = last_observation(episode.messages[episode.task_messages :])
        end_turn_for_request(episode, self.template, self.end_ids)
        if not await self._ask_for_summary(episode):
            return episode.finish(Reason.RESPONSE_BUDGET, "no room left for the fold instruction")
        summary, summary_tokens = await self._summary(episode, sampling_params)
        carried = [{"role": "user", "content": self._carried_user}] if self._carried_user is not None else []
        self._carried_user = None
        keep = self.fold.observation_max_tokens if observation and self.fold.carry_last_observation else 0
        messages, prompt_ids = await self._next_prompt(episode, task, summary, observation, keep, carried)
        if len(prompt_ids) > self.prompt_length:
            detail = (
                f"the next segment's prompt has {len(prompt_ids)} tokens; rollout.prompt_length is {self.prompt_length}"
            )
            return episode.finish(Reason.PROMPT_TOO_LONG, detail)
        self._close_segment(episode, trigger, summary_tokens=summary_tokens)
        episode.messages, episode.prompt_ids = messages, prompt_ids
        episode.user_turns += len(carried)  # a carried user message counts once it reaches the prompt
        self._started_past = self._past_trigger(episode)
        return Phase.GENERATING

    async def _ask_for_summary(self, episode: Episode) -> bool:
        """Append the fold instruction (a user turn) and the loop's ``summary_prefix``; False if they have no room."""
        start = len(episode.response_mask)
        instruction = [{"role": "user", "content": self.fold.instruction}]
        room = self.response_length - len(episode.response_mask)
        room -= len(self.summary_prefix_ids) + 1  # after the instruction: the prefix and at least one summary token
        if not await append_context(
            self.ct_merge_context_msg, self.tokenizer, episode, instruction, room=room, shrink=False
        ):
            return False
        append_tokens(episode, self.summary_prefix_ids)  # the loop's opening of the reply: part of the request
        episode.add_turn(
            "user", start, len(episode.response_mask), appended=True, text=self.fold.instruction, fold=True
        )
        return True

    async def _summary(self, episode: Episode, sampling_params: dict[str, Any]) -> tuple[str, int]:
        """The policy's reply to the fold request, recorded as an assistant turn: (summary, reply tokens)."""
        start, started, anchor = len(episode.response_mask), time.perf_counter(), context_anchor(episode.prompt_ids)
        cap = min(self.fold.summary_max_tokens, self.response_length - len(episode.response_mask))
        output = await self._generate(episode, sampling_params, max_tokens=cap)
        reply = self.tokenizer.decode(output.token_ids, skip_special_tokens=True)
        summary, tagged = read_summary(self.fold.summary_prefix + reply)
        episode.add_turn(
            "assistant",
            start,
            len(episode.response_mask),
            latency_s=round(time.perf_counter() - started, 6),
            anchor=anchor,
            summary=True,
            summary_tagged=tagged,
        )
        return summary, len(output.token_ids)

    async def _next_prompt(
        self, episode: Episode, task: list[dict[str, Any]], summary: str, observation: str | None, keep: int,
        carried: list[dict[str, Any]],
    ) -> tuple[list[dict[str, Any]], list[int]]:  # fmt: skip
        """The next segment's messages and prompt: the task, the summary with the last observation cut to
        ``keep`` tokens (shorter still, or left out, when the prompt would not fit), a carried user message."""
        builder = self.continuous_token_builder
        while True:
            carry = truncate_to_tokens(self.tokenizer, observation, keep) if observation and keep > 0 else None
            messages = [*task, carry_message(summary, carry), *carried]
            prompt_ids = await self.loop.run_in_executor(
                None, lambda m=messages: builder.build_initial_tokens(m, tools=episode.schemas)
            )
            over = len(prompt_ids) - self.prompt_length
            if over <= 0 or carry is None:
                return messages, prompt_ids
            keep = max(0, keep - over - FRAMING)  # shrink by the overflow (and the cut marker); 0: leave it out

    def _close_segment(self, episode: Episode, trigger: str, *, summary_tokens: int) -> None:
        """The segment so far as its own output (reason ``folded``); the running stream starts afresh."""
        reason, episode.reason = episode.reason, Reason.FOLDED
        output = self._build_output(episode)
        episode.reason = reason
        output.extra_fields = copy.deepcopy(output.extra_fields)  # later segments mutate the episode's
        output.extra_fields["extras"].update(fold_trigger=trigger, summary_tokens=summary_tokens)
        episode.segment_outputs.append(output)
        episode.response_mask, episode.response_logprobs, episode.turns = [], [], []
        episode.last_assistant_ids, episode.final_answer_text = [], ""
        episode.code_run.clear()  # earlier outputs left the context: the same code may run (and show) again

    def _outputs(self, episode: Episode) -> list[AgentLoopOutput]:  # type: ignore[override]
        """Every segment's output, the last one the trajectory's end; ``segment``/``num_segments`` on each."""
        outputs = [*episode.segment_outputs, self._build_output(episode)]
        for i, output in enumerate(outputs):
            output.extra_fields["extras"].update(segment=i, num_segments=len(outputs))
            if episode.reason in self.settings.masked_reasons():  # every segment of a masked trajectory
                output.response_mask = [0] * len(output.response_mask)
        return outputs
