"""The model's workers (see ``sim/model.py``): the real worker logic (``Inbox``, ``PieceList``,
the sums of ``--reduce``) on the real wire format, at the speeds, latencies and faults the
model draws; the master side and the run are ``Model``'s."""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..codes import Code, combined
from ..core import events as ev
from ..core.inbox import Inbox
from ..core.piecelist import PieceList, Run, Runs
from ..core.protocol import Message, Tag, iterate_fields, unpack
from ..core.session import Session
from ..core.tree_messages import pack_part, reduce_fields
from .linear import Linear

Speeds = Callable[[int, float], float]  # (rank, time) -> pieces of a mean size a time unit


@dataclass
class ModelWorker:
    """One worker of the model: its set-up, what it has been sent, where it is in its loop."""

    rank: int
    setup: tuple[int, Code, Code | None, Linear, Runs | None] | None = None  # epoch, code,
    # pieces, work, how its own share's pieces join into runs
    arrived: deque[Message] = field(default_factory=deque)
    dead: bool = False
    frozen: bool = False
    paused: Run | None = None  # the run it was computing when it froze
    busy: bool = False
    acked: bool = False
    msg: Message | None = None  # the iteration under way
    tasks: deque[int] = field(default_factory=deque)  # whole tasks: its list left
    values: dict[int, np.ndarray] = field(default_factory=dict)
    # --reduce: the values it sent of its newest round (by first task id), and the sum it
    # carries out: (its REDUCE, its own terms' total), waiting for its children's PARTs
    kept_round: tuple[int, int, int] | None = None
    kept: dict[int, np.ndarray] = field(default_factory=dict)
    summing: tuple[Message, np.ndarray] | None = None



class Workers:
    """The workers of a model, and the heap and channels every message goes through."""

    rng: np.random.Generator
    speeds: Speeds
    latency: float
    now: float
    session: Session
    workers: dict[int, ModelWorker]
    inboxes: dict[int, Inbox]
    lists: dict[int, PieceList]
    heap: list[tuple[float, int, str, Any]]
    order: itertools.count[int]
    channel: dict[tuple[str, int, int], float]

    def push(self, at: float, kind: str, what: Any) -> None:
        heapq.heappush(self.heap, (at, next(self.order), kind, what))

    def send(self, direction: str, rank: int, what: object, sender: int = 0) -> None:
        """After a random latency, never before the last message on its channel (one a pair
        of ranks); a slow worker reads what it is sent as slowly as it computes (a rank on a
        CPU quota)."""
        latency = self.latency
        if direction == "to":
            latency /= self.speeds(rank, self.now)
        channel = (direction, rank, sender)
        at = max(self.now + self.rng.exponential(latency), self.channel.get(channel, 0.0))
        self.channel[channel] = at
        self.push(at, direction, (rank, what))


    def wake(self, w: ModelWorker) -> None:
        """Idle, or a piece done: what the worker does next, as the real loop does."""
        inbox = self.inboxes[w.rank]
        while not (w.busy or w.dead or w.frozen):
            if w.summing is not None:
                inbox.read()
                if not self.sum_up(w, inbox):
                    return
                continue
            if w.msg is None:
                if not (inbox.pending or w.arrived):
                    return
                inbox.read()
                if inbox.reduce is not None:
                    self.start_sum(w, inbox)
                    continue
                w.msg = inbox.next_iteration()
                if w.msg is None:
                    if inbox.finished and not w.acked:
                        w.acked = True
                        self.send("from", w.rank, ev.StopAcknowledged(w.rank))
                    return
                self.begin(w, inbox)
                continue
            run = self.next_task(w, inbox)
            if run is None:
                inbox.close_current()
                w.msg = None
                continue
            assert w.setup is not None
            speed = self.speeds(w.rank, self.now)
            self.push(self.now + self.rng.exponential(len(run) / speed), "done", (w.rank, run))
            w.busy = True

    def start_sum(self, w: ModelWorker, inbox: Inbox) -> None:
        """A REDUCE read: its terms' total over the values kept, as the real worker's."""
        msg = inbox.take_reduce()
        assert (msg.job, msg.iteration, msg.epoch) == w.kept_round, \
            f"rank {w.rank}: a REDUCE of {(msg.job, msg.iteration, msg.epoch)}, values of " \
            f"{w.kept_round}"
        terms, _ = reduce_fields(msg)
        w.summing = msg, combined(dict(terms), w.kept.__getitem__)

    def sum_up(self, w: ModelWorker, inbox: Inbox) -> bool:
        """The sum under way: sent once every child's PART is in (False: it waits for them);
        dropped if cancelled meanwhile."""
        assert w.summing is not None
        msg, total = w.summing
        mine = ((msg.job, msg.iteration, msg.epoch), msg.task)
        if inbox.summing != mine:
            w.summing = None
            return True
        _, children = reduce_fields(msg)
        parts = inbox.parts_for(mine)
        if len(parts) < len(children):
            return False
        w.summing, inbox.summing = None, None
        total = total + sum(parts)
        if msg.worker == 0:
            self.send("from", w.rank, ev.PartArrived(w.rank, msg.job, msg.iteration, msg.epoch,
                                                     msg.task, total, 0.0))
        else:
            self.send("to", msg.worker, unpack(Tag.PART, pack_part(
                msg.job, msg.iteration, msg.epoch, msg.task, w.rank - 1, total)), w.rank)
        return True

    def begin(self, w: ModelWorker, inbox: Inbox) -> None:
        assert w.msg is not None and w.setup is not None
        key = (w.msg.job, w.msg.iteration, w.msg.epoch)
        if key != w.kept_round:
            w.kept_round, w.kept = key, {}
        if w.setup[2] is not None:
            self.lists[w.rank].runs = w.setup[4]
            self.lists[w.rank].begin(inbox, w.msg, self.now)
        else:
            w.tasks = deque(iterate_fields(w.msg, w.rank)[0])

    def next_task(self, w: ModelWorker, inbox: Inbox) -> Run | None:
        assert w.msg is not None and w.setup is not None
        if w.setup[2] is None:  # whole tasks, each sent when done
            if not w.tasks or inbox.dropped():
                return None
            return (w.tasks.popleft(),)
        plist = self.lists[w.rank]
        done, task = plist.next(inbox, inbox.dropped)
        self.result(w, done)
        if task is None and plist.queue:
            plist.drop()
        return task

    def value(self, w: ModelWorker, run: Run) -> np.ndarray:
        assert w.msg is not None and w.setup is not None
        _, code, pieces, work, _ = w.setup
        theta = iterate_fields(w.msg, w.rank)[1]
        offsets = np.concatenate([[0], np.cumsum(work.rows)])
        task = run[0]
        if pieces is not None:  # a run's pieces, of one partition or several
            return np.asarray(sum(work.rows_value(offsets[p.key] + p.start,
                                                  offsets[p.key] + p.stop, theta)
                                  for p in (pieces.params["pieces"][t] for t in run)))
        return np.asarray(sum(code.B[task, j] * work.rows_value(offsets[j], offsets[j + 1], theta)
                              for j in np.flatnonzero(code.B[task])))

    def done(self, rank: int, run: Run) -> None:
        w = self.workers[rank]
        if w.frozen and not w.dead:
            w.paused = run  # done once it is resumed
            return
        w.busy = False
        if w.dead or w.msg is None:
            return
        w.values[run[0]] = self.value(w, run)
        assert w.setup is not None
        sends = [run] if w.setup[2] is None else self.lists[rank].finished(run, self.now)
        self.result(w, sends)
        self.wake(w)

    def result(self, w: ModelWorker, runs: list[Run]) -> None:
        if runs:
            assert w.msg is not None
            m = w.msg
            computed = np.array([w.values.pop(run[0]) for run in runs])
            values: np.ndarray | None = computed
            if self.session.settings.reduce:  # kept: ids alone go
                w.kept.update((run[0], v) for run, v in zip(runs, computed, strict=True))
                values = None
            tasks = [t for run in runs for t in run]
            lengths = tuple(map(len, runs)) if len(tasks) > len(runs) else None
            self.send("from", w.rank, ev.ResultArrived(w.rank, m.job, m.iteration, m.epoch,
                                                       tasks, values, 0.0, runs=lengths))

