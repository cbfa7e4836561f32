"""LLMUserInteraction: the policy backend through verl's real AgentLoopWorker, its view, its limits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from extensions.errors import ConfigError, SampleError
from extensions.interactions.llm_user import DEFAULT_INSTRUCTIONS, LLMUserInteraction
from extensions.interactions.user_backends import UserModelError, user_view
from extensions.testing.scripted_server import ScriptedServer
from tests.conftest import Row, make_batch, register_loop, sample
from tests.test_long_workflow import IM_END, tool_call, tool_span_text, user_span_text

FACT = "USERFACT: one apple costs 3 dollars."
STOP = "###STOP###"


class RoutedServer:
    """The agent's requests go to one scripted server, the simulated user's (``...:user``) to another."""

    def __init__(self, agent: ScriptedServer, user: ScriptedServer):
        self.agent, self.user = agent, user
        self.user_prompts: list[list[int]] = []

    async def generate(self, request_id: str, **kwargs: Any) -> Any:
        if request_id.endswith(":user"):
            self.user_prompts.append(list(kwargs["prompt_ids"]))
            return await self.user.generate(request_id, **kwargs)
        return await self.agent.generate(request_id, **kwargs)


def write_config(tmp_path: Path, **config: Any) -> str:
    entry = {"name": "llm_user", "class_name": "extensions.interactions.llm_user.LLMUserInteraction", "config": config}
    path = tmp_path / "users.yaml"
    path.write_text(yaml.safe_dump({"interaction": [entry]}))
    return str(path)


async def run_two_sided(worker: Any, agent: dict, user: dict, samples: list[dict]) -> tuple[Any, RoutedServer]:
    routed = RoutedServer(ScriptedServer(worker.tokenizer, agent), ScriptedServer(worker.tokenizer, user))
    worker.llm_client = routed
    return await worker.generate_sequences(make_batch(samples)), routed


def ask_sample(marker: str, loop: str, **ikwargs: Any) -> dict[str, Any]:
    kwargs = {"name": "llm_user", "ground_truth": "12", "user_facts": [FACT], **ikwargs}
    return sample(marker, loop, interaction_kwargs=kwargs)


async def test_policy_user_answers_the_agent_then_the_answer_ends_it(worker, tokenizer, tmp_path):
    path = write_config(tmp_path, sampling={"temperature": 0.0, "max_tokens": 64}, stop_on_final_answer=True)
    loop = register_loop("lw_llm_user", interaction_config_path=path)
    agent = {"ASK-1": ["How much does one apple cost?", tool_call("echo", text="3*4"), "Four apples: 12.\n#### 12"]}
    user = {"USERFACT": ["It costs 3 dollars."]}
    out, routed = await run_two_sided(worker, agent, user, [ask_sample("ASK-1", loop)])
    row = Row(out, 0)

    assert row.reason == "interaction_done"
    assert [t["role"] for t in row.extras["turns"]] == ["assistant", "user", "assistant", "tool", "assistant", "user"]
    user_turn = row.extras["turns"][1]
    ids, mask = row.span(user_turn)
    assert tokenizer.decode(ids) == user_span_text("It costs 3 dollars.") and set(mask) == {0}
    assert tokenizer.decode(row.response_ids) == (
        "How much does one apple cost?"
        + IM_END
        + user_span_text("It costs 3 dollars.")
        + tool_call("echo", text="3*4")
        + IM_END
        + tool_span_text("echo: 3*4")
        + "Four apples: 12.\n#### 12"
        + IM_END
    )
    assert row.turn_scores == [0.0, 1.0]
    assert row.extras["turns"][-1]["text"] == "Thank you." and row.extras["turns"][-1]["appended"] is False
    # the user model saw the user's side: its instructions and fact, its own request, the agent's question
    (call,) = routed.user.calls
    assert {k: call[k] for k in ("temperature", "max_tokens")} == {"temperature": 0.0, "max_tokens": 64}
    system = DEFAULT_INSTRUCTIONS.replace("{stop_marker}", STOP) + f"\n\nFacts only you know:\n- {FACT}"
    expected = tokenizer.apply_chat_template(
        [
            {"role": "system", "content": system},
            {"role": "assistant", "content": "ASK-1"},
            {"role": "user", "content": "How much does one apple cost?"},
        ],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert [tokenizer.decode(p) for p in routed.user_prompts] == [expected]


async def test_user_that_never_stops_is_cut_by_max_user_turns(worker, tmp_path):
    path = write_config(tmp_path, score="stop_marker")
    loop = register_loop("lw_llm_user_cap", interaction_config_path=path, max_user_turns=2)
    agent = {"ASK-2": ["What do you mean?", "Still unclear?", "And now?"]}
    user = {"USERFACT": ["I mean apples.", "Apples!", "APPLES."]}
    out, _ = await run_two_sided(worker, agent, user, [ask_sample("ASK-2", loop)])
    row = Row(out, 0)
    assert row.reason == "max_user_turns"
    assert [t["role"] for t in row.extras["turns"]] == ["assistant", "user", "assistant", "user", "assistant", "user"]
    assert [t["appended"] for t in row.extras["turns"] if t["role"] == "user"] == [True, True, False]
    assert row.turn_scores == [0.0, 0.0, 0.0]


async def test_stop_marker_ends_the_episode_and_scores_by_rule(worker, tmp_path):
    path = write_config(tmp_path, score="stop_marker", correct_score=0.7)
    loop = register_loop("lw_llm_user_stop", interaction_config_path=path)
    out, _ = await run_two_sided(
        worker, {"ASK-3": ["Done, anything else?"]}, {"USERFACT": [f"No, thanks. {STOP}"]}, [ask_sample("ASK-3", loop)]
    )
    row = Row(out, 0)
    assert row.reason == "interaction_done"
    assert row.turn_scores == [0.7]
    assert row.extras["turns"][-1]["text"] == "No, thanks."


async def test_empty_policy_reply_is_an_error_trajectory_and_the_batch_goes_on(worker, tmp_path):
    path = write_config(tmp_path, stop_on_final_answer=True)
    loop = register_loop("lw_llm_user_empty", interaction_config_path=path)
    eos = [worker.tokenizer.eos_token_id]
    samples = [ask_sample("ASK-4", loop), ask_sample("ASK-5", loop, user_facts=["OTHERFACT"])]
    agent = {"ASK-4": ["Which apple?"], "ASK-5": ["#### 12"]}
    out, _ = await run_two_sided(worker, agent, {"USERFACT": [eos], "OTHERFACT": ["unused"]}, samples)
    bad, good = Row(out, 0), Row(out, 1)
    assert bad.reason == "error"
    assert bad.extras["error"] == (
        "UserModelError: interaction 'llm_user' (LLMUserInteraction): the policy server returned an empty user reply"
    )
    assert set(bad.mask) == {0}
    assert good.reason == "interaction_done" and good.turn_scores == [1.0]


async def test_a_user_reply_ends_where_the_model_writes_a_turn_marker(worker, tmp_path):
    """The 0.5B model playing the user on vLLM wrote ``<|im_start|>user`` as plain text and copied the
    assistant's message after it: the reply ends at the marker (the server is asked to stop there), and
    a reply that is nothing but a new turn is an error that says so."""
    path = write_config(tmp_path, stop_on_final_answer=True)
    loop = register_loop("lw_llm_user_marker", interaction_config_path=path)
    tok = worker.tokenizer
    marker = tok.encode("<|im_start|>user\nWhich apple?", add_special_tokens=False, split_special_tokens=True)
    assert tok.convert_tokens_to_ids("<|im_start|>") not in marker  # the marker as text, not the special token
    ok = tok.encode("Apples cost 3 dollars.", add_special_tokens=False) + marker
    samples = [ask_sample("ASK-6", loop), ask_sample("ASK-7", loop, user_facts=["OTHERFACT"])]
    agent = {"ASK-6": ["Which apple?", "#### 12"], "ASK-7": ["Which apple?"]}
    out, routed = await run_two_sided(
        worker, agent, {"USERFACT": [ok], "OTHERFACT": [[tok.encode(" ")[0], *marker]]}, samples
    )
    good, bad = Row(out, 0), Row(out, 1)
    user = [t for t in good.extras["turns"] if t["role"] == "user"]
    assert user[0]["text"] == "Apples cost 3 dollars."
    assert bad.reason == "error"
    assert bad.extras["error"] == (
        "UserModelError: interaction 'llm_user' (LLMUserInteraction): the policy server returned an empty user "
        "reply (it began a new turn at once: the model copies instead of playing the user)"
    )


async def test_a_user_reply_that_copies_the_agent_is_an_error(worker, tmp_path):
    """On vLLM the 0.5B user copied the agent's message (whole, or cut off by max_tokens) in 502 of 687
    replies; the agent answered nearly every copy with the same text, up to max_user_turns. A copy is an error now."""
    path = write_config(tmp_path, stop_on_final_answer=True)
    loop = register_loop("lw_llm_user_copy", interaction_config_path=path)
    asked = "Which apple do you mean, the red one or the green one from the market?"
    samples = [ask_sample("ASK-8", loop), ask_sample("ASK-9", loop, user_facts=["OTHERFACT"])]
    agent = {"ASK-8": [asked], "ASK-9": [asked, "#### 12"]}
    user = {"USERFACT": [asked[:45] + "  "], "OTHERFACT": ["Yes."]}  # a cut-off copy; a short real answer
    out, _ = await run_two_sided(worker, agent, user, samples)
    bad, good = Row(out, 0), Row(out, 1)
    assert bad.reason == "error"
    assert bad.extras["error"] == (
        "UserModelError: interaction 'llm_user' (LLMUserInteraction): the user model copied the agent's last "
        "message instead of answering it as the user"
    )
    assert good.reason == "interaction_done"
    assert [t["text"] for t in good.extras["turns"] if t["role"] == "user"] == ["Yes.", "Thank you."]


def test_copies_are_long_replies_that_restart_one_of_the_agents_messages():
    from extensions.interactions.user_backends import copies

    said = "Let me check the price first.\n\nWhich apple do you mean, the red one or the green one from the market?"
    assert copies("Which apple do you mean, the red one or the green one", said)  # the last message, cut off
    assert copies(said.replace("\n\n", " "), said)  # all of it
    assert not copies("Thank you!", "Thank you!")  # too short to tell from a real answer
    assert not copies("The red one, it costs 3 dollars at the market near my house.", said)


def test_user_view_swaps_roles_and_hides_tools_and_thinking():
    messages = [
        {"role": "system", "content": "agent system prompt"},
        {"role": "user", "content": "Apples cost some money. What do 4 cost?"},
        {"role": "assistant", "content": "<think>need price</think>What does one cost?"},
        {"role": "user", "content": "3 dollars."},
        {"role": "assistant", "content": "let me compute", "tool_calls": [{"function": {"name": "python_exec"}}]},
        {"role": "tool", "content": "12"},
        {"role": "assistant", "content": "It is 12."},
        {"role": "assistant", "content": "#### 12"},
    ]
    assert user_view(messages, "SYS") == [
        {"role": "system", "content": "SYS"},
        {"role": "assistant", "content": "Apples cost some money. What do 4 cost?"},
        {"role": "user", "content": "What does one cost?"},
        {"role": "assistant", "content": "3 dollars."},
        {"role": "user", "content": "It is 12.\n\n#### 12"},
    ]
    assert user_view([{"role": "user", "content": "Q"}, {"role": "assistant", "content": "<think>x</think>"}], "S")[
        -1
    ] == {"role": "user", "content": "(no visible message from the assistant)"}


async def test_policy_backend_without_server_names_the_problem():
    interaction = LLMUserInteraction({"name": "u", "score": "stop_marker"})
    iid = await interaction.start_interaction("t1")
    with pytest.raises(UserModelError, match="backend 'policy' needs the rollout's server_manager and tokenizer"):
        await interaction.generate_response(
            iid, [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "?"}]
        )


async def test_ground_truth_rule_needs_a_number():
    with pytest.raises(SampleError, match=r"needs a numeric interaction_kwargs.ground_truth, got None .*'user_facts'"):
        await LLMUserInteraction({"name": "u"}).start_interaction("t1", user_facts=["x"])


def test_config_errors_name_the_key_and_the_choices():
    with pytest.raises(ConfigError, match=r"unknown key\(s\) 'persona'; valid: .*'instructions'"):
        LLMUserInteraction({"name": "u", "persona": "x"})
    with pytest.raises(ConfigError, match=r"backend 'gpt' is not one of 'openai', 'policy'"):
        LLMUserInteraction({"name": "u", "backend": "gpt"})
    with pytest.raises(ConfigError, match=r"unknown sampling key\(s\) 'n'; valid: .*'max_tokens'"):
        LLMUserInteraction({"name": "u", "sampling": {"n": 2}})
    with pytest.raises(ConfigError, match=r"backend 'openai' needs openai.base_url and openai.model"):
        LLMUserInteraction({"name": "u", "backend": "openai", "openai": {}})
