"""Under ``--ft``: a rank dead in MPI's start-up (which Open MPI cannot survive) ends the job,
to be started again."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .procs import rank_pids

START_RETRIES = 2  # starts again after a death in MPI's start-up, before giving up
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


def restart_note(rank: int, attempt: int, again: bool = True) -> str:
    """The line that says why the job ends and whether it starts again (attempt ``attempt``)."""
    died = (f"mpicoded.launcher: rank {rank} died before MPI was up on every rank, which Open "
            "MPI's start-up cannot survive; ")
    if again:
        return died + f"starting the job again (attempt {attempt} of {START_RETRIES + 1})"
    return died + f"giving up after {attempt - 1} attempts"
