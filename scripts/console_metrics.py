"""verl's console step lines as its file logger's ``metrics.jsonl``, for a run whose ``trainer.logger`` had no
``file`` (the report scripts read ``metrics.jsonl``):

    python scripts/console_metrics.py RUN/console.log[.gz] > RUN/metrics.jsonl

verl's console logger (``verl/utils/logger/aggregate_logger.py``) prints each step's numeric metrics as
``step:N - key:value - key:value``, values through ``pprint.pformat`` (``0.5``, ``np.float64(0.5)``,
``np.int64(3)``, ``nan``); Ray prefixes the line with its actor (``(TaskRunnerV1 pid=...)``). Each line becomes
``{"step": N, "data": {...}}`` as verl's ``FileLogger`` writes it (NaN and infinities as null, as orjson does).
The console holds numbers only (verl prints only ``numbers.Number`` values; the file logger also writes the rest,
e.g. numpy bools), so those keys are missing here as they are from the console. A part that does not parse is an
error naming the line.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import re
import sys
from pathlib import Path

STEP_LINE = re.compile(r"(?:^|[\s\x1b\[0-9;m)])step:(\d+) - (.*)$")
NUMPY_WRAPPED = re.compile(r"^np\.\w+\((.*)\)$")


def parse_value(text: str) -> float | int | bool | None:
    """One console value as the file logger would have stored it."""
    text = NUMPY_WRAPPED.sub(r"\1", text.strip())
    if text in ("True", "False"):
        return text == "True"
    try:
        return int(text)
    except ValueError:
        number = float(text)  # ValueError for anything else: the caller names the line
        return None if math.isnan(number) or math.isinf(number) else number


def parse_line(line: str) -> dict | None:
    """``{"step": N, "data": {...}}`` for a console step line, None for any other line."""
    match = STEP_LINE.search(line.rstrip("\n"))
    if not match:
        return None
    data = {}
    for part in match.group(2).split(" - "):
        key, sep, value = part.rpartition(":")  # a key may hold a colon; a printed number never does
        if not sep:
            raise ValueError(f"{part!r} is not key:value")
        data[key.strip()] = parse_value(value)
    return {"step": int(match.group(1)), "data": data}


def records(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    out = []
    with opener(path, "rt", errors="replace") as lines:
        for number, line in enumerate(lines, 1):
            try:
                record = parse_line(line)
            except ValueError as exc:
                raise SystemExit(f"{path}:{number}: a step line that does not parse: {exc}") from exc
            if record is not None:
                out.append(record)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("console_log", type=Path)
    args = parser.parse_args(argv)
    found = records(args.console_log)
    if not found:
        print(f"{args.console_log}: no verl step lines (step:N - key:value ...)", file=sys.stderr)
        return 1
    for record in found:
        print(json.dumps(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
