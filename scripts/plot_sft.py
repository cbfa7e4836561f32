"""The loss curve of a supervised fine-tuning run (``python -m extensions.warm_start.sft`` writes ``sft_steps.csv``).

    python scripts/plot_sft.py docs/results/ledger-warm-start-h200/sft

Writes ``DIR/sft_loss.png``: the loss (the token mean over each step's trained tokens, log scale) and the gradient
norm before clipping, per optimizer step, epochs marked. Needs matplotlib (``pip install -e '.[plots]'``).
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path


def read_steps(path: Path) -> list[dict[str, float]]:
    """The CSV's rows as numbers."""
    with path.open() as f:
        return [{key: float(value) for key, value in row.items()} for row in csv.DictReader(f)]


def plot(rows: list[dict[str, float]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [r["step"] for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for ax, column, title in (
        (axes[0], "loss", "loss (token mean, log scale)"),
        (axes[1], "grad_norm", "gradient norm"),
    ):
        ax.plot(steps, [r[column] for r in rows], marker="o", markersize=2)
        for r, before in zip(rows[1:], rows, strict=False):
            if r["epoch"] != before["epoch"]:
                ax.axvline(r["step"] - 0.5, color="grey", linestyle=":", linewidth=1)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("optimizer step (dotted: a new epoch)")
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    folder = Path(argv[0])
    rows = read_steps(folder / "sft_steps.csv")
    plot(rows, folder / "sft_loss.png")
    print(f"{len(rows)} steps -> {folder / 'sft_loss.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
