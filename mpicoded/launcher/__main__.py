"""``python -m mpicoded.launcher [-n RANKS] [--ft] [--throttle SPEC] [--] ARGS...``: mpirun in
the foreground (behind ``launch/local.sh``), exiting with its status."""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..host import STARTED_ENV
from ..throttle.controller import ThrottleError
from ..throttle.groups import Throttle
from ..throttle.schedule import Schedule, parse_schedule
from .command import mpi_env, mpirun_command
from .process import throttle_groups
from .watch import START_RETRIES, StartWatch, death_in_start, marks_start, restart_note

USAGE = """\
usage: python -m mpicoded.launcher [-n RANKS] [--ft] [--throttle RANK=FRACTION[,...]] [--] ARGS...

Runs mpirun -n RANKS python ARGS (e.g. ARGS = -m mpicoded.train --iterations 20) in the
foreground, with --oversubscribe when RANKS exceeds the cores, one BLAS thread a rank, and Open
MPI allowed to run as root when you are root; exits with mpirun's status.
  -n RANKS          ranks, the master (rank 0) included (default 21)
  --ft              Open MPI's ULFM with its heartbeat detector: the job survives dead ranks
  --throttle SPEC   RANK=FRACTION[,...]: run those ranks under a CPU quota of FRACTION of one
                    core (a real slow machine; needs root and a cgroup cpu controller);
                    RANK=FRACTION@START-END: only from START to END seconds after the launch;
                    workers=FRACTION: every worker rank (machines of one size);
                    move=FRACTION/PERIOD[/SEED]: every PERIOD seconds a different seeded
                    random worker at FRACTION (a moving straggler);
                    stalls=PROBABILITY/PERIOD/LOW-HIGH[/SEED]: every PERIOD seconds each
                    worker, with PROBABILITY, LOW to HIGH times slower (short random stalls)
"""


@dataclass(frozen=True)
class LaunchOptions:
    """What ``python -m mpicoded.launcher`` was asked to run."""

    ranks: int
    ft: bool
    throttle: Schedule | None
    args: list[str]


def parse_cli(argv: Sequence[str]) -> LaunchOptions | None:
    """Launcher options up to ``--`` or the first other argument; the rest is Python's.
    None for ``--help``; ValueError with a one-line message for a bad option."""
    ranks, ft, spec = 21, False, None
    rest = list(argv)
    while rest:
        arg = rest[0]
        if arg in ("-h", "--help"):
            return None
        if arg == "--":
            rest.pop(0)
            break
        if arg == "--ft":
            ft = True
            rest.pop(0)
        elif arg in ("-n", "--throttle") or arg.startswith("--throttle="):
            name, _, value = arg.partition("=")
            rest.pop(0)
            if not value:
                if not rest:
                    raise ValueError(f"{name} needs a value")
                value = rest.pop(0)
            if name == "-n":
                if not value.isdigit() or int(value) < 1:
                    raise ValueError(f"-n {value!r}: expected a number of ranks >= 1")
                ranks = int(value)
            else:
                spec = value
        else:
            break
    if not rest:
        raise ValueError("no program: give Python's arguments, e.g. -m mpicoded.train")
    throttle = parse_schedule(spec, ranks) if spec is not None else None
    return LaunchOptions(ranks, ft, throttle, rest)


def main(argv: Sequence[str] | None = None) -> int:
    """Run mpirun in the foreground (same session: Ctrl-C reaches it from the terminal), forward
    SIGTERM to it, remove the cpu groups whatever happens, exit with its status."""
    try:
        options = parse_cli(sys.argv[1:] if argv is None else argv)
        if options is None:
            print(USAGE, end="")
            return 0
        groups = throttle_groups(options.throttle, options.ranks)
        cmd = mpirun_command(options.ranks, options.args, options.ft, groups)
        return _foreground(cmd, groups, options.ft and marks_start(options.args))
    except (ValueError, ThrottleError) as exc:
        print(f"mpicoded.launcher: error: {exc}", file=sys.stderr)
        return 2


def _foreground(cmd: list[str], groups: Throttle | None, watched: bool = False) -> int:
    """mpirun's exit status (128 + N if signal N ended it); the groups are removed in any case.
    ``watched``: a job a rank of which died in MPI's start-up is started again (StartWatch)."""
    proc: subprocess.Popen[bytes] | None = None
    stopping = threading.Event()  # asked to stop: never start the job again

    def forward(sig: int, frame: object) -> None:
        stopping.set()
        if proc is None:
            raise SystemExit(128 + sig)  # not started yet: stop here (the groups are removed)
        if sig == signal.SIGTERM:
            proc.send_signal(sig)

    # Python-level handlers (reset to the default in mpirun at exec): Ctrl-C goes to mpirun from
    # the terminal, which aborts the job; this process keeps waiting for it.
    saved = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        if groups is not None:
            groups.create()
            groups.follow()
        for attempt in range(2, START_RETRIES + 3):
            with tempfile.TemporaryDirectory(prefix="mpicoded-start-") as started:
                env = {**mpi_env(), STARTED_ENV: started} if watched else mpi_env()
                proc = subprocess.Popen(cmd, env=env)
                watch = StartWatch(proc, Path(started)) if watched else None
                if watch is not None:
                    watch.start()
                code = proc.wait()
                died = None if watch is None else watch.stop()
            if died is None or stopping.is_set():
                break
            retry = attempt <= START_RETRIES + 1
            print(restart_note(death_in_start(died), attempt, retry), file=sys.stderr, flush=True)
            if not retry:
                code = code or 1
                break
    finally:
        try:
            if groups is not None:
                groups.remove()
        finally:
            for sig, handler in saved.items():
                signal.signal(sig, handler)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
