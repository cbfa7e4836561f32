"""Context folding: the settings, the messages, and reading a summary (the loop is ``folding_loop.py``).

When the running context reaches ``trigger_fraction`` of the window (``window_tokens``, default
``rollout.prompt_length + rollout.response_length``), or the response budget has no room left for
a turn, the loop asks the policy to fold: a user message (``instruction``) asks for a summary inside
``<summary>...</summary>`` (at most ``summary_max_tokens`` tokens, trained as any assistant turn),
the segment ends, and the next segment starts from the sample's own messages (system and task) plus
one user message holding the summary and, with ``carry_last_observation``, the last tool or user
message (cut to ``observation_max_tokens``). At most ``max_segments`` segments: a context that fills
in the last one ends the trajectory with ``max_segments``.

Set them under ``fold:`` of a ``folding_workflow`` entry (``extensions/custom_rollouts.yaml``)::

    - name: folding_workflow
      _target_: extensions.folding_loop.FoldingWorkflowAgent
      fold: {trigger_fraction: 0.75, max_segments: 6, summary_max_tokens: 256}

With ``summary_prefix`` (e.g. ``"<summary>\n"``) the loop opens the reply to the fold request itself, so the
policy's first token is already inside the summary.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from extensions.errors import ConfigError

INSTRUCTION = (
    "Your context is almost full and will be cleared. Write a summary of your progress so far inside "
    "<summary></summary> tags: the facts and numbers you need to finish the task (for example running "
    "totals) and what to do next. You will continue from the task and this summary alone."
)
CARRY = "Summary of your progress so far (your context was cleared):\n<summary>\n{summary}\n</summary>"
OBSERVATION = "\nThe last message before the summary:\n{observation}"
CONTINUE = "\nContinue the task."
_SUMMARY = re.compile(r"<summary>(.*?)(?:</summary>|$)", re.DOTALL)


class FoldSettings(BaseModel):
    """The ``fold:`` settings of a folding loop entry."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    trigger_fraction: float = Field(0.75, gt=0.0, le=1.0)
    """Fold when the running context (prompt + response so far) reaches this fraction of the window."""
    window_tokens: int | None = Field(None, ge=64)
    """The window; default ``rollout.prompt_length + rollout.response_length``."""
    max_segments: int = Field(4, ge=2)
    """Segments per trajectory; a context that fills in the last one ends it (``max_segments``)."""
    summary_max_tokens: int = Field(256, ge=16)
    """Most tokens the summary may take (the fold reserves room for it and the instruction)."""
    carry_last_observation: bool = True
    """Also carry the last tool or user message into the next segment."""
    observation_max_tokens: int = Field(512, ge=0)
    """Cut the carried observation to this many tokens."""
    instruction: str = INSTRUCTION
    """The user message that asks for the summary."""
    summary_prefix: str = ""
    """Text the loop writes at the start of the reply to the fold request, after the assistant turn opens
    (mask 0: not trained), e.g. ``"<summary>\n"``: an untrained policy asked for a summary may answer with a
    tool call instead. It is read as part of the summary; the fold reserves its tokens."""


def parse_fold_settings(value: Any, *, entry: str) -> FoldSettings:
    """``fold:`` of loop entry ``entry`` (None = defaults); a clear error names the key."""
    try:
        return FoldSettings.model_validate(value or {})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'fold'}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"agent loop {entry!r}: fold: {problems}") from None


def read_summary(text: str) -> tuple[str, bool]:
    """(summary, tagged): the last non-empty ``<summary>`` after any thinking (to its end if unclosed),
    else the whole reply after the thinking; empty tags or a reply cut off while still thinking carry nothing."""
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    elif "<think>" in text:
        return "", False
    matches = list(_SUMMARY.finditer(text))
    # an opening tag repeated inside (the loop's summary_prefix, then the policy's own) opens nothing new
    found = [(m.group(1).rsplit("<summary>", 1)[-1].strip(), m) for m in matches]
    found = [(summary, m) for summary, m in found if summary]
    if not found:  # tags around nothing carry nothing; no tags at all: the whole reply
        return ("", "</summary>" in text) if matches else (text.strip(), False)
    summary, match = found[-1]
    return summary, "</summary>" in text[match.start() :]


def carry_message(summary: str, observation: str | None) -> dict[str, str]:
    """The next segment's user message: the summary, the last observation if carried, and go on."""
    content = CARRY.format(summary=summary)
    if observation:
        content += OBSERVATION.format(observation=observation)
    return {"role": "user", "content": content + CONTINUE}


def last_observation(messages: list[dict[str, Any]]) -> str | None:
    """The text of the last tool or user message after the sample's own, if any."""
    for message in reversed(messages):
        if message.get("role") == "assistant":
            continue
        if message.get("role") in ("tool", "user"):
            content = message.get("content")
            return content if isinstance(content, str) and content else None
        return None
    return None
