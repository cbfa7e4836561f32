"""Would these weights have read past the flag where the engine did? A teacher-forced probe of training-rollout dumps.

    python experiments/ledger_folding/analysis/ledger_dump_probe.py --model .whl-gpu/sft_model --limit 8 \\
        docs/results/ledger-fold-grpo30-h100/fold_grpo/rollouts/6.jsonl.xz ...

verl's training-rollout dumps (``trainer.rollout_data_dir``) keep each row's prompt and response as text, decoded
without special tokens. For each trajectory (rows grouped by uid), this finds the first full page that shows the
flagged line (``| DISPUTED``) and the assistant turn after it. It rebuilds that segment's text up to the tool
name of that turn, with Qwen's ``<|im_start|>``/``<|im_end|>`` markers put back, and runs one forward pass of
``--model`` on CPU. It prints the model's probability of ``submit`` and of ``read`` as the name's first token,
beside what the engine chose there. Writes ``probe.csv`` next to the first dump.

The rebuilt tokens are the text's tokenization, not necessarily the engine's own tokens. The weights probed are
the ones given (e.g. the fine-tuned warm start), not the trainer's at that step.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
from rollout_dump_report import read_trajectories, write_csv  # noqa: E402  (scripts/rollout_dump_report.py)

FLAG_LINE = "| DISPUTED"
ROLE = re.compile(r"\n(system|user|assistant)\n")
DECISION = re.compile(r"End of page \d+ of \d+[.:][^\n]*\n</tool_response>\nassistant\n")
NAME = '"name": "'


def with_markers(text: str) -> str:
    """A dump's text with the chat markers the decoding skipped: ``\\nuser\\n`` -> ``<|im_end|>\\n<|im_start|>user\\n``."""
    text = ROLE.sub(lambda m: f"<|im_end|>\n<|im_start|>{m[1]}\n", text)
    return "<|im_start|>" + text if text.startswith("system\n") else text


def decision_point(trajectory: list[dict]) -> tuple[str, str] | None:
    """(the segment's text up to the tool name after the first flagged full page, the engine's choice there)."""
    for row in trajectory:
        output = row["output"]
        for m in DECISION.finditer(output):
            page_start = output.rfind("<tool_response>", 0, m.start())
            if FLAG_LINE not in output[page_start : m.start()]:
                continue
            turn = output[m.end() :]
            name_at = turn.find(NAME)
            opening = turn[: name_at + len(NAME)] if 0 <= name_at < 40 else '<tool_call>\n{"name": "'
            chosen = (
                "submit"
                if turn[len(opening) :].startswith("submit")
                else "read"
                if turn[len(opening) :].startswith("read")
                else "other"
            )
            return with_markers(row["input"] + output[: m.end()]) + opening, chosen
    return None


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dumps", nargs="+", type=Path)
    parser.add_argument("--model", required=True, help="an HF model folder")
    parser.add_argument("--limit", type=int, default=0, help="trajectories probed per dump (0: all)")
    args = parser.parse_args(argv)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    submit, read = tok.encode("submit", add_special_tokens=False)[0], tok.encode("read", add_special_tokens=False)[0]
    rows = []
    for dump in args.dumps:
        points = [p for t in read_trajectories(dump) if (p := decision_point(t)) is not None]
        for text, chosen in points[: args.limit or None]:
            ids = torch.tensor([tok.encode(text, add_special_tokens=False)])
            with torch.no_grad():
                probs = torch.softmax(model(ids).logits[0, -1].float(), dim=-1)
            rows.append({"dump": dump.name, "tokens": ids.shape[1], "engine_chose": chosen,
                         "p_submit": float(probs[submit]), "p_read": float(probs[read])})  # fmt: skip
            r = rows[-1]
            print(f"{dump.name}: engine chose {chosen}; model p(submit) {r['p_submit']:.6f}, p(read) {r['p_read']:.6f}")
        if not points:
            print(f"{dump.name}: no assistant turn after a full page with the flagged line")
    if not rows:
        return 1
    out = args.dumps[0].parent / "probe.csv"
    write_csv(out, rows)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
