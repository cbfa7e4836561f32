"""The paged-ledger task: deterministic ledgers whose answer is right by construction, and the read_page tool."""

from __future__ import annotations

import hashlib
import random
import re

import pyarrow.parquet as pq
import pytest

from extensions.data.ledger import LEDGER, LedgerSpec, main, make_ledger, prepare
from extensions.errors import ConfigError
from extensions.tools.ledger import ReadPageTool
from tests.conftest import ROOT

LINE = re.compile(r"^T\d{5} \| day \d+ \| (ACC-\d{3}[A-Z]) \| (deposit|withdrawal) \| (\d+) \| .+$")


def recount(pages: list[str], account: str, opening: int) -> tuple[int, int]:
    """The balance read back from the page texts alone, as a reader of the pages would compute it."""
    balance, count = opening, 0
    for page in pages:
        for line in page.splitlines()[2:]:
            holder, kind, amount = LINE.match(line).groups()
            if holder == account:
                balance += int(amount) if kind == "deposit" else -int(amount)
                count += 1
    return balance, count


def test_the_answer_is_what_the_pages_say():
    for i in range(20):
        ledger = make_ledger(random.Random(f"t/{i}"), LedgerSpec(pages=5, per_page=7, accounts=3))
        assert len(ledger.pages) == 5 and all(len(p.splitlines()) == 9 for p in ledger.pages)
        assert ledger.pages[2].splitlines()[0] == "Ledger page 3 of 5"
        assert recount(ledger.pages, ledger.account, ledger.opening) == (ledger.balance, ledger.transactions)


def test_a_set_number_of_target_transactions_spread_over_the_ledger():
    spec = LedgerSpec(pages=20, per_page=16, accounts=6, target_transactions=3)
    pages_hit = set()
    for i in range(30):
        ledger = make_ledger(random.Random(f"t/{i}"), spec)
        assert ledger.transactions == 3
        assert recount(ledger.pages, ledger.account, ledger.opening) == (ledger.balance, 3)
        pages_hit |= {n for n, page in enumerate(ledger.pages, 1) if ledger.account in page}
        other_holders = {LINE.match(line)[1] for page in ledger.pages for line in page.splitlines()[2:]}
        assert len(other_holders) == 6  # the other five accounts still fill the pages
    assert len(pages_hit) >= 15  # spread over the whole ledger, not bunched at its start


def test_min_pages_draws_each_ledgers_length_and_the_question_says_it(tmp_path):
    spec = LedgerSpec(pages=6, per_page=4, accounts=3, target_transactions=2, min_pages=2)
    lengths = [len(make_ledger(random.Random(f"m/{i}"), spec).pages) for i in range(60)]
    assert set(lengths) == {2, 3, 4, 5, 6}
    path = prepare(tmp_path, split="train", count=8, spec=spec, agent_name="folding_workflow")
    for row in pq.read_table(path).to_pylist():
        pages = row["extra_info"]["tools_kwargs"]["read_page"]["create_kwargs"]["pages"]
        assert row["prompt"][1]["content"].startswith(f"The ledger has {len(pages)} pages.")
        assert pages[-1].splitlines()[0] == f"Ledger page {len(pages)} of {len(pages)}"
        assert row["extra_info"]["transactions"] == 2


def test_default_ledgers_are_drawn_as_before_the_target_option():
    """The knob must not move the draws of existing ledgers (their answers are in committed results)."""
    ledger = make_ledger(random.Random("ledger/test/0/0"), LedgerSpec())
    digest = hashlib.sha256("\n".join(ledger.pages).encode()).hexdigest()[:16]
    assert (ledger.account, ledger.opening, ledger.balance, ledger.transactions, digest) == (
        "ACC-987E",
        800,
        -849,
        51,
        "fd7b0bdda62127ca",
    )


def test_the_default_history_is_more_than_three_4k_windows(tokenizer):
    ledger = make_ledger(random.Random("ledger/test/0/0"), LedgerSpec())
    tokens = sum(len(tokenizer.encode(page)) for page in ledger.pages)
    assert tokens > 3 * 4096, tokens
    assert 30 <= ledger.transactions <= 80


def test_the_lookup_presets_history_is_more_than_three_4k_windows(tokenizer):
    spec = LedgerSpec(pages=60, per_page=4, accounts=6, question="lookup")  # experiments/ledger_folding/task.sh
    ledger = make_ledger(random.Random("ledger/test/0/0"), spec)
    assert sum(len(tokenizer.encode(page)) for page in ledger.pages) > 3 * 4096


def test_splits_are_deterministic_and_disjoint(tmp_path):
    spec = LedgerSpec(pages=3, per_page=4, accounts=2)
    first = prepare(tmp_path / "a", split="train", count=4, spec=spec, agent_name="folding_workflow")
    again = prepare(tmp_path / "b", split="train", count=4, spec=spec, agent_name="folding_workflow")
    test = prepare(tmp_path / "c", split="test", count=4, spec=spec, agent_name="folding_workflow")
    rows, rows_again, test_rows = (pq.read_table(p).to_pylist() for p in (first, again, test))
    assert rows == rows_again
    pages = lambda r: tuple(r["extra_info"]["tools_kwargs"]["read_page"]["create_kwargs"]["pages"])  # noqa: E731
    assert not {pages(r) for r in rows} & {pages(r) for r in test_rows}
    row = rows[0]
    assert row["data_source"] == LEDGER and row["agent_name"] == "folding_workflow"
    assert row["extra_info"]["tool_selection"] == ["read_page"]
    account = re.search(r"Account (ACC-\d{3}[A-Z]) opened with a balance of (\d+)", row["prompt"][1]["content"])
    balance, count = recount(list(pages(row)), account[1], int(account[2]))
    assert row["reward_model"]["ground_truth"] == str(balance) and row["extra_info"]["transactions"] == count
    folding = prepare(tmp_path / "d", split="train", count=1, spec=spec, agent_name="folding_workflow", fold_tool=True)
    assert pq.read_table(folding).to_pylist()[0]["extra_info"]["tool_selection"] == ["read_page", "fold"]


LOOKUP_LINE = re.compile(r"^T\d{5} \| day \d+ \| ACC-\d{3}[A-Z] \| (?:deposit|withdrawal) \| (\d+) \| .+ ref (\d{6})$")


def test_the_lookup_question_asks_for_one_transaction_found_by_its_memo_reference(tmp_path):
    spec = LedgerSpec(pages=6, per_page=5, accounts=3, question="lookup")
    path = prepare(tmp_path, split="test", count=40, spec=spec, agent_name="react")
    needle_pages = []
    for row in pq.read_table(path).to_pylist():
        ref = re.fullmatch(
            r"The ledger has 6 pages\. Exactly one transaction in it has the memo reference ref (\d{6})\. "
            r"What is the amount of that transaction \(its Amount column\)\?",
            row["prompt"][1]["content"],
        )[1]
        pages = row["extra_info"]["tools_kwargs"]["read_page"]["create_kwargs"]["pages"]
        hits = [
            (number, m[1])
            for number, page in enumerate(pages, start=1)
            for m in map(LOOKUP_LINE.match, page.splitlines()[2:-1])
            if m[2] == ref
        ]
        assert len(hits) == 1  # exactly one line carries the reference: the answer is what that line says
        assert row["reward_model"]["ground_truth"] == hits[0][1]
        assert row["extra_info"]["needle_page"] == hits[0][0] and row["extra_info"]["question_form"] == "lookup"
        assert "until you find the transaction you are asked about" in row["prompt"][0]["content"]
        assert [page.splitlines()[-1] for page in pages] == [
            *(f"End of page {k} of 6. To read on, call read_page with page {k + 1}." for k in range(1, 6)),
            "End of page 6 of 6: this is the last page.",
        ]
        needle_pages.append(hits[0][0])
    assert set(needle_pages) == {1, 2, 3, 4, 5, 6}  # drawn over the whole ledger, not only its start


def test_the_lookup_question_reads_the_same_ledgers_as_the_balance_question():
    balance = make_ledger(random.Random("ledger/test/0/0"), LedgerSpec())
    lookup = make_ledger(random.Random("ledger/test/0/0"), LedgerSpec(question="lookup"))
    assert [page.rsplit("\n", 1)[0] for page in lookup.pages] == balance.pages  # the same lines, and a footer
    assert balance.needle is None and balance.answer == balance.balance
    assert lookup.answer == lookup.needle[1] and f"ref {lookup.needle[0]}" in lookup.pages[lookup.needle[2] - 1]


def test_the_check_footer_asks_for_the_reference_on_every_page_and_changes_no_draw():
    plain = make_ledger(random.Random("ledger/test/0/3"), LedgerSpec(pages=4, question="lookup"))
    check = make_ledger(random.Random("ledger/test/0/3"), LedgerSpec(pages=4, question="lookup", footer="check"))
    ref = check.needle[0]
    assert check.needle == plain.needle
    assert [page.rsplit("\n", 1)[0] for page in check.pages] == [page.rsplit("\n", 1)[0] for page in plain.pages]
    assert [page.rsplit("\n", 1)[1] for page in check.pages] == [
        *(
            f"End of page {k} of 4. Is ref {ref} on this page? If so, answer with its amount now; if not, call "
            f"read_page with page {k + 1}."
            for k in range(1, 4)
        ),
        f"End of page 4 of 4: this is the last page. If ref {ref} is on it, answer with its amount.",
    ]


def test_the_answer_tool_offers_submit_answer_and_says_so_in_the_prompt_and_on_every_page(tmp_path):
    spec = LedgerSpec(pages=3, per_page=4, question="lookup", footer="submit", answer_tool=True)
    path = prepare(tmp_path, split="test", count=1, spec=spec, agent_name="react", fold_tool=True)
    (row,) = pq.read_table(path).to_pylist()
    ref = re.search(r"ref (\d{6})\. What", row["prompt"][1]["content"])[1]
    assert row["extra_info"]["tool_selection"] == ["read_page", "fold", "submit_answer"]
    system = row["prompt"][0]["content"]
    assert system.endswith(
        "When you have found the answer, call submit_answer with it (the number only); that ends the task."
    )
    assert "####" not in system
    pages = row["extra_info"]["tools_kwargs"]["read_page"]["create_kwargs"]["pages"]
    assert [page.rsplit("\n", 1)[1] for page in pages] == [
        f"End of page 1 of 3. If ref {ref} is on this page, call submit_answer with its amount; if not, call "
        "read_page with page 2.",
        f"End of page 2 of 3. If ref {ref} is on this page, call submit_answer with its amount; if not, call "
        "read_page with page 3.",
        f"End of page 3 of 3: this is the last page. If ref {ref} is on it, call submit_answer with its amount.",
    ]
    with pytest.raises(ConfigError, match=r"^--footer check shapes lookup pages; --question balance pages have none$"):
        LedgerSpec(footer="check").check()
    with pytest.raises(ConfigError, match=r"^--footer submit tells the model to call submit_answer: add --answer-tool"):
        LedgerSpec(question="lookup", footer="submit").check()


def test_an_unknown_footer_is_an_error_naming_the_valid_ones(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--output-dir", str(tmp_path), "--question", "lookup", "--footer", "shout"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err  # Python 3.12 quotes the choices, 3.11 does not
    assert re.search(
        r"argument --footer: invalid choice: 'shout' \(choose from '?read_on'?, '?check'?, '?submit'?, '?end'?\)", err
    )
    with pytest.raises(ConfigError, match=r"^--footer must be one of read_on, check, submit, end, got 'shout'$"):
        LedgerSpec(question="lookup", footer="shout").check()


def test_bad_options_exit_2_naming_the_option(tmp_path, caplog):
    assert main(["--output-dir", str(tmp_path), "--pages", "0"]) == 2
    assert "--pages must be at least 1, got 0" in caplog.text
    assert main(["--output-dir", str(tmp_path), "--pages", "2", "--per-page", "3", "--target-transactions", "7"]) == 2
    assert "--target-transactions must be between 1 and pages x per-page = 6, got 7" in caplog.text
    assert main(["--output-dir", str(tmp_path), "--accounts", "1", "--target-transactions", "2"]) == 2
    assert "--target-transactions needs at least 2 accounts, got --accounts 1" in caplog.text
    assert main(["--output-dir", str(tmp_path), "--pages", "5", "--min-pages", "6"]) == 2
    assert "--min-pages must be between 1 and --pages 5, got 6" in caplog.text
    args = ["--pages", "5", "--min-pages", "1", "--per-page", "2", "--target-transactions", "3"]
    assert main(["--output-dir", str(tmp_path), *args]) == 2
    assert "--target-transactions must be between 1 and min-pages x per-page = 2, got 3" in caplog.text
    assert main(["--output-dir", str(tmp_path), "--question", "lookup", "--target-transactions", "3"]) == 2
    assert "--target-transactions shapes the balance question; --question lookup takes none" in caplog.text


async def test_read_page_returns_pages_and_says_the_valid_range():
    tool = ReadPageTool({"type": "native"})
    instance, _ = await tool.create(create_kwargs={"pages": ["one", "two"]})
    assert (await tool.execute(instance, {"page": 2}))[0].text == "two"
    response, reward, metrics = await tool.execute(instance, {"page": 3})
    assert response.text == "error: there is no page 3; the ledger has pages 1 to 2"
    assert (reward, metrics) == (0.0, {"error": "no_such_page"})
    response, _, metrics = await tool.execute(instance, {"page": "two"})
    assert metrics == {"error": "bad_arguments"} and "page" in response.text
    empty, _ = await tool.create()
    response, _, metrics = await tool.execute(empty, {})
    assert response.text == (
        "error: read_page has no pages for this sample; the dataset must set tools_kwargs.read_page.create_kwargs.pages"
    )
    assert tool.tool_schema.function.name == "read_page"
    assert list(tool.tool_schema.function.parameters.properties) == ["page"]
    await tool.release(instance)
    assert (await tool.execute(instance, {"page": 1}))[2] == {"error": "missing_pages"}


@pytest.fixture
def tokenizer():
    from transformers import AutoTokenizer

    from extensions.qwen_tokenizer import cached_qwen_model_dir

    return AutoTokenizer.from_pretrained(cached_qwen_model_dir())


@pytest.mark.parametrize(
    ("question", "loop", "form", "pages"),
    [
        ("", "folding_workflow", "balance", 20),
        ("lookup", "folding_lookup", "lookup", 60),
        ("flagged", "folding_flagged", "lookup", 30),
    ],
)
def test_the_experiments_task_presets_write_ledgers_for_their_fold_loop(tmp_path, question, loop, form, pages):
    """experiments/ledger_folding/task.sh: LEDGER_QUESTION picks the ledgers' shape and the folding loop."""
    import subprocess
    import sys

    from extensions.config_check import agent_loop_names, check_composed
    from tests.test_experiment_configs_validate import composed

    script = (
        "source experiments/ledger_folding/task.sh && "
        f'"{sys.executable}" -m extensions.data.ledger --output-dir "{tmp_path}" --split test --count 2 '
        '--agent-name "$FOLD_LOOP" $LEDGER_ARGS && echo "$WINDOW_ARGS"'
    )
    env = {"PATH": "/usr/bin:/bin", "LEDGER_QUESTION": question}
    run = subprocess.run(["bash", "-c", script], check=True, cwd=ROOT, env=env, capture_output=True, text=True)
    window = run.stdout.split()  # the preset's window overrides, for every variant
    rows = pq.read_table(tmp_path / "test.parquet").to_pylist()
    assert {r["agent_name"] for r in rows} == {loop} and {r["extra_info"]["question_form"] for r in rows} == {form}
    assert len(rows[0]["extra_info"]["tools_kwargs"]["read_page"]["create_kwargs"]["pages"]) == pages
    tools = ["read_page", "submit_answer"] if form == "lookup" else ["read_page"]  # lookup answers with a call
    assert rows[0]["extra_info"]["tool_selection"] == tools
    cfg = composed("ledger_folding", f"actor_rollout_ref.rollout.agent.default_agent_loop={loop}", *window)
    assert loop in agent_loop_names(cfg) and check_composed(cfg, "ledger_folding") == []
    if question == "flagged":  # a 2K window, and the flagged transaction's line says so
        assert cfg.actor_rollout_ref.rollout.prompt_length + cfg.actor_rollout_ref.rollout.response_length == 2048
        needle = rows[0]["extra_info"]["needle_page"]
        page = rows[0]["extra_info"]["tools_kwargs"]["read_page"]["create_kwargs"]["pages"][needle - 1]
        assert len(re.findall(r"^T\d{5} \|.* ref \d{6} \| DISPUTED$", page, re.MULTILINE)) == 1


def test_the_flag_style_marks_the_asked_line_and_changes_no_draw(tmp_path):
    """--ref-style flag: the same ledger as by reference, with ``| DISPUTED`` on the asked line alone, and a question
    and footers that ask for the flagged transaction instead of a reference."""
    number = make_ledger(random.Random("ledger/test/0/5"), LedgerSpec(pages=4, per_page=4, question="lookup"))
    spec = LedgerSpec(pages=4, per_page=4, question="lookup", ref_style="flag", footer="submit", answer_tool=True)
    path = prepare(tmp_path, split="test", count=6, spec=spec, agent_name="react")
    row = pq.read_table(path).to_pylist()[5]
    flag = make_ledger(random.Random("ledger/test/0/5"), spec)
    assert flag.needle == number.needle and flag.flagged and not number.flagged
    ref, amount, page = flag.needle
    lines = [line for p in flag.pages for line in p.splitlines()]
    flagged = [line for line in lines if line.endswith(" | DISPUTED")]
    assert len(flagged) == 1 and flagged[0].split(" | ")[4] == str(amount)  # the Amount column holds the answer
    assert flagged[0].removesuffix(" | DISPUTED") in number.pages[page - 1]
    assert [line for line in lines if line.startswith("T")] == [
        line + (" | DISPUTED" if line.endswith(f" ref {ref}") else "")
        for p in number.pages
        for line in p.splitlines()
        if line.startswith("T")
    ]
    assert row["prompt"][1]["content"] == (
        "The ledger has 4 pages. Exactly one transaction in it is marked DISPUTED at the end of its line. "
        "What is the amount of that transaction (its Amount column)?"
    )
    assert row["reward_model"]["ground_truth"] == str(amount) and row["extra_info"]["needle_page"] == page
    assert flag.pages[0].rsplit("\n", 1)[1] == (
        "End of page 1 of 4. If the DISPUTED transaction is on this page, call submit_answer with its amount; if "
        "not, call read_page with page 2."
    )


def test_word_references_rename_the_number_references_and_ask_for_a_unique_one():
    from extensions.data.ledger_text import word_ref

    assert (word_ref(0), word_ref(13), word_ref(12 * 12 + 11)) == ("amber-badger", "azure-falcon", "plum-badger")
    for seed in range(20):
        number = make_ledger(
            random.Random(f"ledger/test/0/{seed}"), LedgerSpec(pages=30, per_page=4, question="lookup")
        )
        spec = LedgerSpec(pages=30, per_page=4, question="lookup", ref_style="word")
        word = make_ledger(random.Random(f"ledger/test/0/{seed}"), spec)
        renamed = [
            re.sub(r" ref (\d{6})$", lambda m: f" ref {word_ref(int(m[1]))}", p, flags=re.M) for p in number.pages
        ]
        assert [p.rsplit("\n", 1)[0] for p in word.pages] == [p.rsplit("\n", 1)[0] for p in renamed]
        lines = [line for p in word.pages for line in p.splitlines() if line.endswith(f" ref {word.needle[0]}")]
        assert len(lines) == 1 and lines[0].split(" | ")[4] == str(word.needle[1])  # unique, and its amount


def test_the_end_footer_reads_every_page_and_answers_after_the_last():
    from extensions.data.ledger import question_text
    from extensions.data.ledger_text import SYSTEM_TO_THE_END

    spec = LedgerSpec(pages=3, per_page=4, question="lookup", footer="end", answer_tool=True)
    ledger = make_ledger(random.Random("ledger/test/0/0"), spec)
    assert [page.rsplit("\n", 1)[1] for page in ledger.pages] == [
        "End of page 1 of 3. Call read_page with page 2.",
        "End of page 2 of 3. Call read_page with page 3.",
        "End of page 3 of 3: this is the last page. Now call submit_answer with the amount of the transaction with "
        f"ref {ledger.needle[0]}.",
    ]
    assert question_text(ledger, answer_tool=True, footer="end")[0] == SYSTEM_TO_THE_END
    flagged = make_ledger(random.Random("ledger/test/0/0"), LedgerSpec(**{**spec.__dict__, "ref_style": "flag"}))
    assert flagged.pages[2].rsplit("\n", 1)[1] == (
        "End of page 3 of 3: this is the last page. Now call submit_answer with the amount of the DISPUTED transaction."
    )


def test_reference_styles_and_the_end_footer_are_checked():
    with pytest.raises(ConfigError, match=r"^--ref-style must be one of number, word, flag, got 'emoji'$"):
        LedgerSpec(question="lookup", ref_style="emoji").check()
    with pytest.raises(ConfigError, match=r"^--ref-style flag names lookup references; --question balance asks none$"):
        LedgerSpec(ref_style="flag").check()
    with pytest.raises(ConfigError, match=r"^--footer end tells the model to call submit_answer: add --answer-tool"):
        LedgerSpec(question="lookup", footer="end").check()


def test_needle_within_puts_the_asked_transaction_on_the_first_pages(tmp_path):
    spec = LedgerSpec(pages=12, per_page=4, question="lookup", ref_style="flag", answer_tool=True, needle_within=3)
    rows = pq.read_table(prepare(tmp_path, split="train", count=40, spec=spec, agent_name="react")).to_pylist()
    pages = [r["extra_info"]["needle_page"] for r in rows]
    assert set(pages) == {1, 2, 3}  # every one of the first 3 pages, and no later one
    for row in rows:  # the flag is where extra_info says, and only there
        texts = row["extra_info"]["tools_kwargs"]["read_page"]["create_kwargs"]["pages"]
        assert [k for k, t in enumerate(texts, 1) if "| DISPUTED\n" in t] == [row["extra_info"]["needle_page"]]
    with pytest.raises(ConfigError, match=r"^--needle-within must be between 1 and --pages 12, got 13$"):
        LedgerSpec(pages=12, question="lookup", needle_within=13).check()
    with pytest.raises(ConfigError, match=r"^--needle-within must be between 1 and --min-pages 2, got 3$"):
        LedgerSpec(pages=12, min_pages=2, question="lookup", needle_within=3).check()
    with pytest.raises(ConfigError, match=r"^--needle-within places the asked transaction; --question balance asks"):
        LedgerSpec(needle_within=2).check()


def test_the_cli_passes_ref_style_and_needle_within_on(tmp_path):
    args = ["--output-dir", str(tmp_path), "--split", "train", "--count", "6", "--pages", "10", "--per-page", "4"]
    flags = [
        "--question",
        "lookup",
        "--ref-style",
        "flag",
        "--answer-tool",
        "--footer",
        "submit",
        "--needle-within",
        "2",
    ]
    assert main([*args, *flags]) == 0
    rows = pq.read_table(tmp_path / "train.parquet").to_pylist()
    assert {r["extra_info"]["needle_page"] for r in rows} <= {1, 2}
    assert all("marked DISPUTED" in r["prompt"][1]["content"] for r in rows)
    assert main([*args, "--question", "lookup", "--needle-within", "11"]) == 2  # a reported option error


def test_a_label_names_the_data_source_and_changes_nothing_else(tmp_path, caplog):
    """react rows labelled `truncated` beside the fold loop's in one validation set: verl reports them apart."""
    args = ["--split", "test", "--count", "3", "--pages", "4", "--per-page", "4", "--question", "lookup"]
    assert main(["--output-dir", str(tmp_path / "fold"), *args, "--agent-name", "folding_flagged"]) == 0
    assert main(["--output-dir", str(tmp_path / "t"), *args, "--agent-name", "react", "--label", "truncated"]) == 0
    fold = pq.read_table(tmp_path / "fold" / "test.parquet").to_pylist()
    labelled = pq.read_table(tmp_path / "t" / "test.parquet").to_pylist()
    assert [r["data_source"] for r in fold] == [LEDGER] * 3
    assert [r["data_source"] for r in labelled] == [f"{LEDGER}@truncated"] * 3
    for a, b in zip(fold, labelled, strict=True):
        assert {**a, "data_source": "", "agent_name": ""} == {**b, "data_source": "", "agent_name": ""}
    assert main(["--output-dir", str(tmp_path / "x"), *args, "--label", "a@b"]) == 2
    assert "--label 'a@b': expected letters, digits, '_', '.' or '-' (it goes after '@')" in caplog.text
