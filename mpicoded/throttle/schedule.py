"""``--throttle`` specs: shares of a core over time for ranks or hosts, checked and parsed."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from ..delays import keyed_uniform, moving_choice
from .quota import MIN_FRACTION, check_fraction

Key = int | str  # a rank number (group rank<N>) or a name such as a host h1 (group h1)


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
    every period a different seeded random one of ``workers`` (``delays.moving_choice``), and
    short random ``stalls`` (probability, period, least and most slowdown, seed): every period
    each worker is, with that probability, that many times slower than its share. None of
    these: ``static``, fixed quotas. Windows and the moving straggler
    are timed by a ``clock`` that starts at the launch, or (a path) once that file is not
    empty: a run's metrics file, whose first line rank 0 writes as the first iteration starts,
    so that a rank at a thousandth of a core is not also slow to start Python."""

    base: Mapping[Key, float]
    windows: tuple[tuple[Key, float, float, float], ...] = ()
    moving: tuple[float, float, int] | None = None
    workers: tuple[Key, ...] = ()
    clock: str | None = None
    stalls: tuple[float, float, float, float, int] | None = None

    @property
    def static(self) -> bool:
        return not self.windows and self.moving is None and self.stalls is None

    @property
    def keys(self) -> list[Key]:
        """Every rank or host the schedule ever limits (each gets a group)."""
        moving = set(self.workers) if self.moving is not None or self.stalls else set()
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
        if self.stalls is not None and t >= 0:
            for key, slowdown in self.stalled(t).items():
                out[key] = max((out[key] or 1.0) / slowdown, MIN_FRACTION)
        return out

    def stalled(self, t: float) -> dict[Key, float]:
        """The workers stalled in the period of time ``t``, and how many times slower."""
        assert self.stalls is not None
        probability, period, low, high, seed = self.stalls
        block = math.floor(t / period + 1e-9)  # a change time computed as k * period is in k
        draws = keyed_uniform(seed, 104729, block, np.arange(len(self.workers)))
        sizes = keyed_uniform(seed, 130363, block, np.arange(len(self.workers)))
        return {key: low + (high - low) * float(size)
                for key, draw, size in zip(self.workers, draws, sizes, strict=True)
                if draw < probability}

    def next_change(self, t: float) -> float | None:
        """The first time after ``t`` at which a share may change, or None."""
        times = [edge for _, _, start, end in self.windows for edge in (start, end)
                 if t < edge < math.inf]
        for period in [p[1] for p in (self.moving, self.stalls) if p is not None]:
            times.append((math.floor(t / period) + 1) * period)
        return min(times) if times else None


def parse_schedule(spec: str, ranks: int) -> Schedule:
    """``--throttle`` for ranks: comma-separated ``RANK=FRACTION`` (throughout),
    ``RANK=FRACTION@START-END`` (seconds from the launch; no END: to the end of the run),
    ``workers=FRACTION`` (every worker
    rank 1..ranks-1, as machines of one size) and ``move=FRACTION/PERIOD[/SEED]`` (a moving
    straggler among the workers) and ``stalls=PROBABILITY/PERIOD/LOW-HIGH[/SEED]`` (short random
    stalls of the workers) and ``trace=FILE`` (slowdowns recorded over time, ``read_trace``);
    ValueError naming the bad item."""
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
    form = (f"expected {what}=FRACTION, {what}=FRACTION@START-END, workers=FRACTION, "
            f"move=FRACTION/PERIOD[/SEED], stalls=PROBABILITY/PERIOD/LOW-HIGH[/SEED] or "
            f"trace=FILE, e.g. {example}")
    base: dict[Key, float] = {}
    windows: list[tuple[Key, float, float, float]] = []
    moving: tuple[float, float, int] | None = None
    stalls: tuple[float, float, float, float, int] | None = None
    every: float | None = None
    traced: list[tuple[Key, float, float, float]] = []  # (key, slowdown, start, end)
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
            if name == "stalls":
                stalls = parse_stalls(value)
                continue
            if name == "workers":
                every = check_fraction(float(value), item)
                continue
            if name == "trace":
                traced += read_trace(value, key_of)
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
    windows += [(key, max(base.get(key, 1.0) / slowdown, MIN_FRACTION), start, end)
                for key, slowdown, start, end in traced]
    if moving is not None and len(workers) < 2:
        raise ValueError(f"--throttle move=...: a moving straggler needs two workers or more, "
                         f"got {len(workers)}")
    return Schedule(base, tuple(windows), moving, workers, stalls=stalls)


def parse_stalls(value: str) -> tuple[float, float, float, float, int]:
    """``PROBABILITY/PERIOD/LOW-HIGH[/SEED]``: ValueError unless 0 < probability <= 1, the
    period is positive and 1 <= LOW <= HIGH."""
    parts = value.split("/")
    if len(parts) not in (3, 4):
        raise ValueError
    probability, period = float(parts[0]), float(parts[1])
    low, dash, high = parts[2].partition("-")
    least, most = float(low), float(high) if dash else float(low)
    if not (0 < probability <= 1 and period > 0 and 1 <= least <= most):
        raise ValueError
    return probability, period, least, most, int(parts[3]) if len(parts) == 4 else 0


def read_trace(path: str, key_of: Callable[[str, str], Key]) -> list[tuple[Key, float, float, float]]:
    """A trace of slowdowns (``trace=FILE``), as (key, slowdown, start, end) windows: a CSV
    whose header is ``seconds`` and then ranks (or hosts), and whose rows are a time (seconds
    from the clock's start, increasing) and each one's slowdown from then to the next row's
    time (the last row: to the end); 1 is its base share, 20 twenty times slower. ValueError
    naming the file and the line at fault."""
    item = f"trace={path}"
    try:
        with open(path, encoding="utf-8") as f:
            lines = [(n, line.strip()) for n, line in enumerate(f, 1)
                     if line.strip() and not line.startswith("#")]
    except OSError as exc:
        raise ValueError(f"--throttle {item!r}: {exc.strerror}") from None
    if not lines or lines[0][1].split(",")[0].strip() != "seconds":
        raise ValueError(f"--throttle {item!r}: the first line must be seconds,RANK,RANK,...")
    keys = [key_of(name.strip(), item) for name in lines[0][1].split(",")[1:]]
    rows: list[tuple[float, list[float]]] = []
    for number, line in lines[1:]:
        values = line.split(",")
        try:
            start, slowdowns = float(values[0]), [float(v) for v in values[1:]]
        except ValueError:
            raise ValueError(f"--throttle {item!r}: line {number}: not numbers") from None
        if len(slowdowns) != len(keys) or min(slowdowns, default=0) < 1 or (
                rows and not start > rows[-1][0]) or start < 0:
            raise ValueError(f"--throttle {item!r}: line {number}: a time after the line "
                             f"before's, then {len(keys)} slowdowns >= 1")
        rows.append((start, slowdowns))
    ends = [start for start, _ in rows[1:]] + [math.inf]
    return [(key, slowdown, start, end) for (start, slowdowns), end in zip(rows, ends, strict=True)
            for key, slowdown in zip(keys, slowdowns, strict=True) if slowdown > 1]
