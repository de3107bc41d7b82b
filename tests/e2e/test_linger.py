"""End to end: a run ends without the acknowledgement of a rank known slow (it lingers), which
is released before the program's next run; both runs exact, a clean exit."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from stalls import stop_once_running

from mpicoded.launcher.process import finish_mpi, kill_group, start_mpi

SCRIPT = """
import sys
import numpy as np
import mpicoded
from mpicoded.examples.ridge import Ridge

thetas = []
for name in ("first", "second"):
    result = mpicoded.run(Ridge(), iterations=1000, loss_every=0, quiet=True,
                          metrics=f"{sys.argv[1]}/{name}.jsonl")
    if result is not None:
        thetas.append(result.theta)
if thetas:
    print("RELATIVE", float(np.linalg.norm(thetas[0] - thetas[1]) / np.linalg.norm(thetas[1])))
"""


def last_record(path):
    lines = path.read_text().splitlines() if path.exists() else []
    return json.loads(lines[-1]) if lines and lines[-1].endswith("}") else None


def frozen_at_the_end(args, metrics):
    """Start ``python ARGS`` on 7 ranks, stop rank 2 (SIGSTOP) once ``metrics`` has an
    iteration recorded and resume it once the file ends with its run record: that record (None
    if it never came, the run waiting for rank 2) and the run's completion."""
    proc = start_mpi(7, args)
    try:
        deadline = time.monotonic() + 120
        pid = stop_once_running(proc, metrics, 2, 7, deadline)
        try:
            while time.monotonic() < deadline and (last_record(metrics) or {}).get(
                    "record") != "run":
                time.sleep(0.01)
            record = last_record(metrics)
        finally:
            os.kill(pid, signal.SIGCONT)
        done = finish_mpi(proc, 120)
    finally:
        kill_group(proc)
    assert record is not None and record["record"] == "run", "the run waited for rank 2"
    # rank 2 lingers; on a shared core another rank may have sent nothing live in the last
    # round too, and lingers as well (released all the same)
    assert 2 in record["lingering_workers"], record["lingering_workers"]
    assert done.returncode == 0, done.output[-3000:]
    return record, done


@pytest.mark.timeout(200)
def test_a_frozen_rank_lingers_and_is_released_before_the_next_run(tmp_path):
    """Two runs of the default scheme (partial work) in one program; rank 2 is stopped
    (SIGSTOP) once the first run has an iteration recorded. That run ends, and writes its
    record, while rank 2 is still stopped: it sent nothing in the last round, so it lingers.
    Resumed, it is released before the second run, which ends with the same theta."""
    script = tmp_path / "two_runs.py"
    script.write_text(SCRIPT)
    _, done = frozen_at_the_end([str(script), str(tmp_path)], tmp_path / "first.jsonl")
    second = last_record(tmp_path / "second.jsonl")
    assert second is not None and second["record"] == "run"
    relative = float(done.output.split("RELATIVE ")[1].split()[0])
    assert relative <= 1e-9


@pytest.mark.timeout(200)
def test_the_cli_releases_a_lingering_rank_at_exit(tmp_path):
    """``mpicoded.train``: the run record is written while rank 2 is stopped; resumed, it is
    released at the program's exit, and every rank exits 0."""
    metrics = tmp_path / "run.jsonl"
    record, _ = frozen_at_the_end(["-m", "mpicoded.train", "--samples", "20000", "--iterations",
                                   "1000", "--delay", "none", "--loss-every", "0", "--quiet",
                                   "--metrics", str(metrics)], metrics)
    assert record["total_iterations"] == 1000
