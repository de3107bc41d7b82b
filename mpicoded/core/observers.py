"""What watches a session (no MPI, no clock; output through the logger and the callables
given): each observer is called with every event and the instructions the Session gave for it,
by the MPI executor. The load split is not one of them: it decides schedules, so the Session
owns it."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence

from ..log import logger
from ..speeds import StragglerWatch
from .events import (
    Decoded,
    Event,
    Finish,
    Instruction,
    Iterate,
    JobDone,
    Log,
    Record,
    Report,
    ResultArrived,
    StopAcknowledged,
    TraceArrived,
    Withheld,
)
from .result import JobRecord
from .trace import TaskTrace

Observer = Callable[[Event, Sequence[Instruction]], None]
Write = Callable[[str], object]


class Observers:
    """Observers called in order."""

    def __init__(self, *observers: Observer | None) -> None:
        self.observers = [o for o in observers if o is not None]

    def __call__(self, event: Event, out: Sequence[Instruction]) -> None:
        for observer in self.observers:
            observer(event, out)


class Reports:
    """Each iteration's report to ``on_iteration(record, loss, theta)``, each job's to
    ``on_job``."""

    def __init__(self, on_iteration: Callable[..., object],
                 on_job: Callable[[JobRecord], object] | None = None) -> None:
        self.on_iteration, self.on_job = on_iteration, on_job

    def __call__(self, event: Event, out: Sequence[Instruction]) -> None:
        for i in out:
            if isinstance(i, Report):
                self.on_iteration(i.record, i.loss, i.theta)
            elif isinstance(i, JobDone) and self.on_job is not None:
                self.on_job(i.record)


def log_lines(event: Event, out: Sequence[Instruction]) -> None:
    """The session's words for the user, on the mpicoded logger."""
    for i in out:
        if isinstance(i, Log):
            logger.log(logging.getLevelName(i.level.upper()), "%s", i.text)


class Metrics:
    """Run events (start, failure, re-code) as lines of the metrics file, with the time."""

    def __init__(self, write: Write, clock: Callable[[], float]) -> None:
        self.write, self.clock = write, clock

    def __call__(self, event: Event, out: Sequence[Instruction]) -> None:
        for i in out:
            if isinstance(i, Record):
                self.write(json.dumps({**i.row, "at_s": round(self.clock(), 6)}) + "\n")


class Tracing:
    """The task trace (``--trace``): workers' entries joined with what the master made of each
    result, written to the metrics file after each report. ``world(rank)``: a rank's world rank;
    ``live(rank)``: whether its results still count."""

    def __init__(self, trace: TaskTrace, world: Callable[[int], int],
                 live: Callable[[int], bool], write: Write | None,
                 watch: StragglerWatch | None = None) -> None:
        self.trace, self.world, self.live, self.write = trace, world, live, write
        self.watch = watch  # told every record, and every iteration reported

    def __call__(self, event: Event, out: Sequence[Instruction]) -> None:
        trace = self.trace
        if isinstance(event, ResultArrived):
            if event.entries is not None:
                trace.add(self.world(event.rank) - 1, event.entries,
                          stale=not self.live(event.rank))
        elif isinstance(event, TraceArrived | StopAcknowledged):
            if event.entries is not None:
                trace.add(self.world(event.rank) - 1, event.entries)
        elif isinstance(event, Withheld):
            trace.withheld(self.world(event.rank) - 1, event.job, event.iteration, event.epoch,
                           event.tasks, event.now)
        for i in out:
            if isinstance(i, Iterate) and trace.open != (i.job, i.iteration, i.epoch):
                trace.opened(i.job, i.iteration, i.epoch)
            elif isinstance(i, Decoded):
                trace.decoded(i.used)
            elif isinstance(i, Report):
                self.flush()
                if self.watch is not None:
                    self.watch.iteration()
            elif isinstance(i, Finish):
                trace.close("stale")  # an iteration left open (none when the run ended well)
                self.flush()

    def flush(self) -> None:
        """The task records final so far, into the metrics file."""
        records = self.trace.take()
        if self.watch is not None:
            self.watch.add(records)
        if records and self.write is not None:
            self.write("".join(r.line() for r in records))

