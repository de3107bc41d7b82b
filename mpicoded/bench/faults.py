"""``bench faults``: a worker SIGKILLed from outside at each phase of a run, on 21 ranks under
ULFM (start-up, placement, the first iteration, mid-run, a re-code's re-placement, a failover,
the shutdown), for gfrc, mds on a matrix-vector job and the adaptive split. Each kill is timed
from the run's own events (its processes, its metrics records), never from sleeps. Each cell:
exit status, theta against the fault-free run (1e-9 relative), the wall time lost.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..launcher.process import Completed, finish_mpi, start_mpi
from ..launcher.procs import rank_pids
from ..launcher.timeout import MPIRunTimeout
from .common import table

RANKS = 21
VICTIM = 6  # the world rank killed from outside (the issue's)
TIMEOUT_S = 150
POLL_S = 0.01
PHASES = ("start-up", "placement", "first iteration", "mid-run", "re-code", "failover",
          "shutdown")
SCHEMES: dict[str, list[str]] = {
    "gfrc": ["--job", "logreg", "--samples", "40000", "--features", "50", "--code", "gfrc",
             "--stragglers", "2"],
    "mds (pagerank)": ["--job", "pagerank", "--nodes", "40000", "--code", "mds",
                       "--stragglers", "2"],
    "adaptive split": ["--job", "logreg", "--samples", "40000", "--features", "50",
                       "--code", "uncoded", "--split", "adaptive", "--partitions", "80"],
}
# workers killed by themselves (--kill-worker) to force a re-code: more than s = 2, across
# gfrc's groups; the adaptive split re-splits instead (its failure record is the event)
RECODE_KILLS = ["--kill-worker=2@5", "--kill-worker=3@5", "--kill-worker=4@5"]


@dataclass
class Cell:
    scheme: str
    phase: str
    returncode: int
    killed_s: float | None  # when the victim was killed, from the launch; None: never seen
    in_phase: bool  # the run was still in the phase just after the kill
    wall_s: float
    theta_rel: float | None  # |theta - fault-free| / |fault-free|; None without an output
    output: str


def records(path: Path) -> list[dict[str, Any]]:
    """The metrics records written so far (a torn last line left out)."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return rows


def mpi_loaded(pid: int) -> bool:
    """Whether the process has MPI loaded (mpi4py imports MPI and initialises it at once)."""
    try:
        return "libmpi.so" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def trigger(phase: str, iterations: int) -> Callable[[Path, dict[int, int]], bool]:
    """When ``phase`` has come, from the run's metrics file and its ranks' processes."""
    def seen(kind: str, **fields: Any) -> Callable[[Path, dict[int, int]], bool]:
        return lambda path, pids: any(
            r.get("record") == kind and all(r.get(k) == v for k, v in fields.items())
            for r in records(path))

    if phase == "start-up":  # MPI up on the victim, rank 0 still planning (no metrics yet)
        return lambda path, pids: (not path.exists() and VICTIM in pids
                                   and mpi_loaded(pids[VICTIM]))
    if phase == "placement":  # rank 0 opens the metrics file as planning ends, then places
        return lambda path, pids: path.exists()
    if phase == "first iteration":
        return seen("start")
    if phase == "mid-run":
        return seen("iteration", iteration=iterations // 2)
    if phase == "re-code":
        return lambda path, pids: any(r.get("record") in ("recode", "failure")
                                      and VICTIM not in r.get("ranks", [VICTIM])
                                      for r in records(path))
    if phase == "failover":
        return seen("failover")
    if phase == "shutdown":  # the last iteration is recorded: STOP is out, acks awaited
        return seen("iteration", iteration=iterations - 1)
    raise ValueError(f"unknown phase {phase!r}")


def still_in(phase: str, path: Path, iterations: int) -> bool:
    """Whether the run was still in ``phase`` just after the kill (a kill that came late is
    another phase's)."""
    kinds = [r.get("record") for r in records(path)]
    if phase == "start-up":
        return not path.exists()
    if phase == "placement":
        return "start" not in kinds
    if phase == "first iteration":
        return kinds.count("iteration") <= 1
    return True  # mid-run, re-code, failover; the shutdown lasts until the ranks leave


def run_cell(scheme: str, phase: str | None, iterations: int, out: Path,
             reference: np.ndarray | None = None) -> Cell:
    """One run of ``scheme`` with the victim killed at ``phase`` (None: fault-free)."""
    metrics, theta = out / "m.jsonl", out / "theta.npy"
    flags = [*SCHEMES[scheme], "--delay", "none", "--iterations", str(iterations), "--seed",
             "11", "--quiet", "--metrics", str(metrics), "--output", str(theta)]
    if phase == "re-code":
        flags += RECODE_KILLS
    start = time.monotonic()
    proc = start_mpi(RANKS, ["-m", "mpicoded.train", *flags], ft=True)
    done: list[Completed | BaseException] = []
    reader = threading.Thread(target=lambda: done.append(_finish(proc)), daemon=True)
    reader.start()  # reads its output meanwhile: a full pipe would stall the run
    killed, in_phase = None, phase is None
    if phase is not None:
        fire, master_killed = trigger(phase, iterations), phase != "failover"
        while reader.is_alive() and time.monotonic() - start < TIMEOUT_S:
            pids = rank_pids(proc.pid)
            if not master_killed and any(r.get("record") == "iteration" and
                                         r.get("iteration") == iterations // 4
                                         for r in records(metrics)) and 0 in pids:
                os.kill(pids[0], signal.SIGKILL)  # the failover the victim's death falls in
                master_killed = True
            if master_killed and fire(metrics, pids) and VICTIM in pids:
                os.kill(pids[VICTIM], signal.SIGKILL)
                killed = time.monotonic() - start
                in_phase = still_in(phase, metrics, iterations)
                break
            time.sleep(POLL_S)
    reader.join()
    result = done[0]
    if isinstance(result, BaseException):
        code, output = -1, str(result)
    else:
        code, output = result.returncode, result.output
    rel = None
    if theta.exists() and reference is not None:
        rel = float(np.linalg.norm(np.load(theta) - reference) / np.linalg.norm(reference))
    return Cell(scheme, phase or "none", code, killed, in_phase, time.monotonic() - start, rel,
                output)


def _finish(proc: subprocess.Popen[str]) -> Completed | BaseException:
    try:
        return finish_mpi(proc, TIMEOUT_S)
    except MPIRunTimeout as exc:
        return exc


def bench_faults(args: argparse.Namespace) -> dict[str, Any]:
    schemes = [s.strip() for s in (args.schemes or ",".join(SCHEMES)).split(",")]
    phases = [p.strip() for p in (args.patterns or ",".join(PHASES)).split(",")]
    bad = [s for s in schemes if s not in SCHEMES] + [p for p in phases if p not in PHASES]
    if bad:
        raise SystemExit(f"faults: unknown {bad[0]!r}: schemes {', '.join(SCHEMES)}; phases "
                         f"(--patterns) {', '.join(PHASES)}")
    cells: list[Cell] = []
    with tempfile.TemporaryDirectory() as tmp:
        for scheme in schemes:
            ref_dir = Path(tmp) / f"{scheme}-ref".replace(" ", "_")
            ref_dir.mkdir()
            ref = run_cell(scheme, None, args.iterations, ref_dir)
            if ref.returncode != 0:
                raise SystemExit(f"faults: the fault-free {scheme} run failed:\n"
                                 f"{ref.output[-3000:]}")
            reference = np.load(ref_dir / "theta.npy")
            cells.append(ref)
            for phase in phases:
                cell_dir = Path(tmp) / f"{scheme}-{phase}".replace(" ", "_")
                cell_dir.mkdir()
                print(f"[bench] faults: {scheme}, killed at {phase} ...", flush=True)
                cell = run_cell(scheme, phase, args.iterations, cell_dir, reference)
                cell.wall_s -= ref.wall_s  # time lost against the fault-free run
                cells.append(cell)
    rows = [[c.scheme, c.phase, str(c.returncode),
             "-" if c.killed_s is None else f"{c.killed_s:.2f}" + ("" if c.in_phase else " late"),
             "-" if c.theta_rel is None else f"{c.theta_rel:.1e}",
             f"{c.wall_s:+.2f}" if c.phase != "none" else f"{c.wall_s:.2f}"] for c in cells]
    print(f"\nfaults: world rank {VICTIM} SIGKILLed at each phase, {RANKS} ranks under ULFM, "
          f"{args.iterations} iterations (wall: the fault-free run's, then time lost)")
    print(table(["scheme", "killed at", "exit", "kill (s)", "theta rel", "wall (s)"], rows))
    failed = [c for c in cells if c.phase != "none" and not (
        c.returncode == 0 and c.killed_s is not None and c.in_phase and c.theta_rel is not None
        and c.theta_rel <= 1e-9)]
    for c in failed:
        print(f"\nFAILED: {c.scheme}, killed at {c.phase}:\n{c.output[-2000:]}")
    summary = {"cells": len(cells) - len(schemes), "failed": [f"{c.scheme} | {c.phase}"
                                                              for c in failed]}
    print(json.dumps(summary))
    if failed:
        raise SystemExit(1)
    return summary
