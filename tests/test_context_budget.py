"""Token-budget helpers: truncation by tokens, and the cached Continuous Token prefix."""

from __future__ import annotations

from verl.utils.tokenizer.continuous_token_wiring import create_continuous_token_builder

from extensions.context_budget import PREFIX_IDS, cache_prefix_renders
from extensions.token_text import TRUNCATION_NOTE, truncate_to_tokens


def test_short_text_of_many_tokens_is_still_cut(tokenizer):
    text = "𓀀" * 20  # 20 characters, 60 tokens
    assert len(tokenizer.encode(text, add_special_tokens=False)) > 20
    cut = truncate_to_tokens(tokenizer, text, 20)
    assert cut.endswith(TRUNCATION_NOTE) and len(tokenizer.encode(cut, add_special_tokens=False)) <= 20 + 2


def test_cached_prefix_renders_exactly_what_verl_renders(tokenizer):
    tools = [{"type": "function", "function": {"name": "echo", "description": "e", "parameters": {"type": "object"}}}]
    history = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    assistant = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"type": "function", "function": {"name": "echo", "arguments": {}}}],
    }
    appended = [{"role": "tool", "content": "result 🙂"}]
    plain = create_continuous_token_builder(tokenizer, hf_model_type="qwen2")
    cached = cache_prefix_renders(create_continuous_token_builder(tokenizer, hf_model_type="qwen2"))
    PREFIX_IDS.clear()
    expected = plain.tokenize_context_incremental_messages(
        history + [assistant], history + [assistant] + appended, tools=tools
    )
    for _ in range(2):  # miss, then hit
        got = cached.tokenize_context_incremental_messages(
            history + [assistant], history + [assistant] + appended, tools=tools
        )
        assert got == expected
    assert len(PREFIX_IDS) >= 1
