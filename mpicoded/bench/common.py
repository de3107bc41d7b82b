"""Helpers shared by the benchmark scenarios: runs of mpicoded.train, tables, output files."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from ..launcher import run_mpi

TIMEOUT_S = 600


def train_run(ranks: int, flags: list[str], records: bool = False,
              throttle: dict[int, float] | None = None) -> dict:
    """One mpicoded.train run; its final run record (with ``"iterations_records"`` if asked).
    ``throttle`` puts ranks under CPU quotas (real slow ranks; root)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.jsonl"
        done = run_mpi(ranks, ["-m", "mpicoded.train", *flags, "--quiet", "--metrics", str(path)],
                       timeout=TIMEOUT_S, throttle=throttle)
        if done.returncode != 0:
            raise RuntimeError(f"mpicoded.train {' '.join(flags)} failed:\n{done.output[-3000:]}")
        rows = [json.loads(line) for line in path.read_text().splitlines()]
    run = rows[-1]
    if records:
        run["iteration_records"] = [r for r in rows if r["record"] == "iteration"]
    return run


def table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=True)]
    lines = [header, ["-" * w for w in widths], *rows]
    return "\n".join("  ".join(str(c).rjust(w) for c, w in zip(line, widths, strict=True))
                     for line in lines)


def have_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True
