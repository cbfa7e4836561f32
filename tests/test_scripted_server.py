"""The scripted server's ``Alternatives`` (several trajectories of one prompt) and its weight version."""

from __future__ import annotations

import pytest

from extensions.testing.scripted_server import Alternatives, ScriptedServer


async def test_alternatives_go_to_successive_request_ids_and_stay_with_them(tokenizer) -> None:
    server = ScriptedServer(tokenizer, {"Q": Alternatives(["a1", "a2"], ["b1"]), "R": ["r1"]}, global_steps=5)
    prompt = tokenizer.encode("say Q", add_special_tokens=False)

    async def say(request_id: str) -> str:
        out = await server.generate(request_id, prompt_ids=prompt, sampling_params={})
        assert out.extra_fields == {"global_steps": 5, "min_global_steps": 5, "max_global_steps": 5}
        return tokenizer.decode(out.token_ids[:-1])

    assert [await say("s0"), await say("s1"), await say("s0"), await say("s2")] == ["a1", "b1", "a2", "a1"]
    assert [c["alternative"] for c in server.calls] == [0, 1, 0, 0]
    with pytest.raises(IndexError, match=r"^script 'Q' has 1 replies; turn 1 was requested$"):
        await say("s1")
    plain = await ScriptedServer(tokenizer, {"R": ["r1"]}).generate(
        "x", prompt_ids=tokenizer.encode("R"), sampling_params={}
    )
    assert plain.extra_fields == {"min_global_steps": None, "max_global_steps": None}
    with pytest.raises(ValueError, match="at least one script"):
        Alternatives()
