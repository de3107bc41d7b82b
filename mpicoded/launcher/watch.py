"""A job that never ran is started again: under ``--ft`` a rank dead in MPI's start-up (which
Open MPI cannot survive), or mpirun that could not start its PMIx server."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .procs import rank_pids

START_RETRIES = 2  # starts again after a start that failed, before giving up
WATCH_S = 0.2  # how often the start-up watch looks at the ranks
STUCK_S = 3.0  # a rank gone, nobody up: mpirun still running this long after is stuck


def marks_start(args: Sequence[str]) -> bool:
    """Whether ``python ARGS`` is mpicoded's training run, whose ranks mark that MPI is up."""
    return list(args[:2]) == ["-m", "mpicoded.train"]


class StartWatch(threading.Thread):
    """Under ULFM a rank that dies before every rank is through MPI_Init leaves the others
    waiting in it for ever: Open MPI's start-up survives no death. Watches mpirun's ranks on
    this host until one says MPI is up (``mark_started``: past MPI_Init, every rank got there);
    a rank gone before that, while mpirun is still running STUCK_S later (the others stuck in
    MPI_Init), ends mpirun (SIGTERM to it, which ends its ranks) and is ``died``: nothing has
    run yet, so the job can be started again. A job that ends by itself meanwhile (Ctrl-C, a
    rank's error, every rank gone) ended for another reason, and is not started again."""

    def __init__(self, proc: subprocess.Popen[Any], directory: Path) -> None:
        super().__init__(daemon=True)
        self.proc, self.directory = proc, directory
        self.died: int | None = None
        self.over = threading.Event()

    def run(self) -> None:
        seen: dict[int, int] = {}
        while self.proc.poll() is None and not self.over.wait(WATCH_S):
            if self._up():
                return
            for rank, pid in rank_pids(self.proc.pid).items():
                seen.setdefault(rank, pid)
            gone = sorted(rank for rank, pid in seen.items() if not _running(pid))
            if gone and not self.over.wait(STUCK_S) and self.proc.poll() is None \
                    and not self._up():
                self.died = gone[0]
                self.proc.terminate()
                return

    def _up(self) -> bool:
        """Some rank marked MPI up (or the directory went with the run)."""
        try:
            return any(self.directory.iterdir())
        except OSError:
            return True

    def stop(self) -> int | None:
        """End the watch (mpirun has ended); the rank that died in the start-up, if one did."""
        self.over.set()
        self.join()
        return self.died


def _running(pid: int) -> bool:
    """Whether ``pid`` is a process that has not ended (not gone, not a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


LISTENER_FAILED = "The PMIx server's listener thread failed to start"


def death_in_start(rank: int) -> str:
    """Why a job whose rank ``rank`` died in MPI's start-up ended."""
    return f"rank {rank} died before MPI was up on every rank, which Open MPI's start-up cannot " \
        "survive"


def start_failure(died: int | None, returncode: int, output: str) -> str | None:
    """Why a job ended before any rank ran its program, so that starting it again is safe: a
    rank dead in MPI's start-up, or mpirun unable to start its PMIx server (now and then on a
    busy host); None for a job that ran."""
    if died is not None:
        return death_in_start(died)
    if returncode != 0 and LISTENER_FAILED in output:
        return "mpirun's PMIx server did not start, so no rank ran"
    return None


def restart_note(why: str, attempt: int, again: bool = True) -> str:
    """The line that says why the job ends and whether it starts again (attempt ``attempt``)."""
    if again:
        return f"mpicoded.launcher: {why}; starting the job again (attempt {attempt} of " \
            f"{START_RETRIES + 1})"
    return f"mpicoded.launcher: {why}; giving up after {attempt - 1} attempts"
