"""Real slow ranks: run chosen MPI ranks (or whole hosts) under a CPU quota, via cgroups.

Injected delays make runs comparable; a rank held to a fraction of one core is a genuinely slow
machine, nothing injected, which is what shows that purging interrupts real computation.
No MPI here: the launcher (``--throttle RANK=FRACTION``) and ``launch/netns-cluster.sh``
(``--throttle h1=FRACTION``) use it.

One parent group ``mpicoded-<pid>-<random>`` at the root of the cpu hierarchy holds a child group
per throttled rank (``rank<N>``) or host (``h<i>``). A process joins its group before it execs
(``join_command``), so it is throttled from its first instruction. The quota is enforced every
20 ms, so a throttled rank still answers within tens of milliseconds. Needs root.

    python -m mpicoded.throttle create --hosts 3 h1=0.25,h2=0.5   # prints the parent directory
    python -m mpicoded.throttle follow --hosts 3 DIR move=0.05/0.4  # the schedule, until SIGTERM
    python -m mpicoded.throttle remove DIR     # moves what is left out, removes the groups
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import math
import os
import re
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from .delays import moving_choice

PERIOD_US = 20_000  # a short period: a throttled process waits at most ~20 ms for its next slice
MIN_QUOTA_US = 1_000  # the kernel refuses a quota below 1 ms
MAX_PERIOD_US = 1_000_000  # and a period above 1 s
MIN_FRACTION = MIN_QUOTA_US / MAX_PERIOD_US
GROUP_PREFIX = "mpicoded-"
CLOCK_POLL_S = 0.01  # how often a schedule's clock file is looked at until the run starts
FOLLOW_POLL_S = 0.2  # how often ``follow`` looks whether it should end
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")

Key = int | str  # a rank number (group rank<N>) or a name such as a host h1 (group h1)


class ThrottleError(RuntimeError):
    """No usable cpu controller (not root, none mounted or writable), or a group operation failed."""


def check_fraction(fraction: float, item: str) -> float:
    """``fraction`` of one core, in [0.001, 1] (a 1 ms quota in the longest, 1 s, period)."""
    if not (math.isfinite(fraction) and MIN_FRACTION <= fraction <= 1):
        raise ValueError(f"--throttle {item!r}: FRACTION must be a share of one core in "
                         f"[{MIN_FRACTION:g}, 1], got {fraction:g}")
    return float(fraction)


def check_rank_throttle(throttle: Mapping[int, float | None] | Mapping[Key, float | None],
                        ranks: int) -> dict[int, float | None]:
    """Every throttled rank in 0..ranks-1 (rank 0 is the master), every fraction in range (None:
    not limited for now, in a schedule)."""
    checked: dict[int, float | None] = {}
    for rank, fraction in throttle.items():
        item = f"{rank}={fraction}"
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < ranks:
            raise ValueError(f"--throttle {item!r}: rank {rank} is out of range: allowed "
                             f"0..{ranks - 1} on {ranks} ranks")
        checked[rank] = None if fraction is None else check_fraction(fraction, item)
    return checked


@dataclass(frozen=True)
class Schedule:
    """Shares of a core over time (seconds from the launch), for ranks (int keys) or hosts
    (``"h1"``): ``base`` throughout (a key not in it is not limited), ``windows`` (key, fraction,
    start, end) in force from start to end, and a ``moving`` straggler (fraction, period, seed):
    every period a different seeded random one of ``workers`` (``delays.moving_choice``). No
    windows and no moving straggler: ``static``, fixed quotas. Windows and the moving straggler
    are timed by a ``clock`` that starts at the launch, or (a path) once that file is not
    empty: a run's metrics file, whose first line rank 0 writes as the first iteration starts,
    so that a rank at a thousandth of a core is not also slow to start Python."""

    base: Mapping[Key, float]
    windows: tuple[tuple[Key, float, float, float], ...] = ()
    moving: tuple[float, float, int] | None = None
    workers: tuple[Key, ...] = ()
    clock: str | None = None

    @property
    def static(self) -> bool:
        return not self.windows and self.moving is None

    @property
    def keys(self) -> list[Key]:
        """Every rank or host the schedule ever limits (each gets a group)."""
        moving = set(self.workers) if self.moving is not None else set()
        return sorted(set(self.base) | {w[0] for w in self.windows} | moving,
                      key=lambda key: (str(type(key)), key))

    def moving_key(self, t: float) -> Key | None:
        """The moving straggler's rank (or host) at time ``t``, or None without one (or before
        the clock starts, t < 0)."""
        if self.moving is None or t < 0:
            return None
        _, period, seed = self.moving
        return self.workers[moving_choice(seed, len(self.workers), 0, int(t // period))]

    def at(self, t: float) -> dict[Key, float | None]:
        """Every key's share of a core at time ``t`` (None: not limited then; t < 0: before
        the clock starts, the base shares only)."""
        out: dict[Key, float | None] = {key: self.base.get(key) for key in self.keys}
        for key, fraction, start, end in self.windows:
            if start <= t < end:
                out[key] = fraction
        moving = self.moving_key(t)
        if moving is not None and self.moving is not None:
            out[moving] = self.moving[0]
        return out

    def next_change(self, t: float) -> float | None:
        """The first time after ``t`` at which a share may change, or None."""
        times = [edge for _, _, start, end in self.windows for edge in (start, end)
                 if t < edge < math.inf]
        if self.moving is not None:
            period = self.moving[1]
            times.append((math.floor(t / period) + 1) * period)
        return min(times) if times else None


def parse_schedule(spec: str, ranks: int) -> Schedule:
    """``--throttle`` for ranks: comma-separated ``RANK=FRACTION`` (throughout),
    ``RANK=FRACTION@START-END`` (seconds from the launch; no END: to the end of the run),
    ``workers=FRACTION`` (every worker
    rank 1..ranks-1, as machines of one size) and ``move=FRACTION/PERIOD[/SEED]`` (a moving
    straggler among the workers); ValueError naming the bad item."""
    def rank(name: str, item: str) -> Key:
        if not name.isdigit():
            raise ValueError(f"--throttle {item!r}: RANK must be a rank number 0..{ranks - 1}")
        if int(name) >= ranks:
            raise ValueError(f"--throttle {item!r}: rank {name} is out of range: allowed "
                             f"0..{ranks - 1} on {ranks} ranks")
        return int(name)

    return _parse(spec, rank, tuple(range(1, ranks)), "RANK", "2=0.25")


def parse_host_schedule(spec: str, hosts: int) -> Schedule:
    """``--throttle`` for the hosts h0..h{hosts-1} of ``launch/netns-cluster.sh``: as for ranks
    (``HOST=FRACTION``, ``HOST=FRACTION@START-END``, ``move=...``), where the workers are every
    host but h0 (which runs mpirun and the master); a host's daemon and ranks share its quota."""
    names = [f"h{i}" for i in range(hosts)]

    def host(name: str, item: str) -> Key:
        if name not in names:
            raise ValueError(f"--throttle {item!r}: no host {name!r}: the hosts are "
                             f"h0..h{hosts - 1}")
        return name

    return _parse(spec, host, tuple(names[1:]), "HOST", "h1=0.25")


def _parse(spec: str, key_of: Callable[[str, str], Key], workers: tuple[Key, ...],
           what: str, example: str) -> Schedule:
    """The schedule of ``spec``: ``key_of(name, item)`` turns a name into a rank or host (or a
    ValueError that says why); ``workers=`` and ``move=`` range over ``workers``."""
    form = (f"expected {what}=FRACTION, {what}=FRACTION@START-END, workers=FRACTION or "
            f"move=FRACTION/PERIOD[/SEED], e.g. {example}")
    base: dict[Key, float] = {}
    windows: list[tuple[Key, float, float, float]] = []
    moving: tuple[float, float, int] | None = None
    every: float | None = None
    for raw in spec.split(","):
        item = raw.strip()
        name, sep, value = (part.strip() for part in item.partition("="))
        try:
            if not sep or not value:
                raise ValueError
            if name == "move":
                parts = value.split("/")
                if len(parts) not in (2, 3):
                    raise ValueError
                fraction, period = float(parts[0]), float(parts[1])
                if not period > 0:
                    raise ValueError
                moving = (check_fraction(fraction, item), period,
                          int(parts[2]) if len(parts) == 3 else 0)
                continue
            if name == "workers":
                every = check_fraction(float(value), item)
                continue
            key = key_of(name, item)
            share, at, window = value.partition("@")
            fraction = check_fraction(float(share), item)
            if at:
                start, dash, end = window.partition("-")
                until = float(end) if end.strip() else math.inf
                if not dash or not 0 <= float(start) < until:
                    raise ValueError
                windows.append((key, fraction, float(start), until))
            elif key in base:
                raise ValueError(f"--throttle {item!r}: {name} is throttled twice")
            else:
                base[key] = fraction
        except ValueError as exc:
            if str(exc).startswith("--throttle"):
                raise
            raise ValueError(f"--throttle {item!r}: {form}") from None
    if every is not None:
        base = {**dict.fromkeys(workers, every), **base}
    if moving is not None and len(workers) < 2:
        raise ValueError(f"--throttle move=...: a moving straggler needs two workers or more, "
                         f"got {len(workers)}")
    return Schedule(base, tuple(windows), moving, workers)


def quota_period(fraction: float) -> tuple[int, int]:
    """(quota, period) in microseconds for ``fraction`` of one core: a 20 ms period, stretched
    (up to 1 s) when the quota would fall below the kernel's 1 ms minimum."""
    check_fraction(fraction, f"FRACTION={fraction}")
    period = PERIOD_US
    quota = round(fraction * period)
    if quota < MIN_QUOTA_US:
        period = min(MAX_PERIOD_US, math.ceil(MIN_QUOTA_US / fraction))
        quota = max(MIN_QUOTA_US, round(fraction * period))
    return quota, period


def group_name(key: Key) -> str:
    """The child group of a rank (``rank2``) or of a named host (``h1``)."""
    if isinstance(key, int) and not isinstance(key, bool):
        return f"rank{key}"
    if isinstance(key, bool) or not _NAME.fullmatch(key) or key.isdigit():
        raise ValueError(f"--throttle: {key!r} is not a usable group name")
    return key


def join_command(procs_file: Path | str) -> list[str]:
    """The prefix that moves a process into a group, then execs the real command: the shell joins
    before Python starts, and a failed join fails the process instead of running it unthrottled."""
    return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(procs_file)]


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def controller_candidates(mounts: str) -> list[tuple[int, Path]]:
    """(version, mount point) of every cpu controller in a /proc/self/mounts text, cgroup v1
    first (on a hybrid host the cpu controller is bound to v1, and v2 lists no cpu)."""
    v1: list[tuple[int, Path]] = []
    v2: list[tuple[int, Path]] = []
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        point, fstype, options = Path(_unescape(fields[1])), fields[2], fields[3].split(",")
        if fstype == "cgroup" and "cpu" in options:
            v1.append((1, point))
        elif fstype == "cgroup2":
            v2.append((2, point))
    return v1 + v2


@dataclass(frozen=True)
class Controller:
    """A mounted, writable cpu controller: cgroup v1 (``cpu.cfs_quota_us``) or v2 (``cpu.max``)."""

    version: int
    root: Path

    def usable(self) -> bool:
        """Its quota file is there and the hierarchy is writable (root, mounted rw)."""
        if self.version == 1:
            found = (self.root / "cpu.cfs_quota_us").exists()
        else:
            try:
                found = "cpu" in (self.root / "cgroup.controllers").read_text().split()
            except OSError:
                found = False
        return found and os.access(self.root, os.W_OK)

    def enable(self, group: Path) -> None:
        """v2: give ``group``'s children a cpu.max (``+cpu`` in its ``cgroup.subtree_control``)."""
        if self.version == 2:
            control = group / "cgroup.subtree_control"
            if "cpu" not in control.read_text().split():
                control.write_text("+cpu")

    def limit(self, group: Path, fraction: float | None) -> None:
        """Hold ``group`` to ``fraction`` of one core (None: lift the limit)."""
        if fraction is None:
            if self.version == 1:
                (group / "cpu.cfs_quota_us").write_text("-1")
            else:
                (group / "cpu.max").write_text(f"max {PERIOD_US}")
            return
        quota, period = quota_period(fraction)
        if self.version == 1:
            (group / "cpu.cfs_period_us").write_text(str(period))
            (group / "cpu.cfs_quota_us").write_text(str(quota))
        else:
            (group / "cpu.max").write_text(f"{quota} {period}")


def find_controller(mounts: str | None = None) -> Controller:
    """The first usable cpu controller in /proc/self/mounts, or a one-line ThrottleError."""
    if os.geteuid() != 0:
        raise ThrottleError("--throttle needs root: it creates cpu cgroups")
    if mounts is None:
        mounts = Path("/proc/self/mounts").read_text()
    for version, point in controller_candidates(mounts):
        controller = Controller(version, point)
        if controller.usable():
            return controller
    raise ThrottleError("--throttle: no writable cgroup cpu controller is mounted (cgroup v1 "
                        "cpu.cfs_quota_us or cgroup v2 cpu.max)")



def _evacuate(group: Path, to: Path) -> None:
    """Move every process still in ``group`` to the procs file ``to``."""
    try:
        pids = (group / "cgroup.procs").read_text().split()
    except FileNotFoundError:
        return
    for pid in pids:
        try:
            to.write_text(pid)
        except OSError:  # gone already (ESRCH), or it shows up as EBUSY on rmdir below
            pass


def remove_groups(path: Path, controller: Controller, patience: float = 5.0) -> None:
    """Remove a parent group and its children, moving what still runs in them to the root group.
    Retries while exiting processes keep a group busy; ThrottleError if one is still there."""
    if not path.is_dir():
        return
    root_procs = controller.root / "cgroup.procs"
    failed: list[str] = []
    for group in [*(p for p in path.iterdir() if p.is_dir()), path]:
        deadline = time.monotonic() + patience
        while True:
            _evacuate(group, root_procs)
            try:
                group.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError as exc:
                if exc.errno == errno.EBUSY and time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                failed.append(f"{group}: {exc.strerror}")
                break
    if failed:
        raise ThrottleError(f"--throttle: could not remove {'; '.join(failed)}")


STALE_NAME = re.compile(rf"{GROUP_PREFIX}(\d+)-[0-9a-f]+")  # the default names: creator's pid


def _empty(group: Path) -> bool:
    """No process in ``group`` or its children."""
    for procs in [group / "cgroup.procs", *group.glob("*/cgroup.procs")]:
        with contextlib.suppress(FileNotFoundError):
            if procs.read_text().split():
                return False
    return True


def sweep_stale(controller: Controller) -> list[Path]:
    """Remove the groups that a process now gone made and never removed (a run killed with
    SIGKILL leaves its groups behind): those named after a PID that no longer exists, with no
    process left in them (a creator in another PID namespace looks gone; its ranks do not).
    Returns what was removed; a group that cannot be removed stays, silently."""
    removed = []
    for path in controller.root.glob(f"{GROUP_PREFIX}*"):
        match = STALE_NAME.fullmatch(path.name)
        if not (match and path.is_dir() and _empty(path)):
            continue
        try:
            os.kill(int(match.group(1)), 0)
            continue  # its maker still runs
        except ProcessLookupError:
            pass
        except PermissionError:  # someone else's, alive
            continue
        with contextlib.suppress(ThrottleError):
            remove_groups(path, controller, patience=0.5)
            removed.append(path)
    return removed


class Throttle:
    """The cpu groups of one run: ``create()`` (or ``with``) makes them, ``remove()`` undoes it.

    ``fractions`` maps ranks (ints) or names (hosts, ``"h1"``) to a share of one core. The paths
    are known before ``create()``, so a command can be built first.
    """

    def __init__(self, fractions: Mapping[int, float | None] | Mapping[str, float | None]
                 | Mapping[Key, float | None], controller: Controller | None = None,
                 name: str | None = None, schedule: Schedule | None = None) -> None:
        self.schedule = schedule  # shares that change over time (``follow``); None: fixed
        start: dict[Key, float | None] = (
            {key: f for key, f in fractions.items()} if schedule is None
            else schedule.at(0.0 if schedule.clock is None else -1.0))
        self.fractions: dict[Key, float | None] = {
            key: None if f is None else check_fraction(f, f"{key}={f}")
            for key, f in start.items()}
        self._stop = threading.Event()
        self._follower: threading.Thread | None = None
        self.names = {key: group_name(key) for key in self.fractions}
        self.controller = controller if controller is not None else find_controller()
        self.path = self.controller.root / (name or f"{GROUP_PREFIX}{os.getpid()}-"
                                            f"{secrets.token_hex(3)}")

    def group(self, key: Key) -> Path:
        """The directory of ``key``'s group."""
        return self.path / self.names[key]

    def procs_file(self, key: Key) -> Path:
        """Writing a PID here moves that process (all its threads) into ``key``'s group."""
        return self.group(key) / "cgroup.procs"

    def join_prefix(self, key: Key) -> list[str]:
        """The command prefix that starts a process inside ``key``'s group."""
        return join_command(self.procs_file(key))

    def create(self) -> Throttle:
        """Make the parent and one limited child per key (first removing groups that dead
        runs left); on failure nothing is left behind."""
        sweep_stale(self.controller)
        try:
            self.controller.enable(self.controller.root)
            self.path.mkdir()
            self.controller.enable(self.path)
            for key, fraction in self.fractions.items():
                self.group(key).mkdir()
                self.controller.limit(self.group(key), fraction)
        except OSError as exc:
            error = ThrottleError(f"--throttle: cannot set up {exc.filename or self.path}: "
                                  f"{exc.strerror}")
            with contextlib.suppress(ThrottleError):
                self.remove()
            raise error from exc
        return self

    def follow(self) -> None:
        """Apply the schedule's changes from now on (seconds counted from this call), in a
        daemon thread that ``remove`` stops."""
        if self.schedule is None or self.schedule.static or self._follower is not None:
            return
        schedule, start = self.schedule, time.monotonic()

        def run() -> None:
            nonlocal start
            shares = dict(self.fractions)

            def apply(when: float) -> None:
                for key, fraction in schedule.at(when).items():
                    if shares.get(key) != fraction:
                        with contextlib.suppress(OSError):  # the run may be ending
                            self.controller.limit(self.group(key), fraction)
                        shares[key] = fraction

            if schedule.clock is not None:  # the clock starts with the run's first line
                clock = Path(schedule.clock)
                while not (clock.exists() and clock.stat().st_size):
                    if self._stop.wait(CLOCK_POLL_S):
                        return
                start = time.monotonic()
                apply(0.0)
            while (when := schedule.next_change(time.monotonic() - start)) is not None:
                if self._stop.wait(max(0.0, when - (time.monotonic() - start))):
                    return
                apply(when)

        self._follower = threading.Thread(target=run, name="mpicoded-throttle", daemon=True)
        self._follower.start()

    def stop(self) -> None:
        """Stop following the schedule (``remove`` does it first)."""
        self._stop.set()
        if self._follower is not None:
            self._follower.join()

    def remove(self) -> None:
        """Stop following the schedule, move any process left in the groups to the root group
        and remove the groups."""
        self.stop()
        remove_groups(self.path, self.controller)

    def __enter__(self) -> Throttle:
        return self.create()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.remove()


def main(argv: Sequence[str] | None = None) -> int:
    """The host throttle of ``launch/netns-cluster.sh``: ``create`` prints the new parent group's
    directory, ``follow`` applies a schedule's changes to it until SIGTERM, ``remove`` ends it."""
    parser = argparse.ArgumentParser(prog="python -m mpicoded.throttle",
                                     description="cpu groups for the hosts h0..h{N-1}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, what in (("create", "make the groups and print their parent directory"),
                       ("follow", "apply the schedule's changes to DIR until SIGTERM or SIGINT"),
                       ("remove", "move what is left out of DIR and remove its groups")):
        command = sub.add_parser(name, help=what)
        if name != "create":
            command.add_argument("dir", metavar="DIR", type=Path)
        if name != "remove":
            command.add_argument("--hosts", type=int, required=True, help="hosts h0..h{N-1}")
            command.add_argument("spec", metavar="SPEC", help="HOST=FRACTION, "
                                 "HOST=FRACTION@START-END, workers=FRACTION, "
                                 "move=FRACTION/PERIOD[/SEED], comma-separated")
    args = parser.parse_args(argv)
    try:
        if args.command == "remove":
            controller = find_controller()
            held(args.dir, controller)
            remove_groups(args.dir, controller)
            return 0
        schedule = parse_host_schedule(args.spec, args.hosts)
        if args.command == "create":
            # outlives this process by design (``remove DIR`` ends it): not named after its PID,
            # so that no sweep takes it for a dead run's
            throttle = Throttle({}, name=f"{GROUP_PREFIX}held-{secrets.token_hex(3)}",
                                schedule=schedule).create()
            print(throttle.path)
            return 0
        controller = find_controller()
        held(args.dir, controller)
        if not schedule.static:
            stopped: list[int] = []  # a plain flag: an Event's lock could deadlock a handler
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda signum, _: stopped.append(signum))
            throttle = Throttle({}, controller=controller, name=args.dir.name,
                                schedule=schedule)
            parent = os.getppid()
            throttle.follow()
            # until told, or until the groups or the launching shell are gone (SIGKILLed)
            while not stopped and args.dir.is_dir() and os.getppid() == parent:
                time.sleep(FOLLOW_POLL_S)
            throttle.stop()
    except (ValueError, ThrottleError) as exc:
        print(f"mpicoded.throttle: error: {exc}", file=sys.stderr)
        return 2
    return 0


def held(path: Path, controller: Controller) -> None:
    """``path`` is a parent group this module made (ThrottleError if not)."""
    if path.parent != controller.root or not path.name.startswith(GROUP_PREFIX):
        raise ThrottleError(f"{path} is not a {GROUP_PREFIX}* group under {controller.root}")


if __name__ == "__main__":
    sys.exit(main())
