"""Agent loops of verl-longflow, registered for verl 0.9.1 by ``custom_rollouts.yaml``.

``LongWorkflowAgent`` keeps a whole multi-turn trace — prompt → assistant (thinking kept)
→ tool call(s) → tool results → assistant → user feedback → … — for up to 15 assistant
turns, and records why and how each trajectory ended. Per sample, by the dataset's
``agent_name`` column:

    actor_rollout_ref.rollout.agent.agent_loop_config_path=extensions/custom_rollouts.yaml

State machine: PENDING → GENERATING → (PROCESSING_TOOLS | INTERACTING) → GENERATING … →
TERMINATED. Limits on assistant turns, tool rounds and user turns are counted separately.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopOutput
from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop
from verl.experimental.agent_loop.tool_parser import ToolParser
from verl.utils.profiler import simple_timer
from verl.utils.rollout_trace import rollout_trace_op

from extensions.context_budget import MIN_RESULT_TOKENS, cache_prefix_renders, shrink_messages, truncate_to_tokens
from extensions.episode import Episode, Phase, Reason, think_spans
from extensions.errors import ConfigError, SampleError, choices
from extensions.interactions.registry import load_interactions
from extensions.loop_settings import VERL_LOOP_KWARGS, LoopSettings, parse_settings
from extensions.tool_session import ToolOutcome, ToolSession

logger = logging.getLogger(__name__)
FRAMING_BOUND = 128
"""Upper bound on the tokens a chat template adds around one context message."""


def sample_label(kwargs: dict[str, Any]) -> str:
    """How errors name a sample: its dataset index (``extra_info.index``, else the batch index)."""
    index = (kwargs.get("extra_info") or {}).get("index", kwargs.get("index"))
    return str(index.item() if hasattr(index, "item") else index)


class LongWorkflowAgent(ToolAgentLoop):
    """ToolAgentLoop with user turns, separate limits, termination reasons and safe tools."""

    def __init__(self, *args: Any, name: str = "long_workflow", **kwargs: Any):
        own = {k: v for k, v in kwargs.items() if k not in VERL_LOOP_KWARGS}
        self.agent_name = name
        self.settings: LoopSettings = parse_settings(own, entry=name)
        super().__init__(*args, **{k: v for k, v in kwargs.items() if k in VERL_LOOP_KWARGS})
        s = self.settings
        self.max_assistant_turns, self.max_user_turns = s.max_assistant_turns, s.max_user_turns
        self.max_parallel_calls = s.max_parallel_calls or self.max_parallel_calls
        self.interactions = load_interactions(s.interaction_config_path) if s.interaction_config_path else {}
        if s.tool_parser:
            self.tool_parser, self.tool_parser_name = self._parser(s.tool_parser), s.tool_parser
        self.think_ids = self._think_token_ids()
        cache_prefix_renders(self.continuous_token_builder)
        self.eos_id = self.tokenizer.eos_token_id if self.tokenizer.eos_token_id is not None else 0

    def _parser(self, name: str) -> Any:
        if name not in ToolParser._registry:
            raise ConfigError(
                f"agent loop {self.agent_name!r}: tool_parser {name!r} is not registered; "
                f"valid: {choices(ToolParser._registry)}"
            )
        return ToolParser.get_tool_parser(name, self.tokenizer)

    def _think_token_ids(self) -> tuple[int, int] | None:
        ids = [self.tokenizer.convert_tokens_to_ids(t) for t in ("<think>", "</think>")]
        if any(i is None or i == self.tokenizer.unk_token_id for i in ids):
            if not self.settings.thinking_in_loss:
                raise ConfigError(
                    f"agent loop {self.agent_name!r}: thinking_in_loss: false needs <think> and </think> "
                    "to be single tokens of the tokenizer; this tokenizer has no such tokens"
                )
            return None
        return ids[0], ids[1]

    # -- run ---------------------------------------------------------------------------

    @rollout_trace_op
    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        data = Episode(
            messages=list(kwargs.get("raw_prompt") or []),
            request_id=str(kwargs.get("trajectory_id") or uuid4().hex),
            tools_kwargs=dict(kwargs.get("tools_kwargs") or {}),
        )
        try:
            phase = await self._start(data, kwargs)
            while phase != Phase.TERMINATED:
                phase = await self._step(phase, data, sampling_params)
        except Exception as exc:
            if not self.settings.catch_errors:
                raise
            logger.warning("sample %s failed: %s: %s", sample_label(kwargs), type(exc).__name__, exc)
            data.reason, data.error = Reason.ERROR, f"{type(exc).__name__}: {exc}"
        finally:
            await self._close(data)
        return self._output(data)

    async def _step(self, phase: Phase, data: Episode, sampling_params: dict[str, Any]) -> Phase:
        if phase == Phase.GENERATING:
            return await self._handle_generating_state(data, sampling_params)
        if phase == Phase.PROCESSING_TOOLS:
            return await self._handle_processing_tools_state(data)
        if phase == Phase.INTERACTING:
            return await self._handle_interacting_state(data)
        raise RuntimeError(f"invalid phase {phase}")

    async def _start(self, data: Episode, kwargs: dict[str, Any]) -> Phase:
        """Validate the sample, open its tool session and interaction, build the prompt."""
        if not data.messages:
            raise SampleError(f"sample {sample_label(kwargs)}: 'raw_prompt' is missing or empty")
        data.tool_session = ToolSession(
            self._active_tools(kwargs),
            data.tools_kwargs,
            timeout_s=self.settings.tool_timeout_s,
            concurrency=self.settings.tool_concurrency,
            default_concurrency=self.settings.default_tool_concurrency,
        )
        await self._start_interaction(data, kwargs)
        return await self._handle_pending_state(data, {})

    def _active_tools(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        selection = (kwargs.get("extra_info") or {}).get("tool_selection")
        if not selection:
            return self.tools
        unknown = [name for name in selection if name not in self.tools]
        if unknown:
            raise SampleError(
                f"sample {sample_label(kwargs)}: extra_info.tool_selection names unknown tool(s) {unknown}; "
                f"configured tools: {choices(self.tools)}"
            )
        return {name: self.tools[name] for name in selection}

    async def _start_interaction(self, data: Episode, kwargs: dict[str, Any]) -> None:
        ikwargs = dict(kwargs.get("interaction_kwargs") or {})
        name = ikwargs.get("name")
        if name is None:
            if self.settings.require_interaction:
                raise SampleError(
                    f"sample {sample_label(kwargs)}: agent loop {self.agent_name!r} requires "
                    f"interaction_kwargs.name (one of {choices(self.interactions)}), but the sample has none"
                )
            return
        if name not in self.interactions:
            where = self.settings.interaction_config_path or "(no interaction_config_path configured)"
            raise SampleError(
                f"sample {sample_label(kwargs)}: interaction_kwargs.name={name!r} is not defined in {where}; "
                f"valid names: {choices(self.interactions)}"
            )
        data.interaction, data.interaction_name, data.interaction_kwargs = self.interactions[name], name, ikwargs
        # like verl <= 0.7, the interaction instance is keyed by the request id
        data.interaction_id = await data.interaction.start_interaction(data.request_id, **ikwargs)
        opening = getattr(data.interaction, "opening_message", None)
        text = await opening(data.interaction_id) if opening is not None else None
        if text:  # e.g. an environment's reset() observation: part of the prompt
            data.opening_message = text
            data.messages.append({"role": "user", "content": text})

    async def _close(self, data: Episode) -> None:
        if data.tool_session is not None:
            for problem in await data.tool_session.close():
                data.parse_errors.append(problem)
        if data.interaction is not None and data.interaction_id is not None:
            try:
                await data.interaction.finalize_interaction(data.interaction_id, **data.interaction_kwargs)
            except Exception as exc:
                logger.warning("finalize_interaction of %s failed: %s", data.interaction_name, exc)

    # -- states ------------------------------------------------------------------------

    async def _handle_pending_state(self, data: Episode, sampling_params: dict[str, Any]) -> Phase:
        schemas = [t.tool_schema.model_dump(exclude_unset=True, exclude_none=True) for t in self._session_tools(data)]
        data.schemas = schemas or None
        builder = self.continuous_token_builder
        prompt_ids = await self.loop.run_in_executor(
            None, lambda: builder.build_initial_tokens(data.messages, tools=data.schemas)
        )
        if len(prompt_ids) > self.prompt_length:
            data.prompt_ids = prompt_ids[-self.prompt_length :]
            return data.finish(
                Reason.PROMPT_TOO_LONG,
                f"prompt has {len(prompt_ids)} tokens; rollout.prompt_length is {self.prompt_length}",
            )
        data.prompt_ids = prompt_ids
        return Phase.GENERATING

    def _session_tools(self, data: Episode) -> list[Any]:
        return list(data.tool_session.tools.values()) if data.tool_session else []

    async def _handle_generating_state(
        self, data: Episode, sampling_params: dict[str, Any], ignore_termination: bool = False
    ) -> Phase:
        start, started = len(data.response_mask), time.perf_counter()
        output = await self._generate(data, sampling_params)
        if not output.token_ids:
            raise RuntimeError("the server returned an empty response (0 tokens)")
        await self._merge_assistant(data, output)
        content, calls, errors = await self._parse(output.token_ids)
        data.last_assistant_ids = output.token_ids
        data.tool_calls = calls[: self.max_parallel_calls]
        data.parse_errors = errors + [
            f"Tool call '{c.name}' was not run: at most {self.max_parallel_calls} tool call(s) per turn."
            for c in calls[self.max_parallel_calls :]
        ]
        data.num_malformed_tool_calls += len(errors)
        data.add_turn(
            "assistant",
            start,
            len(data.response_mask),
            latency_s=round(time.perf_counter() - started, 6),
            tool_calls=[c.name for c in data.tool_calls],
            malformed_tool_calls=errors,
        )
        if len(data.response_mask) >= self.response_length:
            return data.finish(Reason.RESPONSE_BUDGET, "the response budget ran out while generating")
        data.messages.append(self._build_assistant_message(content, data))
        return self._after_assistant(data)

    def _after_assistant(self, data: Episode) -> Phase:
        wants_tools = bool(data.tool_calls or data.parse_errors)
        if wants_tools and data.assistant_turns >= self.max_assistant_turns:
            return data.finish(Reason.MAX_ASSISTANT_TURNS)
        if wants_tools and data.tool_rounds >= self.settings.max_tool_rounds:
            return data.finish(Reason.MAX_TOOL_ROUNDS)
        if wants_tools:
            return Phase.PROCESSING_TOOLS
        if data.interaction is None:
            return data.finish(Reason.FINAL_ANSWER)
        return Phase.INTERACTING

    async def _handle_processing_tools_state(self, data: Episode) -> Phase:
        start = len(data.response_mask)
        placeholders = [self._tool_message("", c.tool_call_id) for c in data.tool_calls] + [
            self._tool_message("") for _ in data.parse_errors
        ]
        if not await self._fits(data, placeholders, MIN_RESULT_TOKENS * len(placeholders)):
            return data.finish(Reason.RESPONSE_BUDGET, "no room left for tool results; tools were not run")
        with simple_timer("tool_calls", data.metrics):
            outcomes: list[ToolOutcome] = await asyncio.gather(
                *(data.tool_session.call(c.name, c.arguments, data) for c in data.tool_calls)
            )
        cap = self.settings.max_tool_response_tokens
        messages = [
            self._tool_message(truncate_to_tokens(self.tokenizer, o.text, cap) if cap else o.text, c.tool_call_id)
            for o, c in zip(outcomes, data.tool_calls, strict=True)
        ]
        messages += [self._tool_message(error) for error in data.parse_errors]
        await self._append_context(data, messages, shrink=True)
        data.tool_rounds += 1
        data.num_tool_calls += len(outcomes)
        data.num_tool_errors += sum(o.error is not None for o in outcomes)
        data.tool_rewards.extend(float(o.reward) for o in outcomes if o.reward is not None)
        data.add_turn(
            "tool",
            start,
            len(data.response_mask),
            tool_calls=[o.record() for o in outcomes],
            malformed_tool_calls=list(data.parse_errors),
            latency_s=round(max((o.latency_s for o in outcomes), default=0.0), 6),
        )
        return Phase.GENERATING

    async def _handle_interacting_state(self, data: Episode) -> Phase:
        start, started = len(data.response_mask), time.perf_counter()
        stop, text, score, _ = await data.interaction.generate_response(
            data.interaction_id, data.messages, **data.interaction_kwargs
        )
        data.turn_scores.append(float(score))
        record = {"latency_s": round(time.perf_counter() - started, 6), "score": float(score), "text": text}
        if stop:
            data.add_turn("user", start, start, appended=False, **record)
            return data.finish(Reason.INTERACTION_DONE)
        for limit, reason in ((self.max_user_turns, Reason.MAX_USER_TURNS), (self.max_assistant_turns, None)):
            count = data.user_turns if reason else data.assistant_turns
            if count >= limit:
                data.add_turn("user", start, start, appended=False, **record)
                return data.finish(reason or Reason.MAX_ASSISTANT_TURNS)
        if not await self._append_context(data, [{"role": "user", "content": text}], shrink=False):
            data.add_turn("user", start, start, appended=False, **record)
            return data.finish(Reason.RESPONSE_BUDGET, "no room left for the user's message")
        data.user_turns += 1
        data.add_turn("user", start, len(data.response_mask), appended=True, **record)
        return Phase.GENERATING

    # -- helpers -----------------------------------------------------------------------

    async def _generate(self, data: Episode, sampling_params: dict[str, Any]) -> Any:
        params = {**sampling_params, "max_tokens": self.response_length - len(data.response_mask)}
        if self.tool_parser.stop_token_ids:
            params["stop_token_ids"] = sorted(
                set(params.get("stop_token_ids") or []) | set(self.tool_parser.stop_token_ids)
            )
        with simple_timer("generate_sequences", data.metrics):
            output = await self.server_manager.generate(
                request_id=data.request_id, prompt_ids=data.prompt_ids, sampling_params=params
            )
        preempted = output.num_preempted if output.num_preempted is not None else 0
        data.metrics["num_preempted"] = data.metrics.get("num_preempted", 0) + preempted
        for key, value in (output.extra_fields or {}).items():
            if key == "max_global_steps" and value is not None:
                data.extra_fields[key] = value
            else:
                data.extra_fields.setdefault(key, value)
        return output

    async def _merge_assistant(self, data: Episode, output: Any) -> None:
        data.assistant_turns += 1
        data.response_ids = output.token_ids
        use_logprobs = bool(data.response_logprobs or output.log_probs)
        merge, mask, logprobs = await self.ct_merge_assistant_token(
            data.prompt_ids,
            output.token_ids,
            data.response_mask,
            data.response_logprobs if use_logprobs else None,
            assistant_logprobs=output.log_probs or None,
        )
        if not self.settings.thinking_in_loss and self.think_ids:
            offset = len(mask) - len(output.token_ids)
            for lo, hi in think_spans(output.token_ids, *self.think_ids):
                mask[offset + lo : offset + hi] = [0] * (hi - lo)
        data.prompt_ids, data.response_mask = merge.token_ids, mask
        if logprobs is not None:
            data.response_logprobs = logprobs

    async def _parse(self, token_ids: list[int]) -> tuple[str, list[Any], list[str]]:
        detailed = getattr(self.tool_parser, "extract_tool_calls_detailed", None)
        schemas = [t.tool_schema for t in self.tools.values()]
        if detailed is not None:
            result = await detailed(token_ids, schemas)
            return result.content, list(result.calls), list(result.errors)
        content, calls = await self.tool_parser.extract_tool_calls(token_ids, schemas)
        return content, list(calls), []

    @staticmethod
    def _tool_message(text: str, tool_call_id: str | None = None) -> dict[str, Any]:
        message = {"role": "tool", "content": text}
        if tool_call_id is not None:
            message["tool_call_id"] = tool_call_id
        return message

    def _room(self, data: Episode) -> int:
        return self.response_length - len(data.response_mask) - self.settings.reserve_final_tokens

    async def _fits(self, data: Episode, messages: list[dict[str, Any]], extra: int) -> bool:
        """Would ``messages`` plus ``extra`` tokens fit in the room left (reserve kept)?

        Rendering costs as much as appending, so it is skipped when the room is far larger than
        any chat template's framing of ``messages`` (``FRAMING_BOUND`` tokens per message).
        """
        if self._room(data) >= extra + FRAMING_BOUND * (len(messages) + 1):
            return True
        merge, mask, _ = await self.ct_merge_context_msg(
            data.messages, data.messages + messages, data.prompt_ids, data.response_mask, None, tools=data.schemas
        )
        return len(mask) - len(data.response_mask) + extra <= self._room(data)

    async def _append_context(self, data: Episode, messages: list[dict[str, Any]], *, shrink: bool) -> bool:
        """Append context messages (mask 0); shrink tool results by tokens until they fit.

        Without ``shrink``, messages that do not fit are not appended and False is returned.
        """
        for _attempt in range(4):
            merge, mask, logprobs = await self.ct_merge_context_msg(
                data.messages,
                data.messages + messages,
                data.prompt_ids,
                data.response_mask,
                data.response_logprobs or None,
                tools=data.schemas,
            )
            overflow = len(mask) - len(data.response_mask) - self._room(data)
            if overflow <= 0:
                break
            if not shrink:
                return False
            messages = shrink_messages(self.tokenizer, messages, overflow)
        data.messages.extend(messages)
        data.prompt_ids, data.response_mask = merge.token_ids, mask
        if data.response_logprobs:
            data.response_logprobs = logprobs or []
        return True

    def _output(self, data: Episode) -> AgentLoopOutput:
        if data.last_assistant_ids:
            data.final_answer_text = self.tokenizer.decode(data.last_assistant_ids, skip_special_tokens=True)
        if not data.prompt_ids:  # failed before the prompt was built
            data.prompt_ids = [self.eos_id]
        n = len(data.response_mask)
        prompt_ids, response_ids = data.prompt_ids[: len(data.prompt_ids) - n], data.prompt_ids[-n:] if n else []
        mask, logprobs = list(data.response_mask), list(data.response_logprobs) or None
        if not response_ids:  # verl needs one response token; it carries no loss
            response_ids, mask, logprobs = [self.eos_id], [0], ([0.0] if logprobs is not None else None)
        if logprobs is None and self.rollout_config.calculate_log_probs:  # keep the batch's columns uniform
            logprobs = [0.0] * len(response_ids)
        if data.reason == Reason.ERROR:
            mask = [0] * len(mask)  # never train on a broken trajectory
        limit = self.response_length
        output = AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response_ids[:limit],
            response_mask=mask[:limit],
            response_logprobs=logprobs[:limit] if logprobs else None,
            num_turns=data.assistant_turns + data.tool_rounds + data.user_turns + 1,
            metrics=data.metrics,
            extra_fields=data.extra_fields,
        )
        output.extra_fields.update(
            turn_scores=data.turn_scores, tool_rewards=data.tool_rewards, extras=data.extras(self.agent_name)
        )
        return output
