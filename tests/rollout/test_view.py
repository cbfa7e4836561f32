"""The trajectory viewer, end to end: JSONL -> ``python -m extensions.rollout.view`` -> headless Chromium.

Chromium must be installed (``bash scripts/install_chromium.sh``; ``.ci/run`` does it): these
tests fail, not skip, without it, because the page's filter and token views only exist after
its script has run in a real browser.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from extensions.rollout.records import SCHEMA, ToolCallRecord, TrajectoryRecord, TurnRecord, split_thinking, write_jsonl
from extensions.rollout.view import load_tokenizer, token_pieces

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
IM_END = "<|im_end|>"
NEXT_ASSISTANT = f"{IM_END}\n<|im_start|>assistant\n"
XSS_SCRIPT = "<script>alert(1)</script>"
XSS_IMG = "<img src=x onerror=\"document.body.setAttribute('data-pwned', '1')\">"
XSS_BREAKOUT = "</script><script>document.title = 'pwned'</script>"
SANDBOX_ERROR = "SandboxError: sandbox exited with code 137 (out of memory) after 30.0 s"

Piece = tuple[str, int]
"""Text of a stretch of tokens and their mask (1 = trained, 0 = context)."""


# 1. Hand-made trajectories, tokenized with the real Qwen tokenizer ---------------------------


def make_record(
    tokenizer: Any, index: int, agent_name: str, question: str, turns: list[dict[str, Any]], **fields: Any
) -> TrajectoryRecord:
    """A TrajectoryRecord whose turns are ``{"role", "pieces": [(text, mask)], **TurnRecord fields}``."""
    response_ids: list[int] = []
    mask: list[int] = []
    records = []
    for turn in turns:
        turn = dict(turn)
        role, pieces = turn.pop("role"), turn.pop("pieces")
        start = len(response_ids)
        for text, m in pieces:
            ids = tokenizer.encode(text, add_special_tokens=False)
            response_ids += ids
            mask += [m] * len(ids)
        ids = response_ids[start:]
        visible, thinking = split_thinking(tokenizer.decode(ids, skip_special_tokens=True))
        records.append(
            TurnRecord(
                role=role,
                span=(start, len(response_ids)),
                text=tokenizer.decode(ids),
                visible_text=visible if role == "assistant" else "",
                thinking=thinking if role == "assistant" else "",
                trained=any(mask[start:]),
                **turn,
            )
        )
    prompt = [{"role": "system", "content": "You are a careful solver."}, {"role": "user", "content": question}]
    prompt_text = f"<|im_start|>system\n{prompt[0]['content']}{IM_END}\n<|im_start|>user\n{question}{NEXT_ASSISTANT}"
    return TrajectoryRecord(
        index=index,
        agent_name=agent_name,
        raw_prompt=prompt,
        turns=records,
        prompt_ids=tokenizer.encode(prompt_text, add_special_tokens=False),
        response_ids=response_ids,
        response_mask=mask,
        logprobs=[-0.25 * m for m in mask],
        **fields,
    )


def tool_call(name: str, **arguments: Any) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def tool_response(result: str) -> str:
    return f"\n<|im_start|>user\n<tool_response>\n{result}\n</tool_response>{NEXT_ASSISTANT}"


def solved(tokenizer: Any) -> TrajectoryRecord:
    """Thinking (masked out) + a tool call, a tool result, a user turn with a score, a reward."""
    call = ToolCallRecord(name="calculator", arguments='{"expression": "6 * 7"}', result="42", latency_s=0.012)
    return make_record(
        tokenizer,
        17,
        "long_workflow",
        "What is six times seven? Use the calculator.",
        [
            {
                "role": "assistant",
                "pieces": [
                    ("<think>\nSix times seven; let me check with the tool.\n</think>", 0),
                    ("\n\nLet me compute it.\n" + tool_call("calculator", expression="6 * 7") + IM_END, 1),
                ],
                "tool_calls": [call.model_copy(update={"result": None})],
                "latency_s": 0.41,
            },
            {
                "role": "tool",
                "pieces": [(tool_response("42"), 0)],
                "tool_calls": [call.model_copy(update={"reward": 0.2})],
            },
            {"role": "assistant", "pieces": [("The product is 42. Shall I box it?" + IM_END, 1)], "latency_s": 0.22},
            {
                "role": "user",
                "pieces": [(f"\n<|im_start|>user\nYes, give the final answer.{NEXT_ASSISTANT}", 0)],
                "score": 0.5,
            },
            {"role": "assistant", "pieces": [("Final answer: \\boxed{42} ✓" + IM_END, 1)], "latency_s": 0.18},
        ],
        termination_reason="final_answer",
        ground_truth="42",
        data_source="openai/gsm8k",
        turn_scores=[0.5],
        tool_rewards=[0.2],
        reward=1.0,
        reward_extra_info={"acc": 1.0, "format_bonus": 0.1, "tool_penalty": -0.05},
        timings={"generate_sequences": 2.31, "tool_calls": 0.12},
    )


def crashed(tokenizer: Any) -> TrajectoryRecord:
    """A tool call that took the sandbox down: the trajectory ends in ``error``."""
    code = "x = [0] * 10**12"
    call = ToolCallRecord(name="python", arguments=json.dumps({"code": code}), error="exception", latency_s=30.0)
    return make_record(
        tokenizer,
        18,
        "tool_agent",
        "Allocate a lot of memory.",
        [
            {"role": "assistant", "pieces": [(tool_call("python", code=code) + IM_END, 1)], "tool_calls": [call]},
            {"role": "tool", "pieces": [(tool_response("Error: sandbox crashed"), 0)], "tool_calls": [call]},
        ],
        termination_reason="error",
        error=SANDBOX_ERROR,
    )


def hostile(tokenizer: Any) -> TrajectoryRecord:
    """Model text full of markup that must show as text and never run."""
    args = {"query": XSS_BREAKOUT}
    call = ToolCallRecord(name="search", arguments=json.dumps(args), result=f"found {XSS_SCRIPT} {XSS_IMG}")
    return make_record(
        tokenizer,
        19,
        "long_workflow",
        f"Repeat after me: {XSS_SCRIPT}",
        [
            {
                "role": "assistant",
                "pieces": [
                    (
                        f"<think>{XSS_SCRIPT}</think>Sure: {XSS_SCRIPT} {XSS_IMG}\n{tool_call('search', **args)}{IM_END}",
                        1,
                    )
                ],
                "tool_calls": [call.model_copy(update={"result": None})],
            },
            {"role": "tool", "pieces": [(tool_response(call.result or ""), 0)], "tool_calls": [call]},
        ],
        termination_reason="max_assistant_turns",
        reward=0.0,
        reward_extra_info={"acc": 0.0},
    )


# 2. Running the viewer and the browser -------------------------------------------------------


def run_viewer(*args: str | Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "extensions.rollout.view", *map(str, args)]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)


def chromium(page_url: str, profile: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} not found: run `bash scripts/install_chromium.sh` first (.ci/run does)")
    cmd = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        *flags,
        page_url,
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


class Dom(HTMLParser):
    """Every element of a page: tag, attributes, text content and its trajectory section's id."""

    VOID = {"area", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}

    def __init__(self, page: str):
        super().__init__(convert_charrefs=True)
        self.elements: list[dict[str, Any]] = []
        self._open: list[dict[str, Any]] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        section = next((e["attrs"]["id"] for e in reversed(self._open) if "traj" in e["classes"]), None)
        attributes = {k: v or "" for k, v in attrs}
        classes = attributes.get("class", "").split()
        self.elements.append({"tag": tag, "attrs": attributes, "classes": classes, "text": "", "section": section})
        if tag not in self.VOID:
            self._open.append(self.elements[-1])

    def handle_endtag(self, tag: str) -> None:
        while self._open and self._open.pop()["tag"] != tag:
            pass

    def handle_data(self, data: str) -> None:
        for element in self._open:
            element["text"] += data

    def find(self, tag: str = "", *classes: str) -> list[dict[str, Any]]:
        return [e for e in self.elements if (not tag or e["tag"] == tag) and set(classes) <= set(e["classes"])]


@pytest.fixture(scope="module")
def qwen_tokenizer(qwen_dir: Path) -> Any:
    """Qwen2.5's tokenizer from the session's offline model dir (``qwen_dir``, tests/conftest.py)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(qwen_dir)


@pytest.fixture(scope="module")
def records(qwen_tokenizer: Any) -> list[TrajectoryRecord]:
    return [solved(qwen_tokenizer), crashed(qwen_tokenizer), hostile(qwen_tokenizer)]


@pytest.fixture(scope="module")
def report(records: list[TrajectoryRecord], qwen_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The page for the three records, per-token view on (``--tokenizer``), with a run summary."""
    tmp = tmp_path_factory.mktemp("view")
    write_jsonl(records, tmp / "trajectories.jsonl")
    (tmp / "summary.json").write_text(
        json.dumps({"trajectories": 3, "accuracy": 0.5, "termination_reasons": {"error": 1}})
    )
    done = run_viewer(
        tmp / "trajectories.jsonl",
        "-o",
        tmp / "report.html",
        "--summary",
        tmp / "summary.json",
        "--tokenizer",
        qwen_dir,
    )
    assert done.returncode == 0, done.stderr
    return tmp / "report.html"


@pytest.fixture(scope="module")
def dom(report: Path) -> Dom:
    """The DOM after the page's script ran, every token view opened (``#tokens``)."""
    done = chromium(report.as_uri() + "#tokens", report.parent / "profile", "--dump-dom")
    return Dom(done.stdout)


# 3. Tests ----------------------------------------------------------------------------------


def test_one_section_per_trajectory_with_badges_and_rewards(dom: Dom) -> None:
    sections = dom.find("section", "traj")
    assert [s["attrs"]["data-reason"] for s in sections] == ["final_answer", "error", "max_assistant_turns"]
    badges = [b for b in dom.find("span", "badge") if b["section"]]
    assert [(b["section"], b["text"], b["classes"][1]) for b in badges if b["text"] != "exception"] == [
        ("t0", "final_answer", "ok"),
        ("t1", "error", "err"),
        ("t2", "max_assistant_turns", "limit"),
    ]
    chips = [" ".join(c["text"].split()) for c in dom.find("span", "chip") if c["section"] == "t0"]
    for expected in ["acc 1", "format_bonus 0.1", "tool_penalty -0.05", "0.5", "0.2", "score 0.5", "reward 0.2"]:
        assert expected in chips
    assert "generate_sequences 2.31 s" in chips and "tool calls 1" in chips and "user 1" in chips
    assert dom.find("span", "reward", "pos")[0]["text"].split() == ["reward", "1"]
    thinking = [d for d in dom.find("details", "thinking") if d["section"] == "t0"]
    assert "let me check with the tool" in thinking[0]["text"] and "open" not in thinking[0]["attrs"]
    assert [a["text"] for a in dom.find("dl", "args") if a["section"] == "t0"] == ["expression6 * 7"]


def test_error_message_and_failed_tool_call_are_shown(dom: Dom) -> None:
    assert [e["text"] for e in dom.find("div", "error")] == [SANDBOX_ERROR]
    assert [b["section"] for b in dom.find("span", "badge", "err") if b["text"] == "exception"] == ["t1", "t1"]


def test_token_view_colours_every_token_by_its_mask(dom: Dom, records: list[TrajectoryRecord]) -> None:
    for pos, record in enumerate(records):
        tokens = [e for e in dom.find("span", "tok") if e["section"] == f"t{pos}"]
        assert [int(e["classes"][1] == "m1") for e in tokens] == record.response_mask
    assert len(dom.find("span", "tok", "m1")) == sum(sum(r.response_mask) for r in records)
    assert len(dom.find("span", "tok", "m0")) == sum(m == 0 for r in records for m in r.response_mask)
    views = dom.find("pre", "tokview")
    assert "".join(views[0]["text"].split("\u21b5")) == records[0].turns[0].text


def test_filter_by_reason_and_agent(report: Path) -> None:
    dom = Dom(
        chromium(report.as_uri() + "#reason=error&agent=tool_agent", report.parent / "profile-f", "--dump-dom").stdout
    )
    assert [("hidden" in s["attrs"]) for s in dom.find("section", "traj")] == [True, False, True]
    assert [e["text"] for e in dom.elements if e["attrs"].get("id") == "shown"] == ["1"]


def test_filter_options_and_summary(dom: Dom) -> None:
    options = [o["attrs"]["value"] for o in dom.find("option") if o["attrs"]["value"]]
    assert options == ["final_answer", "error", "max_assistant_turns", "long_workflow", "tool_agent"]
    stats = {k["text"]: v["text"] for k, v in zip(dom.find("div", "k"), dom.find("div", "v"), strict=True)}
    assert stats["trajectories"] == "3" and stats["accuracy"] == "50.0%" and stats["mean turns"] == "3"
    assert "termination_reasons" in dom.find("details", "run-summary")[0]["text"]


def test_model_text_is_escaped_and_never_runs(dom: Dom, report: Path) -> None:
    scripts = dom.find("script")
    assert [s["attrs"].get("type", "js") for s in scripts] == ["application/json"] * 3 + ["js"]
    for data in scripts[:3]:
        json.loads(data["text"])
    assert scripts[-1]["attrs"]["id"] == "viewer-js" and "alert" not in scripts[-1]["text"]
    assert not dom.find("img") and "data-pwned" not in dom.find("body")[0]["attrs"]
    assert dom.find("title")[0]["text"] == "Trajectories · trajectories.jsonl"
    hostile_text = [e["text"] for e in dom.find("div", "text") if e["section"] == "t2"]
    assert f"Repeat after me: {XSS_SCRIPT}" in hostile_text
    assert hostile_text[-1] == f"Sure: {XSS_SCRIPT} {XSS_IMG}", "the <tool_call> block shows as a parsed call"
    assert [a["text"] for a in dom.find("dl", "args") if a["section"] == "t2"] == ["query" + XSS_BREAKOUT]
    assert XSS_SCRIPT in dom.find("pre", "result")[-1]["text"]
    page = report.read_text()
    assert XSS_SCRIPT not in page and XSS_IMG not in page and "</script><script>document" not in page


def test_page_is_self_contained(report: Path) -> None:
    page = Dom(report.read_text())
    assert not [e for e in page.elements if e["tag"] in {"link", "img", "iframe", "object", "embed"}]
    assert not [e for e in page.elements if "src" in e["attrs"] or e["attrs"].get("href", "#")[:1] != "#"]
    css = page.find("style")[0]["text"]
    assert "url(" not in css and "@import" not in css and "@font-face" not in css


def test_screenshot_is_a_real_png(report: Path) -> None:
    png = report.parent / "shot.png"
    chromium(
        report.as_uri() + "#tokens", report.parent / "profile-shot", f"--screenshot={png}", "--window-size=1280,2000"
    )
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", data[16:24]) == (1280, 2000)
    assert len(data) > 50_000, "a page with three trajectories compresses to more than this"


def test_without_tokenizer_each_turn_is_coloured_by_its_span_mask(
    records: list[TrajectoryRecord], tmp_path: Path
) -> None:
    write_jsonl(records[:1], tmp_path / "t.jsonl")
    done = run_viewer(tmp_path / "t.jsonl", "-o", tmp_path / "t.html")
    assert done.returncode == 0, done.stderr
    page = Dom((tmp_path / "t.html").read_text())
    assert [v["classes"][2] for v in page.find("pre", "tokview", "whole")] == ["mixed", "m0", "m1", "m0", "m1"]
    assert not page.find("span", "tok")
    assert [s["attrs"].get("type") for s in page.find("script")] == [None], "no token data without a tokenizer"


def test_token_pieces_add_up_to_the_text_with_either_tokenizer(qwen_tokenizer: Any, qwen_dir: Path) -> None:
    text = "<|im_start|>assistant\n<think>ok</think>  naïve 你好 🦜\n\tdone<|im_end|>"
    ids = qwen_tokenizer.encode(text, add_special_tokens=False)
    pieces = token_pieces(qwen_tokenizer, ids)
    assert len(pieces) == len(ids) and "".join(pieces) == text == qwen_tokenizer.decode(ids)
    assert pieces[:4] == ["<|im_start|>", "assistant", "\n", "<think>"], "added tokens verbatim"
    assert pieces[-5:-3] == ["", "🦜"], "🦜 is two tokens: it shows on the one that completes it"
    assert token_pieces(load_tokenizer(qwen_dir), ids) == pieces


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "{path}: no such file (expected a trajectories .jsonl from extensions.rollout)"),
        ('{"hello": 1}\n', f'{{path}}:1: not a trajectory record (expected a JSON object with "schema": "{SCHEMA}")'),
        ("not json\n", "{path}:1: not JSON (Expecting value); expected one trajectory per line"),
    ],
    ids=["missing", "not-trajectories", "not-json"],
)
def test_bad_input_exits_2_with_the_reason(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "in.jsonl"
    if content is not None:
        path.write_text(content)
    done = run_viewer(path, "-o", tmp_path / "out.html")
    assert (done.returncode, done.stderr) == (2, message.format(path=path) + "\n")
    assert not (tmp_path / "out.html").exists()


def test_bad_options_exit_2_with_the_reason(records: list[TrajectoryRecord], tmp_path: Path) -> None:
    write_jsonl(records[:1], tmp_path / "t.jsonl")
    (tmp_path / "list.json").write_text("[1, 2]")
    cases = {
        (
            "--summary",
            tmp_path / "nope.json",
        ): "--summary {tmp}/nope.json: no such file (expected the rollout driver's summary.json)",
        ("--summary", tmp_path / "list.json"): "--summary {tmp}/list.json: expected a JSON object, got list",
        (
            "--tokenizer",
            tmp_path / "nope",
        ): "--tokenizer {tmp}/nope: not a directory (expected a model directory with tokenizer files)",
    }
    for option, message in cases.items():
        done = run_viewer(tmp_path / "t.jsonl", "-o", tmp_path / "out.html", *option)
        assert (done.returncode, done.stderr) == (2, message.format(tmp=tmp_path) + "\n")
