"""End-to-end helper: stall a rank of a run once it has recorded its first iteration."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from mpicoded.launcher.procs import every_rank_pid


def stop_once_running(proc: subprocess.Popen[str], metrics: Path, rank: int, ranks: int,
                      deadline: float) -> int:
    """Wait (until ``deadline``, time.monotonic) for ``metrics`` to hold an iteration record,
    then SIGSTOP rank ``rank`` of the ``ranks`` that ``proc`` launched: its pid, to SIGCONT."""
    while time.monotonic() < deadline and not (
            metrics.exists() and '"record": "iteration"' in metrics.read_text()):
        time.sleep(0.01)
    pid = every_rank_pid(proc.pid, ranks)[rank]
    os.kill(pid, signal.SIGSTOP)
    return pid
