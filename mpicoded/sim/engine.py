"""Discrete-event simulation: the runtime's own Session driven on a simulated clock.

The simulator is the Session's second executor. Every worker runs its task list back to back
from the round's start plus its communication delay: task i finishes at the sum of the delays of
its first i + 1 tasks, drawn from the same keyed stream the MPI workers use, so iteration t meets
the same delays in both. Results reach the master in time order; a purge, or the next ITERATE,
drops what a worker has left. Under partial work each piece is an event of its own, and an
ASSIGN replaces what is left of a worker's list. Records have the runtime's fields; times are
model time times the time scale.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections import deque
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ..balance.splitter import Splitter
from ..codes import Code
from ..core import events as ev
from ..core.piecetable import PieceTable
from ..core.result import IterationRecord
from ..core.session import Session
from ..core.settings import Settings
from ..core.shape import Shape
from ..delays import DelayModel
from ..stream import StreamTimes, genie_iteration_time, serve_in_order


@dataclass
class SimResult:
    """Per-iteration records, and how fast the simulation ran."""

    records: list[IterationRecord]
    events: int  # results the master processed
    task_events: int  # task completions simulated
    elapsed_s: float
    totals: dict[str, float] = field(default_factory=dict)
    jobs: StreamTimes | None = None  # for a stream: the jobs' start, departure and delay
    genie: StreamTimes | None = None  # the genie's lower bound on the same delays

    @property
    def events_per_s(self) -> float:
        """Task completions simulated per second."""
        return self.task_events / self.elapsed_s if self.elapsed_s else float("inf")

    def mean(self, metric: str) -> float:
        return float(np.mean([getattr(r, metric) for r in self.records]))


@dataclass(frozen=True)
class _Entries:
    """One schedule flattened: an entry per (worker, task) in execution order."""

    workers: np.ndarray
    tasks: np.ndarray
    slots: np.ndarray  # position in the worker's list
    first: np.ndarray  # index of the entry's worker's first entry
    last: np.ndarray  # index of the entry's worker's last entry


@lru_cache(maxsize=64)
def _entries(schedule: tuple[tuple[int, ...], ...]) -> _Entries:
    loads = np.array([len(ts) for ts in schedule])
    workers = np.repeat(np.arange(len(schedule)), loads)
    tasks = np.array([t for ts in schedule for t in ts], dtype=int)
    starts = np.concatenate([[0], np.cumsum(loads)[:-1]])
    first = np.repeat(starts, loads)
    return _Entries(workers, tasks, np.arange(len(tasks)) - first, first,
                    np.repeat(starts + loads - 1, loads))


class Simulator:
    """Simulates ``code`` under ``delay``; ``task_cost`` gives each task's work units."""

    def __init__(self, code: Code, delay: DelayModel, task_cost: np.ndarray | None = None,
                 tolerance: int = 0, splitter: Splitter | None = None) -> None:
        self.code, self.delay, self.tolerance, self.splitter = code, delay, tolerance, splitter
        cost = code.work_units if task_cost is None else np.asarray(task_cost)
        self.cost = cost.astype(np.float64)
        self.task_events = 0

    def finish_times(self, job: int, iteration: int,
                     schedule: tuple[tuple[int, ...], ...] | None = None) -> np.ndarray:
        """Model time at which each (worker, task) entry's result reaches the master, from the
        round's start."""
        e = _entries(self.code.schedule if schedule is None else schedule)
        delays = self.delay.task_delays(e.workers, job, iteration, e.slots, self.cost[e.tasks])
        done = np.cumsum(delays)
        done -= (done - delays)[e.first]  # restart the running sum at each worker's first task
        done += self.delay.iteration_shifts(e.workers)
        if self.code.messages == "single":  # one message once the worker's last task is done
            done = done[e.last]
        return done

    def run(self, iterations: int, job: int = 0) -> SimResult:
        return self.run_stream(np.zeros(1), iterations, genie=False, first_job=job)

    def run_stream(self, arrivals: np.ndarray, iterations: int, genie: bool = True,
                   first_job: int = 0) -> SimResult:
        """Jobs arriving at ``arrivals`` (model time), ``iterations`` each, served in order."""
        pieced = PieceTable.of(self.code) is not None
        settings = Settings(self.code, Shape(self.code, self.cost),
                            pieces=self.code if pieced else None, tolerance=self.tolerance,
                            iterations=iterations, jobs=first_job + len(arrivals),
                            resume=(first_job, 0, np.zeros(1)) if first_job else None,
                            loss_every=0, splitter=self.splitter)
        self.task_events = 0
        start = time.perf_counter()
        clock = SimClock(self, Session(settings), pieced)
        for j, at in enumerate(arrivals):
            clock.push(float(at), ev.JobArrived(first_job + j, float(at)))
        outcome = clock.run()
        elapsed = time.perf_counter() - start
        seconds = self.delay.seconds
        jobs = outcome.jobs
        times = StreamTimes(*(np.array([seconds(x) for x in xs]) for xs in (
            [j.start_s for j in jobs], [j.done_s for j in jobs],
            [j.in_order_delay_s for j in jobs])))
        genie_times = None
        if genie:
            services = [sum(seconds(genie_iteration_time(
                self.delay, self.code.n_workers, first_job + j, it, self.code.n_partitions))
                for it in range(iterations)) for j in range(len(arrivals))]
            genie_times = serve_in_order([seconds(a) for a in arrivals], services)
        records = [IterationRecord(**{**r.__dict__, "wall_s": seconds(r.wall_s)})
                   for r in outcome.records]
        return SimResult(records, clock.processed, self.task_events, elapsed, outcome.totals,
                         times, genie_times)


class SimClock:
    """The executor: feeds the session events in model-time order, and carries out its
    instructions on simulated workers (worker index = rank - 1: nobody dies here)."""

    def __init__(self, sim: Simulator, session: Session, pieced: bool) -> None:
        self.sim, self.session, self.pieced = sim, session, pieced
        self.heap: list[tuple[float, int, ev.Event | tuple[int, int, int]]] = []
        self.order = itertools.count()  # ties in time: first pushed, first served
        self.queue: deque[ev.Event] = deque()
        self.now = 0.0
        self.outcome: ev.Outcome | None = None
        self.processed = 0
        # whole task lists: the open round's results in time order, and where they are read
        self.batch: tuple[np.ndarray, np.ndarray, list[list[int]], tuple[int, int, int]] | None
        self.batch = None
        self.cursor = 0
        self.cut: set[int] = set()  # ranks whose remaining results were purged
        # pieces: each worker's list left, its slot (the delay's key), what is under way
        self.lists: dict[int, deque[int]] = {}
        self.slots: dict[int, int] = {}
        self.busy: set[int] = set()
        self.generation = itertools.count(1)
        self.gen: dict[int, int] = {}  # rank -> its list's generation: a piece of an older one
        self.key: tuple[int, int, int] | None = None  # the round the workers run

    def push(self, at: float, what: ev.Event | tuple[int, int, int]) -> None:
        heapq.heappush(self.heap, (at, next(self.order), what))

    def run(self) -> ev.Outcome:
        self.feed(ev.Begin())
        while self.outcome is None:
            batch_at = self.batch[0][self.cursor] if self.batch is not None else np.inf
            if self.heap and self.heap[0][0] < batch_at:
                self.now, _, what = heapq.heappop(self.heap)
                if isinstance(what, tuple):
                    self.piece_done(*what)
                else:
                    self.feed(what)
            elif self.batch is not None:
                self.next_result()
            else:
                raise RuntimeError(f"the simulation is stuck: {self.session.describe()}")
        return self.outcome

    def next_result(self) -> None:
        assert self.batch is not None
        times, ranks, tasks, key = self.batch
        i = self.cursor
        self.cursor += 1
        if self.cursor == len(times):
            self.batch = None
        rank = int(ranks[i])
        if rank in self.cut:
            return
        self.now = float(times[i])
        self.processed += 1
        self.feed(ev.ResultArrived(rank, *key, tasks[i], None, self.now))

    def feed(self, event: ev.Event) -> None:
        self.queue.append(event)
        while self.queue:
            for i in self.session.handle(self.queue.popleft()):
                self.perform(i)

    def perform(self, i: ev.Instruction) -> None:
        if isinstance(i, ev.Iterate):
            if self.pieced:
                self.iterate_pieces(i)
            else:
                self.iterate(i)
        elif isinstance(i, ev.Assign):
            self.lists[i.rank] = deque(i.tasks)
            self.start(i.rank, self.now)
        elif isinstance(i, ev.Purge):
            self.cut.add(i.rank)
            self.lists.pop(i.rank, None)
            self.busy.discard(i.rank)
            self.gen[i.rank] = next(self.generation)
        elif isinstance(i, ev.Reduce) and i.parent == 0:  # the workers' sum, at once
            self.queue.append(ev.PartArrived(i.rank, i.job, i.iteration, i.epoch, i.attempt,
                                             None, self.now))
        elif isinstance(i, ev.Settle):
            self.queue.append(ev.Started(self.now))
        elif isinstance(i, ev.Stop):
            self.queue.append(ev.StopAcknowledged(i.rank))
        elif isinstance(i, ev.ComputeLoss):
            self.queue.append(ev.LossComputed(i.job, i.iteration, None, self.now))
        elif isinstance(i, ev.WakeAt):
            self.push(i.at, ev.Tick(i.at))
        elif isinstance(i, ev.Finish):
            self.outcome = i.outcome

    def iterate(self, i: ev.Iterate) -> None:
        """A round of whole task lists: every result's time, at once."""
        sim = self.sim
        lists = dict(i.lists)
        schedule = tuple(lists.get(w + 1, ()) for w in range(sim.code.n_workers))
        e = _entries(schedule)
        done = sim.finish_times(i.job, i.iteration, schedule) + self.now
        sim.task_events += len(done)
        order = np.argsort(done, kind="stable")
        if sim.code.messages == "single":  # a worker's whole list arrives as one message
            order = order[e.last[order] == order]
            tasks = [list(schedule[int(e.workers[k])]) for k in order]
        else:
            tasks = [[int(e.tasks[k])] for k in order]
        self.batch = (done[order], e.workers[order] + 1, tasks, (i.job, i.iteration, i.epoch))
        self.cursor, self.cut = 0, set()
        if not len(order):
            self.batch = None

    def iterate_pieces(self, i: ev.Iterate) -> None:
        """Partial work: a round's lists (each worker from its communication delay on), or one
        worker's list of the open round (sent late: at once)."""
        key = (i.job, i.iteration, i.epoch)
        fresh = key != self.key
        if fresh:  # what the workers had under way is dropped
            self.key, self.slots, self.gen = key, {}, {}
            self.lists.clear()
            self.busy.clear()
        shifts = self.sim.delay.iteration_shifts(np.array([r - 1 for r, _ in i.lists]))
        for (rank, tasks), shift in zip(i.lists, shifts, strict=True):
            self.lists[rank] = deque(tasks)
            self.slots.setdefault(rank, 0)
            self.gen.setdefault(rank, next(self.generation))
            self.start(rank, self.now + (float(shift) if fresh else 0.0))

    def start(self, rank: int, at: float) -> None:
        """``rank`` begins its next piece, if it is idle and has one."""
        if rank in self.busy or not self.lists.get(rank):
            return
        assert self.key is not None
        task = self.lists[rank].popleft()
        job, it, _ = self.key
        took = self.sim.delay.task_delays(np.array([rank - 1]), job, it,
                                          np.array([self.slots[rank]]),
                                          self.sim.cost[[task]])[0]
        self.slots[rank] += 1
        self.busy.add(rank)
        self.push(at + float(took), (rank, self.gen[rank], task))

    def piece_done(self, rank: int, generation: int, task: int) -> None:
        if self.gen.get(rank) != generation:  # dropped meanwhile (a purge, a new round)
            return
        self.busy.discard(rank)
        self.sim.task_events += 1
        self.processed += 1
        assert self.key is not None
        self.feed(ev.ResultArrived(rank, *self.key, [task], None, self.now))
        self.start(rank, self.now)


def simulate(code: Code, delay: DelayModel, iterations: int, tolerance: int = 0,
             task_cost: np.ndarray | None = None) -> SimResult:
    """Simulate ``iterations`` iterations of ``code`` under ``delay``."""
    return Simulator(code, delay, task_cost, tolerance).run(iterations)


def expected_iteration_time(code: Code, delay: DelayModel, loads: np.ndarray,
                            iterations: int = 200) -> float:
    """Mean simulated iteration time (model time) of ``code`` with a fixed split ``loads`` -
    the simulator's figure beside each candidate of the code-parameter search."""
    from ..balance.split import split_schedule

    fixed = Code(code.name, code.B, split_schedule(loads, code.n_tasks), code.target,
                 code.decoder_cls, code.params, code.messages)
    res = Simulator(fixed, delay, np.ones(code.n_tasks)).run(iterations)
    return res.mean("wall_s") / delay.time_scale
