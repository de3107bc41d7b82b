"""The Session: every decision of a run, and nothing else (pure: no MPI, no clock, no I/O).

``Session.handle(event)`` is the one entry point, as Dask's ``handle_stimulus``: it takes an
event (``events.py``) and returns the instructions that follow from it, which an executor (the
MPI master, or the simulator) carries out in order. The Session owns the iteration lifecycle,
decoding, purges and their hold-back, partial work (``pieces.py``), deaths and re-coding,
timeouts, the job stream, theta, the loss's pipelining, checkpoints and the shutdown. A run fed
the same events gives the same instructions, which is what ``mpicoded.replay`` checks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..codes import Code
from . import relay
from .ending import Ending
from .events import (
    Assign,
    Begin,
    Decoded,
    Event,
    Instruction,
    Iterate,
    JobArrived,
    LossComputed,
    PartArrived,
    Place,
    ProgressReported,
    Purge,
    ResultArrived,
    Settle,
    Started,
    StopAcknowledged,
    Target,
    Tick,
    TraceArrived,
    WakeAt,
    Withheld,
    WorkerFailed,
    WorkerLost,
)
from .losses import Losses
from .pieces import Give, PieceWork
from .piecetable import PieceTable
from .ranks import WorkerRanks
from .reduction import Reduction
from .round import Round
from .settings import Settings
from .stream import Stream
from .trees import tree


class Session:
    """A run's brain: events in, instructions out (see the module's docstring)."""

    def __init__(self, settings: Settings) -> None:
        s = self.settings = settings
        self.code, self.work, self.splitter = s.code, s.work, s.splitter
        self.tolerance, self.chunk_rows, self.run_rows = s.tolerance, s.chunk_rows, s.run_rows
        self.ranks = WorkerRanks.first(s.code.n_workers)
        self.epoch = 0
        self.live = set(range(s.code.n_workers))
        self._cut(s.pieces)
        self.round: Round | None = None
        self.held: list[Purge] = []  # the last decode's purges, not sent yet
        self.stale_results = 0  # since the last record (they go into the next one)
        self.totals: dict[str, float] = dict.fromkeys(
            ("results_received", "stale_results", "purged_tasks", "messages", "iterations",
             "failed_workers"), 0)
        self.recodes = self.withheld_tasks = 0
        self.handed: dict[int, int] = {}  # world rank -> pieces of its share given to others
        self.stream = Stream(self, s)
        self.ending = Ending(self)
        self.losses = Losses(self)
        self.reduction = Reduction(self)
        self._handlers: dict[type, Callable[[Any], list[Instruction]]] = {
            Begin: self._begin, Started: self.stream.started, JobArrived: self.stream.arrived,
            ResultArrived: self._result, PartArrived: self.reduction.part,
            ProgressReported: self._progress,
            TraceArrived: lambda e: [], Withheld: self._withheld, WorkerLost: self.losses.lost,
            WorkerFailed: self.ending.failed, Tick: self._tick,
            StopAcknowledged: self.ending.acknowledged, LossComputed: self.stream.loss,
        }

    def handle(self, event: Event) -> list[Instruction]:
        """What to do about ``event``: the one entry for everything that happens to a run."""
        try:
            handler = self._handlers[type(event)]
        except KeyError:
            raise TypeError(f"{event!r} is not an event of a Session") from None
        rnd = self.round
        wake = None if rnd is None else rnd.alarm
        return self._watch(handler(event), rnd, wake, isinstance(event, Tick))

    def _watch(self, out: list[Instruction], before: Round | None, wake: float | None,
               ticked: bool) -> list[Instruction]:
        """``out``, and a WakeAt if the open round has an alarm (``Round.alarm``: idle
        workers wait on a holder, ``PieceWork.hand_over``; or a relayed θ may not have
        reached everyone) and no Tick asked for will come by then: the alarm is new, the Tick
        asked for came, or a later WakeAt replaces it (the latest replaces the others, so it
        asks for the earliest of all, timeouts included)."""
        rnd = self.round
        alarm = None if rnd is None or rnd.done else rnd.alarm
        if rnd is None or alarm is None:
            return out
        wakes = [i.at for i in out if isinstance(i, WakeAt)]
        if (wakes and wakes[-1] <= alarm) or not (
                wakes or ticked or rnd is not before or alarm != wake):
            return out
        return [*out, self.losses.wake(rnd, alarm)]

    # ---- the code and its placement ----------------------------------------------------------

    def _cut(self, pieces: Code | None) -> None:
        self.pieces = pieces
        self.table = None if pieces is None else PieceTable.of(pieces)
        self.piecework = None if self.table is None or pieces is None else PieceWork(
            pieces, self.table)

    @property
    def decoding(self) -> Code:
        """The code the decoder runs: the pieces under partial work, else the code."""
        return self.pieces if self.pieces is not None else self.code

    def placement(self) -> Sequence[Sequence[int]]:
        """Which tasks' data each worker holds: its schedule, or every task for an adaptive
        split (which moves tasks between workers every iteration)."""
        if self.splitter is None:
            return self.code.schedule
        if self.splitter.kind == "adaptive":
            return [range(self.code.n_tasks)] * self.code.n_workers
        return self.splitter.schedule()

    def place(self, placement: Sequence[Sequence[int]] | None = None) -> Place:
        """Set-ups for every living worker, of the tasks ``placement`` (default: ``placement()``)
        gives it."""
        chosen = self.placement() if placement is None else placement
        ranks = self.ranks
        targets = tuple(Target(ranks.rank(w), ranks.world(ranks.rank(w)), w,
                               tuple(int(t) for t in chosen[w])) for w in sorted(self.live))
        adaptive = self.splitter is not None and self.splitter.kind == "adaptive"
        return Place(self.epoch, targets, self.code, self.pieces, self.work, self.chunk_rows,
                     report_progress=adaptive, run_rows=self.run_rows,
                     keep=self.settings.reduce,
                     runs_within=self.pieces is not None and self.tolerance > 0)

    def _begin(self, event: Begin) -> list[Instruction]:
        """Place the data. After a failover (``adopt``: the survivors' ranks by world rank, the
        epoch of their set-ups, whether that was a re-code's) the workers hold theirs already:
        the dead are lost, and only a re-code or a load split moved by the deaths places again."""
        adopt = self.settings.adopt
        out: list[Instruction] = []
        if adopt is None:
            out.append(self.place())
        else:
            survivors, self.epoch, recode = adopt
            self.ranks = WorkerRanks.adopted(self.code.n_workers, survivors)
            for w, rank in enumerate(self.ranks):
                if rank < 0:
                    self.live.discard(w)
                    self.totals["failed_workers"] += 1
                    if self.splitter is not None:
                        self.splitter.exclude(w)
            if recode:
                out += self.losses.recode("taken over from a re-coded run")
            elif self.splitter is not None and self.splitter.kind != "adaptive":
                out.append(self.place(self.splitter.schedule()))
        return [*out, Settle(sync_clocks=self.settings.trace)]

    # ---- rounds ------------------------------------------------------------------------------

    def open(self, job: int, iteration: int, now: float, theta: np.ndarray) -> list[Instruction]:
        """Send (job, iteration) out on the split's schedule (or the code's), re-coding first if
        the living cannot decode it. The last decode's purges go first, to the workers that get
        no ITERATE now: for the others the ITERATE supersedes them."""
        held = self.release_purges()
        previous = self.round
        code = self.decoding
        schedule = self.splitter.schedule() if self.splitter is not None else code.schedule
        piecework = self.piecework
        quiet = piecework.quiet(self.live) if piecework is not None else frozenset()
        outstanding = {w: set(schedule[w]) for w in self.live
                       if schedule[w] and w not in quiet}
        rnd = Round(job, iteration, self.epoch, now, code.decoder(self.tolerance), outstanding,
                    log=[] if self.settings.reduce else None)
        self.round = rnd
        lists = {w: tuple(schedule[w]) for w in outstanding}
        if piecework is not None:
            piecework.open(rnd, schedule, quiet, self.live)
            lists = {w: tuple(tasks) for w, tasks in rnd.lists.items()}
        if len(self.live) < code.n_workers and not self._decodable():
            self.round = None  # nothing of it was sent
            return [*held, *self.losses.recode("workers died", now, (job, iteration, theta))]
        rank = self.ranks.rank
        out: list[Instruction] = [p for p in held if self.ranks.index(p.rank) not in outstanding]
        if self.settings.relay and len(outstanding) >= 3:
            shape = tree([rank(w) for w in relay.order(sorted(outstanding), previous)],
                         self.settings.nodes)
            rnd.relay = tuple((r, parent) for r, (parent, _) in shape.items())
            rnd.relay_lists = {rank(w): lists[w] for w in outstanding}
            rnd.relay_due = relay.due(now, previous)
        out.append(Iterate(job, iteration, self.epoch,
                           tuple((rank(w), lists[w]) for w in sorted(outstanding)), theta,
                           rnd.relay))
        timeout = self.settings.iteration_timeout
        if timeout is not None or rnd.relay_due is not None:
            out.append(self.losses.wake(rnd, now + timeout if timeout is not None
                                        else float("inf")))
        return out

    def _decodable(self) -> bool:
        rnd = self.round
        assert rnd is not None
        if self.piecework is not None:
            return self.piecework.could_finish(rnd, self.live)
        return rnd.decodable(self.decoding, self.tolerance, self.live)

    def release_purges(self) -> list[Purge]:
        """The last decode's purges, for the living, now."""
        live = {self.ranks.rank(w) for w in self.live}
        held, self.held = [p for p in self.held if p.rank in live], []
        return held

    def _stale(self, count: int) -> list[Instruction]:
        self.stale_results += count
        self.totals["stale_results"] += count
        return []

    def _result(self, event: ResultArrived) -> list[Instruction]:
        """A RESULT: decode if it completes the target (then purge the rest and go on). Results
        of another iteration, of an abandoned epoch or from a worker lost are stale."""
        worker = self.ranks.index(event.rank)
        if worker is None:  # a worker the current code no longer has
            return self._stale(len(event.tasks))
        rnd = self.round
        stale = (rnd is None or rnd.done or (event.job, event.iteration, event.epoch) != rnd.key
                 or worker not in self.live)
        if self.piecework is not None:
            self.piecework.heard_from(worker, not stale, event.tasks, event.now)
        if stale:
            if (rnd is not None and rnd.reducing is not None and worker in self.live
                    and rnd.log is not None and (event.job, event.iteration, event.epoch)
                    == rnd.key):  # its values may stand in for a dead contributor's
                rnd.log.append((worker, event.tasks, event.runs))
            return self._stale(len(event.tasks))
        assert rnd is not None
        self.totals["messages"] += 1
        self.totals["results_received"] += len(event.tasks)
        if rnd.take(worker, event.tasks, event.values, event.now, event.runs):
            return self._decoded(rnd, event.now)
        if self.piecework is not None:
            gives, recode = self.piecework.on_result(rnd, worker, event.tasks, self.live,
                                                     event.now)
            if recode:
                return self.losses.recode("every result is in and the code cannot decode them",
                                   event.now)
            return self._gives(gives)
        if rnd.exhausted(worker):
            return self.losses.recode("every result is in and the code cannot decode them",
                                      event.now)
        return []

    def _gives(self, gives: list[Give]) -> list[Instruction]:
        rnd = self.round
        assert rnd is not None
        out: list[Instruction] = []
        for g in gives:
            rank = self.ranks.rank(g.worker)
            if g.fresh:
                out.append(Iterate(rnd.job, rnd.iteration, self.epoch, ((rank, g.tasks),),
                                   self.stream.theta))
            else:
                out.append(Assign(rank, rnd.job, rnd.iteration, self.epoch, g.tasks))
        return out

    def _decoded(self, rnd: Round, now: float) -> list[Instruction]:
        """The round decoded: purges held for the workers with work left, theta stepped, the
        load split told, and the stream goes on."""
        record, owing = rnd.close(now, self.decoding, self.settings.purge, self.stale_results)
        if self.piecework is not None:
            self.piecework.decoded(rnd, now)
        self.stale_results = 0
        self.totals["purged_tasks"] += record.purged_tasks
        self.totals["iterations"] += 1
        for w, pieces in rnd.handed().items():  # by world rank, as the trace names workers
            rank = self.ranks.world(self.ranks.rank(w))
            self.handed[rank] = self.handed.get(rank, 0) + pieces
        self.held = [Purge(self.ranks.rank(w), rnd.job, rnd.iteration, rnd.epoch)
                     for w in owing]
        dec = rnd.decoder
        if self.splitter is not None:
            assert rnd.decoded_at is not None
            self.splitter.observe(rnd.arrivals, rnd.decoded_at, rnd.key)
        out: list[Instruction] = [Decoded(rnd.job, rnd.iteration, rnd.epoch,
                                          frozenset(dec.used))]
        if rnd.log is not None:  # the workers hold the values: they add them up
            return out + self.reduction.begin(rnd, record, dec.missing_partitions, now)
        result = dec.result() if dec.values else None
        return out + self.stream.decoded(record, result, dec.missing_partitions, now)

    def _tick(self, event: Tick) -> list[Instruction]:
        """The clock: silent workers are lost (``Losses.tick``); idle workers that waited on
        a holder look again once one is overdue."""
        rnd, work = self.round, self.piecework
        if rnd is not None and rnd.reducing is not None:
            self.stream.clock = max(self.stream.clock, event.now)
            return self.reduction.tick(rnd, event.now)
        out = self.losses.tick(event)
        rnd = self.round
        if (rnd is not None and not rnd.done and rnd.relay_due is not None
                and event.now >= rnd.relay_due):  # the ranks still silent: θ directly
            rnd.relay_due = None
            out += relay.resend(self, rnd, [r for r, _ in rnd.relay])
        if (rnd is not None and not rnd.done and work is not None and rnd.wake is not None
                and event.now >= rnd.wake):
            out += self._gives(work.hand_over(rnd, self.live, event.now))
        return out

    def _progress(self, event: ProgressReported) -> list[Instruction]:
        worker = self.ranks.index(event.rank)
        if worker is not None and self.splitter is not None:
            self.splitter.partial(worker, event.fraction, event.seconds,
                                  (event.job, event.iteration, event.epoch))
        return []

    def _withheld(self, event: Withheld) -> list[Instruction]:
        self.withheld_tasks += len(event.tasks)
        return []

    def is_live(self, rank: int) -> bool:
        """Whether results from ``rank`` still count (a worker of the code, not lost)."""
        worker = self.ranks.index(rank)
        return worker is not None and worker in self.live

    def describe(self) -> str:
        """One line on what the session waits for (a rank asked where it is: SIGUSR1)."""
        rnd = self.round
        if rnd is None:
            return f"epoch {self.epoch}: no iteration opened yet"
        dead = sorted(set(range(self.code.n_workers)) - self.live)
        return (f"epoch {self.epoch}, " + rnd.describe(self.piecework is not None,
                                                       self.decoding.n_tasks)
                + f"; lost workers {dead}")

