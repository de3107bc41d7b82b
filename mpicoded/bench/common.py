"""Helpers shared by the benchmark scenarios: runs of mpicoded.train, tables, output files."""

from __future__ import annotations

import dataclasses
import json
import tempfile
from pathlib import Path
from typing import Any

from ..launcher.process import run_mpi
from ..throttle.controller import ThrottleError, find_controller
from ..throttle.schedule import Schedule

TIMEOUT_S = 600
AGREE, DISAGREE = 0.10, 0.15  # MPI against the simulator: the goal, and where a bench fails


def train_run(ranks: int, flags: list[str], records: bool = False,
              throttle: dict[int, float] | Schedule | None = None) -> dict[str, Any]:
    """One mpicoded.train run; its final run record (with ``"iterations_records"`` if asked).
    ``throttle`` puts ranks under CPU quotas, fixed or on a schedule (real slow ranks; root)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.jsonl"
        if isinstance(throttle, Schedule):  # its windows timed from the first iteration
            throttle = dataclasses.replace(throttle, clock=str(path))
        done = run_mpi(ranks, ["-m", "mpicoded.train", *flags, "--quiet", "--metrics", str(path)],
                       timeout=TIMEOUT_S, throttle=throttle)
        if done.returncode != 0:
            raise RuntimeError(f"mpicoded.train {' '.join(flags)} failed:\n{done.output[-3000:]}")
        rows = [json.loads(line) for line in path.read_text().splitlines()]
    run: dict[str, Any] = rows[-1]
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


def agreement(points: list[tuple[str, float, float]]) -> list[str]:
    """Each (label, MPI, simulator) point's |MPI / sim - 1|, printed; the labels of those past
    DISAGREE, for the bench to fail on (a design change must not silently break a figure)."""
    rows, failed = [], []
    for label, mpi, sim in points:
        off = abs(mpi / sim - 1.0) if sim else float("inf")
        verdict = "ok" if off <= AGREE else "FAIL" if off > DISAGREE else "outside 10%"
        rows.append([label, f"{mpi:.4g}", f"{sim:.4g}", f"{mpi / sim if sim else 0:.3f}",
                     verdict])
        if off > DISAGREE:
            failed.append(label)
    print(f"MPI against the simulator over the same iterations (goal within {AGREE:.0%}, "
          f"fails past {DISAGREE:.0%}):")
    print(table(["point", "MPI", "simulator", "MPI/sim", ""], rows))
    if failed:
        print(f"DISAGREEMENT: {', '.join(failed)}")
    return failed


def float_list(text: str) -> list[float]:
    """A comma-separated list of numbers (a bench flag)."""
    return [float(v) for v in text.split(",") if v.strip()]


def needs_quotas(scenario: str) -> None:
    """Exit with one line unless CPU quotas can be set (root, a cgroup cpu controller)."""
    try:
        find_controller()
    except ThrottleError as exc:
        raise SystemExit(f"{scenario} needs CPU quotas: {exc}") from None


def worst_case(worst: dict[str, float], patterns: list[str], kind: str) -> str:
    """One line: each scheme's worst case over ``patterns`` (a user picks a scheme before
    knowing the pattern), the best of this run, and the default ``kind`` jobs get."""
    from ..jobs.defaults import default_scheme

    best = min(worst, key=worst.__getitem__)
    return (f"worst over {', '.join(patterns)}: "
            + ", ".join(f"{n} {t:.2f}" for n, t in sorted(worst.items(), key=lambda x: x[1]))
            + f"; best {best}; the default for {kind} jobs (jobs/defaults.py): "
            + str(default_scheme(kind)))
