"""One rule for thinking spans: the parsers' text rule and the loss mask's token rule agree."""

from __future__ import annotations

import pytest

from extensions.episode import mask_thinking, think_token_ids
from extensions.parsers import AutoToolParser
from extensions.thinking import thinking_spans, token_thinking_spans

REPLIES = [
    "plain answer",
    "<think>a</think>b",
    "reasoning that began in the prompt</think>answer",  # the template opened <think> in the prompt
    "x<think>unclosed",
    "<think>a</think>b<think>c</think>d",
    "stray</think>mid</think>end",
]


@pytest.mark.parametrize("reply", REPLIES)
def test_token_spans_cover_exactly_the_text_spans(tokenizer, reply):
    ids = tokenizer.encode(reply, add_special_tokens=False)
    spans = token_thinking_spans(ids, *think_token_ids(tokenizer))
    thought = "".join(tokenizer.decode(ids[lo:hi]) for lo, hi in spans)
    assert thought == "".join(reply[lo:hi] for lo, hi in thinking_spans(reply))


def test_thinking_that_began_in_the_prompt_is_masked_as_the_parser_hides_it(tokenizer):
    reply = 'try {"name": "echo", "arguments": {"text": "x"}}</think>The answer is 42.'
    ids = tokenizer.encode(reply, add_special_tokens=False)
    mask = [1] * (3 + len(ids))  # three earlier response tokens, then this reply
    mask_thinking(mask, ids, think_token_ids(tokenizer))
    close = ids.index(tokenizer.convert_tokens_to_ids("</think>"))
    assert mask == [1, 1, 1] + [0] * (close + 1) + [1] * (len(ids) - close - 1)
    parsed = AutoToolParser(tokenizer).parse(reply)
    assert parsed.calls == [] and parsed.errors == []  # a call written while thinking is never run...
    assert tokenizer.decode(ids[close + 1 :]) == "The answer is 42."  # ...and only the answer is trained
    assert AutoToolParser(tokenizer).parse(reply.split("</think>")[0]).calls[0].name == "echo"
