"""One iteration's bookkeeping (pure): who owes which tasks, what arrived and when, the decoder,
and the iteration's record once it decodes. Workers are code indices; the Session opens a Round
for every iteration it sends out and asks it what the results add up to."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..codes import Code, Decoder
from .result import IterationRecord
from .tree_messages import relay_children


@dataclass
class Reducing:
    """A decoded round whose sum the workers add up (``Reduce``): the attempt, the ranks that
    sum a share (``plan``: rank -> its terms), the ranks whose PART rank 0 still waits for,
    what they added up to so far, and the round's record and missing partitions, for when
    the sum is complete. ``star``: every contributor sends its own share to rank 0 (a
    re-plan: rank 0 then sees who is late)."""

    record: IterationRecord
    missing: np.ndarray
    attempt: int = 0
    plan: dict[int, tuple[tuple[int, float], ...]] = field(default_factory=dict)
    waiting: set[int] = field(default_factory=set)
    total: np.ndarray | None = None
    star: bool = False
    since: float = 0.0  # when this attempt was sent

@dataclass
class Round:
    job: int
    iteration: int
    epoch: int
    started: float
    decoder: Decoder
    outstanding: dict[int, set[int]]  # worker -> tasks it owes
    arrivals: dict[int, list[float]] = field(default_factory=dict)  # worker -> result times
    decoded_at: float | None = None
    received: int = 0
    messages: int = 0
    done: bool = False
    # partial work: each worker's current list, how far it has reported, who owns a piece (its
    # primary holder, or the worker it was handed to)
    lists: dict[int, list[int]] = field(default_factory=dict)
    reported: dict[int, int] = field(default_factory=dict)
    owner: dict[int, int] = field(default_factory=dict)
    told: set[int] = field(default_factory=set)  # told a shortened list, silent since
    sent: set[int] = field(default_factory=set)  # sent an ITERATE of this round
    share: dict[int, int] = field(default_factory=dict)  # piece -> the worker it was dealt to
    given: dict[int, float] = field(default_factory=dict)  # worker -> when it last took over
    robbers: dict[int, int] = field(default_factory=dict)  # worker -> who took its last piece
    wake: float | None = None  # when a holder that idle workers wait on is overdue
    # results summed by the workers (``Reducing``): every RESULT in order (worker, tasks,
    # runs), and who holds each value the decoder counts (decoder key -> (worker, the first
    # task id its RESULT named)); None: the values come to rank 0
    log: list[tuple[int, list[int], tuple[int, ...] | None]] | None = None
    holders: dict[int, tuple[int, int]] = field(default_factory=dict)
    reducing: Reducing | None = None
    # θ relayed (``Iterate.relay``): the order, each rank's list as sent, and when the ranks
    # still silent are sent θ directly (a relaying rank frozen or slow); None: done
    relay: tuple[tuple[int, int], ...] = ()  # (rank, its parent)
    relay_lists: dict[int, tuple[int, ...]] = field(default_factory=dict)
    relay_due: float | None = None

    @property
    def key(self) -> tuple[int, int, int]:
        return self.job, self.iteration, self.epoch

    def take(self, worker: int, tasks: list[int], values: object, now: float,
             runs: tuple[int, ...] | None = None) -> bool:
        """Results of ``tasks`` from ``worker`` (``values``: a row each, or a run of ``runs``
        each; or None); True once they complete the decode."""
        self.messages += 1
        self.received += len(tasks)
        self.arrivals.setdefault(worker, []).extend([now - self.started] * len(tasks))
        self.outstanding.get(worker, set()).difference_update(tasks)
        if self.log is not None:
            self.log.append((worker, tasks, runs))
        return self._add(self.decoder, worker, tasks, values, runs)

    def _add(self, decoder: Decoder, worker: int, tasks: list[int], values: object,
             runs: tuple[int, ...] | None) -> bool:
        """Feed one RESULT to ``decoder`` (noting who holds each value counted, where the
        workers keep them); True once it is ready."""
        holders = self.holders if self.log is not None else None
        if runs is None:
            for i, task in enumerate(tasks):
                if holders is not None and task not in decoder.seen and not decoder.ready:
                    holders[task] = (worker, task)
                if decoder.add(task, None if values is None else values[i]):  # type: ignore[index]
                    return True
            return False
        start = 0
        for i, length in enumerate(runs):
            run = tasks[start:start + length]
            start += length
            if holders is not None and not decoder.ready:
                first = next((t for t in run if t not in decoder.seen), None)
                if first is not None:  # the decoder keeps a run's value at its first new piece
                    holders[first] = (worker, run[0])
            if decoder.add_run(run, None if values is None else values[i]):  # type: ignore[index]
                return True
        return False

    def redecode(self, code: Code, tolerance: int, live: set[int]) -> bool:
        """Results summed by the workers, some of whom are gone: decode again from the living's
        RESULTs alone (their values are still theirs); whether that decodes."""
        assert self.log is not None
        self.decoder, self.holders = code.decoder(tolerance), {}
        for worker, tasks, runs in self.log:
            if worker in live and self._add(self.decoder, worker, tasks, None, runs):
                return True
        return self.decoder.ready

    @property
    def alarm(self) -> float | None:
        """When the round must be looked at again: idle workers wait on a holder overdue then
        (``wake``), or the ranks a relayed θ has not reached are sent it (``relay_due``)."""
        due = [t for t in (self.wake, self.relay_due) if t is not None]
        return min(due) if due else None

    def behind(self) -> set[int]:
        """The workers that still owed tasks when the round decoded (purged, or robbed)."""
        return {w for w, tasks in self.outstanding.items() if tasks}

    def relayed_below(self, ranks: set[int]) -> list[int]:
        """The ranks that get θ through ``ranks`` in the relay (their descendants)."""
        below: list[int] = []
        todo = [c for r in sorted(ranks) for c in relay_children(self.relay, r)]
        while todo:
            r = todo.pop(0)
            below.append(r)
            todo += relay_children(self.relay, r)
        return below

    def handed(self) -> dict[int, int]:
        """Partial work: each worker's pieces of its own share that another owns now (taken
        over, dealt out at the start, stood in for); not those nobody took (owner -1)."""
        out: dict[int, int] = {}
        for t, w in self.share.items():
            if self.owner.get(t, -1) not in (w, -1):
                out[w] = out.get(w, 0) + 1
        return out

    def exhausted(self, worker: int) -> bool:
        """Whether nothing is owed any more, ``worker``'s last result included."""
        return not self.outstanding.get(worker) and not any(self.outstanding.values())

    def decodable(self, code: Code, tolerance: int, live: set[int]) -> bool:
        """Could the results in so far plus everything the living still owe decode?"""
        probe = code.decoder(tolerance)
        for task in self.decoder.tasks:
            probe.add(task)
        for w in live:
            for task in self.outstanding.get(w, ()):
                if probe.add(task):
                    return True
        return probe.ready

    def deadline(self, worker: int, timeout: float) -> float:
        """When ``worker`` will have sent nothing for ``timeout``: since the round began, its
        last result, or the last pieces it took over (it may have waited idle for them)."""
        return max(self.started + max(self.arrivals.get(worker, [0.0])),
                   self.given.get(worker, 0.0)) + timeout

    def silent(self, now: float, timeout: float, owing: set[int]) -> list[int]:
        """Of ``owing``, those that have sent nothing for ``timeout``."""
        return sorted(w for w in owing if now >= self.deadline(w, timeout))

    def close(self, now: float, code: Code, purge: bool,
              stale: int) -> tuple[IterationRecord, list[int]]:
        """The round decoded at ``now``: its record (``stale`` results came since the last) and
        the workers to purge (those with tasks left, when purging)."""
        self.done = True
        self.decoded_at = now - self.started
        owing = [w for w in sorted(self.outstanding) if self.outstanding[w]] if purge else []
        dec = self.decoder
        record = IterationRecord(
            job=self.job, iteration=self.iteration, wall_s=now - self.started,
            results_used=dec.results_used, results_received=self.received,
            stale_results=stale, purged_tasks=sum(len(self.outstanding[w]) for w in owing),
            messages=self.messages, volume=self.received * code.result_fraction,
            missing_partitions=len(dec.missing_partitions), started_s=self.started,
            epoch=self.epoch)
        return record, owing

    def describe(self, pieced: bool, n_tasks: int) -> str:
        """What the round waits for, in one line."""
        head = f"job {self.job} iteration {self.iteration} " + ("done" if self.done else "open")
        if pieced:  # hundreds of pieces: those still needed, by the worker they wait on
            needed: dict[int, list[int]] = {}
            for t in range(n_tasks):
                if self.decoder.needs(t):
                    needed.setdefault(self.owner.get(t, -1), []).append(t)
            return (f"{head}: {len(self.decoder.tasks)} pieces in, still needed by owner "
                    f"{needed} (-1: nobody's)")
        owed = {w: sorted(t) for w, t in self.outstanding.items() if t}
        return f"{head}: tasks decoded from {sorted(self.decoder.tasks)}, owed by {owed}"
