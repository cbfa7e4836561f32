"""Import a script (a file run by path, not part of a package) as a module, for the tests of those scripts."""

from __future__ import annotations

import importlib.util
import io
import json
import tarfile
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
LEDGER_ANALYSIS = "experiments/ledger_folding/analysis"  # the ledger_folding experiment's analysis scripts


def load_script(name: str, under: str = "scripts") -> ModuleType:
    """``<under>/<name>.py`` (``under`` relative to the repo root), executed once per call as the module ``name``."""
    path = ROOT / under / f"{name}.py"
    spec = importlib.util.spec_from_file_location(Path(name).name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_val_dumps(run_dir: Path, dumps: dict[int, list[dict]]) -> Path:
    """``run_dir/val.tar.gz`` holding ``val/<step>.jsonl`` per step, as the GPU hold scripts pack verl's
    validation dumps (``trainer.validation_data_dir``); returns ``run_dir``, created if needed."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with tarfile.open(run_dir / "val.tar.gz", "w:gz") as tar:
        for step, rows in dumps.items():
            data = "".join(json.dumps(row) + "\n" for row in rows).encode()
            info = tarfile.TarInfo(f"val/{step}.jsonl")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return run_dir
