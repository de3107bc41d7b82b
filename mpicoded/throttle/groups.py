"""The cpu groups of one run (``Throttle``): made, joined before exec, following a schedule."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from .cleanup import GROUP_PREFIX, remove_groups, sweep_stale
from .controller import Controller, ThrottleError, find_controller
from .quota import check_fraction
from .schedule import Key, Schedule

CLOCK_POLL_S = 0.01  # how often a schedule's clock file is looked at until the run starts
END_POLL_S = 0.05  # and then for the run's end
RUN_END = b'{"record": "run"'  # the run record: the last line rank 0 writes to its metrics
TAIL_BYTES = 1 << 20  # more than a run record's line
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


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


def run_ended(clock: Path) -> bool:
    """Whether the last line of the metrics file ``clock`` is a run record, the last line rank
    0 writes: what a schedule times ends there, so that a slow rank's shutdown (MPI_Finalize
    under a 1 ms quota took minutes here) runs at its base share."""
    try:
        with clock.open("rb") as f:
            f.seek(max(0, clock.stat().st_size - TAIL_BYTES))
            lines = f.read().split(b"\n")
    except OSError:
        return False
    last = lines[-2] if len(lines) > 1 and not lines[-1] else b""
    return last.startswith(RUN_END)


class Throttle:
    """The cpu groups of one run: ``create()`` (or ``with``) makes them, ``remove()`` undoes it.

    ``fractions`` maps ranks (ints) or names (hosts, ``"h1"``) to a share of one core. The paths
    are known before ``create()``, so a command can be built first.

    One parent group ``mpicoded-<pid>-<random>`` at the root of the cpu hierarchy holds a child
    group per throttled rank (``rank<N>``) or host (``h<i>``). A process joins its group before
    it execs (``join_command``), so it is throttled from its first instruction. The quota is
    enforced every 20 ms, so a throttled rank still answers within tens of milliseconds. Needs
    root.
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
            while True:
                if schedule.clock is not None and run_ended(Path(schedule.clock)):
                    apply(-1.0)  # the base shares again once the run is over
                    return
                now = time.monotonic() - start
                when = schedule.next_change(now)
                waits = [when - now] if when is not None else []
                if schedule.clock is not None:
                    waits.append(END_POLL_S)
                if not waits:
                    return
                if self._stop.wait(max(0.0, min(waits))):
                    return
                apply(time.monotonic() - start)

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
