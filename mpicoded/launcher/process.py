"""mpirun started in a process group of its own, waited for with a hard timeout, killed whole."""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..host import STARTED_ENV
from ..throttle.groups import Throttle
from ..throttle.schedule import Schedule, check_rank_throttle
from .command import mpi_env, mpirun_command
from .procs import descendants
from .timeout import MPIRunTimeout, ask_where
from .watch import START_RETRIES, StartWatch, marks_start, restart_note, start_failure

MIN_START_S = 10.0  # a new start needs at least this long before the caller's timeout


@dataclass(frozen=True)
class Completed:
    """Exit status and merged stdout+stderr of one mpirun."""

    returncode: int
    output: str


class MPIProcess(subprocess.Popen[str]):
    """A started mpirun and the cpu groups of its throttled ranks (if any): the groups are removed
    as soon as mpirun has been reaped (``wait``, ``communicate``, ``finish_mpi``, ``kill_group``).
    Under ``--ft``, ``watch`` (if the program marks its start) names a rank that died in MPI's
    start-up, and ``again`` starts the same job anew."""

    def __init__(self, *args: Any, throttle: Throttle | None = None, started: str | None = None,
                 **kwargs: Any) -> None:
        self.throttle = throttle
        self.watch: StartWatch | None = None
        self.again: functools.partial[MPIProcess] | None = None
        self._started = started
        super().__init__(*args, **kwargs)
        if started is not None:
            self.watch = StartWatch(self, Path(started))
            self.watch.start()

    def wait(self, timeout: float | None = None) -> int:
        code = super().wait(timeout)
        self.release()
        return code

    def died_in_start(self) -> int | None:
        """Once mpirun ended: the rank that died in MPI's start-up, if the watch saw one."""
        self.release()
        return None if self.watch is None else self.watch.died

    def release(self) -> None:
        """Remove the cpu groups (once; a rank still in one is moved to the root group first)
        and end the start-up watch, its directory removed."""
        throttle, self.throttle = self.throttle, None
        if throttle is not None:
            throttle.remove()
        if self.watch is not None:
            self.watch.stop()
        if self._started is not None:
            shutil.rmtree(self._started, ignore_errors=True)
            self._started = None


def throttle_groups(throttle: Mapping[int, float] | Schedule | None,
                    ranks: int) -> Throttle | None:
    """The cpu groups (not created yet) of fixed shares ``{rank: fraction}`` or a schedule."""
    if not throttle:
        return None
    if isinstance(throttle, Schedule):
        check_rank_throttle(throttle.at(0.0), ranks)
        return Throttle({}, schedule=throttle)
    return Throttle(check_rank_throttle(throttle, ranks))


def start_mpi(ranks: int, args: list[str], ft: bool = False, cwd: str | None = None,
              throttle: Mapping[int, float] | Schedule | None = None) -> MPIProcess:
    """Start ``python ARGS`` on ``ranks`` ranks in a process group of its own; ranks in
    ``throttle`` get that fraction of one core, or follow its schedule (ValueError for a rank
    outside 0..ranks-1, ThrottleError without root or a writable cpu controller)."""
    groups = throttle_groups(throttle, ranks)
    cmd = mpirun_command(ranks, args, ft, groups)
    started = tempfile.mkdtemp(prefix="mpicoded-start-") if ft and marks_start(args) else None
    env = mpi_env() if started is None else {**mpi_env(), STARTED_ENV: started}
    if groups is not None:
        groups.create()
        groups.follow()
    try:
        proc = MPIProcess(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, start_new_session=True,
                          throttle=groups, started=started)
    except BaseException:
        if groups is not None:
            groups.remove()
        if started is not None:
            shutil.rmtree(started, ignore_errors=True)
        raise
    proc.again = functools.partial(start_mpi, ranks, args, ft, cwd, throttle)
    return proc


def finish_mpi(proc: subprocess.Popen[str], timeout: float) -> Completed:
    """Wait for a started mpirun; on timeout ask its ranks where they are, kill its whole
    group and raise MPIRunTimeout. A job that never ran (``start_failure``) is started again,
    up to START_RETRIES times, within the same ``timeout``."""
    deadline = time.monotonic() + timeout
    earlier = ""
    attempt = 1
    while True:
        attempt += 1  # the number of the start that would come next
        try:
            done = _finish_once(proc, deadline - time.monotonic())
        except MPIRunTimeout as exc:  # the whole wait's, with what the earlier starts said
            raise MPIRunTimeout(timeout, earlier + exc.output, exc.processes) from None
        again = proc.again if isinstance(proc, MPIProcess) else None
        died = proc.died_in_start() if isinstance(proc, MPIProcess) else None
        why = start_failure(died, done.returncode, done.output)
        if why is None or again is None:
            return Completed(done.returncode, earlier + done.output)
        retry = attempt <= START_RETRIES + 1 and deadline - time.monotonic() >= MIN_START_S
        earlier += done.output + restart_note(why, attempt, retry) + "\n"
        if not retry:
            return Completed(done.returncode or 1, earlier)
        proc = again()


def _finish_once(proc: subprocess.Popen[str], timeout: float) -> Completed:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        processes = descendants(proc.pid)
        out = None
        try:
            out = ask_where(proc)
        except Exception:  # a diagnostic must never hide the timeout itself
            pass
        finally:
            kill_group(proc)
        if out is None:
            out, _ = proc.communicate()
        raise MPIRunTimeout(timeout, out or "", processes) from None
    except BaseException:  # a caller's own timeout (pytest-timeout's), ^C: the job goes too
        kill_group(proc)
        raise
    finally:
        _release(proc)
    return Completed(proc.returncode, out or "")


def kill_group(proc: subprocess.Popen[str]) -> None:
    """SIGTERM the process group, then SIGKILL what is left; then remove its cpu groups."""
    try:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
                proc.wait(timeout=5)
                return
            except ProcessLookupError:
                return
            except subprocess.TimeoutExpired:
                continue
    finally:
        _release(proc)


def _release(proc: subprocess.Popen[str]) -> None:
    if isinstance(proc, MPIProcess):
        proc.release()


def run_mpi(ranks: int, args: list[str], timeout: float, cwd: str | None = None,
            ft: bool = False, throttle: Mapping[int, float] | Schedule | None = None) -> Completed:
    """Run ``python ARGS`` on ``ranks`` ranks; raises MPIRunTimeout after ``timeout`` seconds.
    ``throttle={rank: fraction}`` holds those ranks to a fraction of one core (a Schedule:
    shares that change during the run)."""
    return finish_mpi(start_mpi(ranks, args, ft, cwd, throttle), timeout)
