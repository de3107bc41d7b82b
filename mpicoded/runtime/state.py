"""The master's pure state machine: events in, actions out, no MPI and no clock of its own.

The MPI loop (``master.py``) feeds it what arrives and carries out what it returns, so every rule
(who gets purged, what is stale, when an iteration is decoded) is unit-tested without MPI, and the
simulator can drive the same machine with simulated time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..codes import Code, Decoder

QUIET_ROUNDS = 2  # partial work: a worker silent this many rounds is left out of the next
RELEASED = -2  # partial work, ranges of coded blocks: the owner of a piece another stood in for


@dataclass(frozen=True)
class SendIterate:
    """Send worker its ordered task list for (job, iteration) with the current theta."""

    worker: int
    job: int
    iteration: int
    tasks: tuple[int, ...]
    epoch: int = 0


@dataclass(frozen=True)
class SendPurge:
    """Tell worker to drop what is left of (job, iteration)."""

    worker: int
    job: int
    iteration: int
    epoch: int = 0


@dataclass(frozen=True)
class SendAssign:
    """Partial work: worker's list for the open (job, iteration) is now ``tasks`` (pieces taken
    over from a slower holder, far end first), in place of what is left of its own."""

    worker: int
    job: int
    iteration: int
    tasks: tuple[int, ...]
    epoch: int = 0


@dataclass(frozen=True)
class Recode:
    """The code cannot decode this iteration (too many workers are dead, or every result is in
    and they do not suffice, as a sampled sparse code may find): the master must abandon it,
    re-build the code for the survivors and start the iteration again. With no survivor
    (``dead`` is every worker) the run cannot go on."""

    dead: frozenset[int]
    reason: str = "workers died"


@dataclass(frozen=True)
class TimedOut:
    """``worker`` owes the open iteration results and sent none for --iteration-timeout: it is
    declared failed (it may be alive, hung or very slow). Its Forget follows."""

    worker: int


@dataclass(frozen=True)
class Forget:
    """``worker`` is lost (dead, or silent past --iteration-timeout): drop what is pending to
    it and split the load without it. First of what a loss returns, once a worker."""

    worker: int


@dataclass(frozen=True)
class SendStop:
    """Tell worker to finish."""

    worker: int


@dataclass(frozen=True)
class IterationRecord:
    """What one iteration cost (metric names from the design)."""

    job: int
    iteration: int
    wall_s: float
    results_used: int
    results_received: int
    stale_results: int
    purged_tasks: int
    messages: int
    volume: float
    missing_partitions: int
    started_s: float = 0.0  # when it was sent out, on the master's clock (steady-state rates)
    epoch: int = 0  # re-codes before it: the epoch of its tasks


@dataclass(frozen=True)
class Decoded:
    """The iteration's target is recovered: ``result`` (NaN rows / ``missing`` if partial),
    and what the observers of a decode need: the tasks the decoder ``used`` (the task
    trace), each worker's result times and the decode's, from the iteration's start (the
    load split's estimator)."""

    job: int
    iteration: int
    result: np.ndarray | None
    missing: np.ndarray
    record: IterationRecord
    used: frozenset[int] = frozenset()
    arrivals: dict[int, list[float]] = field(default_factory=dict)
    decoded_at: float = 0.0


Action = SendIterate | SendPurge | SendAssign | SendStop | Decoded | Recode | TimedOut | Forget


# Events: what the MPI loop (or the simulator) tells the machine. Not frozen: a ResultArrived is
# made for every result on rank 0's hot path, and a frozen dataclass's init costs several times.
@dataclass(slots=True)
class ResultArrived:
    """A RESULT from ``worker`` (its index in the code): ``tasks`` of (job, iteration, epoch)
    done, their ``values`` (one row a task; None where only timing matters: the simulator), at
    ``now`` on the master's clock."""

    worker: int
    job: int
    iteration: int
    tasks: list[int]
    values: np.ndarray | None
    now: float
    epoch: int = 0


@dataclass(slots=True)
class StaleResults:
    """``count`` results from a rank the current code has no worker for (an older epoch's)."""

    count: int


@dataclass(slots=True)
class WorkerLost:
    """``worker`` is dead (ULFM named it) or declared so (silent past --iteration-timeout)."""

    worker: int


@dataclass(slots=True)
class Tick:
    """The master's clock reads ``now``, under --iteration-timeout ``timeout``: workers silent
    that long are lost (a TimedOut each, then what their loss takes)."""

    now: float
    timeout: float


@dataclass(slots=True)
class StopAcknowledged:
    """``worker`` answered STOP."""

    worker: int


Event = ResultArrived | StaleResults | WorkerLost | Tick | StopAcknowledged


@dataclass
class _Iteration:
    job: int
    iteration: int
    started: float
    decoder: Decoder
    outstanding: dict[int, set[int]]
    schedule: tuple[tuple[int, ...], ...]
    arrivals: dict[int, list[float]] = field(default_factory=dict)  # worker -> result times
    decoded_at: float | None = None
    received: int = 0
    messages: int = 0
    done: bool = False
    # partial work: each worker's current list, how far it has reported, and who owns a piece
    # (its primary holder, or the worker it was handed to)
    lists: dict[int, list[int]] = field(default_factory=dict)
    reported: dict[int, int] = field(default_factory=dict)
    owner: dict[int, int] = field(default_factory=dict)
    told: set[int] = field(default_factory=set)  # told a shortened list, silent since
    sent: set[int] = field(default_factory=set)  # sent an ITERATE of this round


@dataclass
class MasterState:
    """Tracks the current iteration, each worker's outstanding tasks, the counters, and who is
    lost: it alone decides whether a loss counts and whether it takes a re-code. Workers are
    code indices, as in every event and action; a re-code makes a new state for the survivors."""

    code: Code
    tolerance: int = 0
    purge: bool = True  # False: never purge (public peers' behaviour, kept for comparison)
    workers: set[int] | None = None  # the live workers; None: all of the code's
    epoch: int = 0  # bumped by the master each time it re-builds the code
    current: _Iteration | None = None
    stale_results: int = 0  # stale results since the last record (go into the next one)
    totals: dict[str, float] = field(default_factory=dict)
    acked: set[int] = field(default_factory=set)
    rounds: int = 0  # iterations opened so far (every job's)
    heard: dict[int, int] = field(default_factory=dict)  # worker -> the round it last sent in
    last_sent: dict[int, int] = field(default_factory=dict)  # worker -> last round sent to it
    quiet: frozenset[int] = frozenset()  # partial work: left out of this round (see below)
    held: list[SendPurge] = field(default_factory=list)  # the last decode's purges, not sent

    def __post_init__(self) -> None:
        if self.workers is None:
            self.workers = set(range(self.code.n_workers))
        for key in ("results_received", "stale_results", "purged_tasks", "messages", "iterations",
                    "failed_workers"):
            self.totals.setdefault(key, 0)

    @property
    def live(self) -> set[int]:
        """The live workers: ``workers``, never None once ``__post_init__`` has filled it in."""
        assert self.workers is not None
        return self.workers

    @property
    def dead(self) -> frozenset[int]:
        """The code's workers lost (``WorkerLost``): they get nothing more."""
        return frozenset(range(self.code.n_workers)) - self.live

    def start_iteration(self, job: int, iteration: int, now: float,
                        schedule: tuple[tuple[int, ...], ...] | None = None) -> list[Action]:
        """Open (job, iteration): every worker with tasks gets its list (from ``schedule``, by
        default the code's own). The last decode's purges go first, to the workers that get no
        ITERATE now: for the others the ITERATE supersedes them (one message fewer a round for
        a straggler that reads a few a burst)."""
        if self.current is not None and not self.current.done:
            raise RuntimeError(f"iteration {self.current.iteration} of job {self.current.job} "
                               "is still open: decode it before starting another")
        held = self.release_purges()
        schedule = self.code.schedule if schedule is None else schedule
        self.rounds += 1
        self.quiet = self._quiet() if self.partial else frozenset()
        outstanding = {w: set(schedule[w]) for w in self.live
                       if schedule[w] and w not in self.quiet}
        self.current = _Iteration(job, iteration, now, self.code.decoder(self.tolerance),
                                  outstanding, schedule)
        lists = {w: tuple(schedule[w]) for w in outstanding}
        if self.partial:
            cur = self.current
            cur.lists = {w: list(schedule[w]) for w in outstanding}
            cur.reported = dict.fromkeys(outstanding, 0)
            cur.owner = {t: w if w in outstanding else -1  # -1: nobody's (quiet, dead)
                         for w in range(self.code.n_workers) for t in schedule[w]}
            cur.sent = set(outstanding)
            for w in cur.sent:
                self.last_sent[w] = self.rounds
            self._deal([t for w in sorted(self.quiet) for t in schedule[w]])
            lists = {w: tuple(tasks) for w, tasks in cur.lists.items()}
        died = len(self.live) < self.code.n_workers
        if died and not self._still_decodable():  # deaths between iterations, more than it takes
            return [*held, Recode(self.dead)]
        purges: list[Action] = [p for p in held if p.worker not in outstanding]
        return purges + [SendIterate(w, job, iteration, lists[w], self.epoch)
                         for w in sorted(outstanding)]

    def _deal(self, orphans: list[int]) -> None:
        """Partial work, a new round: the shares of the workers left out go at once to the
        round's workers, each piece (or a stand-in for it) to the end of the shortest list
        that can take it, so nobody waits to be idle for them (a round trip each round for a
        straggler that stays slow). A piece nobody of the round can take is left to the
        hand-over (a quiet one sent late for it)."""
        cur = self.current
        assert cur is not None
        for t in orphans:
            for w in sorted(cur.lists, key=lambda w: (len(cur.lists[w]), w)):
                pair = self._stand_ins([t], w)
                if pair:
                    q = pair[0][1]
                    cur.lists[w].append(q)
                    cur.outstanding[w].add(q)
                    cur.owner[q], cur.owner[t] = w, w if t == q else RELEASED
                    break

    @property
    def partial(self) -> bool:
        """Whether the code is one of pieces (``partial_code``): idle holders take work over."""
        return "pieces" in self.code.params

    def _holding(self, workers: set[int]) -> set[int]:
        """Partial work: the blocks (partitions, or coded tasks) ``workers`` hold."""
        holds = self.code.params["holds"]
        return set().union(*(holds[w] for w in workers))

    def _still_decodable(self) -> bool:
        """Could the results received so far plus everything the living still owe decode?"""
        cur = self.current
        assert cur is not None  # only asked while an iteration is open
        if self.partial:  # a piece can be handed to any living holder of its block
            return cur.decoder.could_finish(self._holding(self.live))
        probe = self.code.decoder(self.tolerance)
        for task in cur.decoder.tasks:
            probe.add(task)
        for w in self.live:
            for task in cur.outstanding.get(w, ()):
                if probe.add(task):
                    return True
        return probe.ready

    def handle(self, event: Event) -> list[Action]:
        """What to do about ``event``: the one entry for everything that happens to a run."""
        if isinstance(event, ResultArrived):
            return self.on_result(event.worker, event.job, event.iteration, event.tasks,
                                  event.values, event.now, event.epoch)
        if isinstance(event, WorkerLost):
            return self.on_worker_failed(event.worker)
        if isinstance(event, Tick):
            actions: list[Action] = []
            for worker in self.silent(event.now, event.timeout):
                actions += [TimedOut(worker), *self.on_worker_failed(worker)]
            return actions
        if isinstance(event, StopAcknowledged):
            self.on_stop_ack(event.worker)
            return []
        if isinstance(event, StaleResults):
            self.stale_results += event.count
            self.totals["stale_results"] += event.count
            return []
        raise TypeError(f"{event!r} is not an event of MasterState")

    def is_live(self, worker: int) -> bool:
        """Whether results from ``worker`` still count (not dead, not timed out)."""
        return worker in self.live

    def on_result(self, worker: int, job: int, iteration: int, tasks: list[int],
                  values: np.ndarray | None, now: float, epoch: int = 0) -> list[Action]:
        """A RESULT message: decode if it completes the target, then purge the rest. Results of
        another iteration, of an abandoned epoch or from a worker declared dead are stale."""
        self.heard[worker] = self.rounds
        cur = self.current
        if (cur is None or cur.done or (job, iteration, epoch) != (cur.job, cur.iteration,
                                                                     self.epoch)
                or worker not in self.live):
            self.stale_results += len(tasks)
            self.totals["stale_results"] += len(tasks)
            return []
        cur.messages += 1
        cur.received += len(tasks)
        cur.arrivals.setdefault(worker, []).extend([now - cur.started] * len(tasks))
        self.totals["messages"] += 1
        self.totals["results_received"] += len(tasks)
        cur.outstanding.get(worker, set()).difference_update(tasks)
        for i, task in enumerate(tasks):
            if cur.decoder.add(task, None if values is None else values[i]):
                return self._decoded(now)
        if self.partial:
            at = cur.lists.get(worker, [])
            position = {t: i for i, t in enumerate(at)}
            cur.reported[worker] = max([cur.reported.get(worker, 0)] + [
                position[t] + 1 for t in tasks if t in position])
            cur.told.discard(worker)
            actions = self._spare(worker, tasks) + self._hand_over([worker])
            if (not actions and "ranges" in self.code.params
                    and not any(self._owed(w) for w in cur.sent & self.live)):
                actions = self._cover()
            return actions
        if not cur.outstanding.get(worker) and not any(cur.outstanding.values()):
            return [Recode(self.dead, "every result is in and the code cannot decode them")]
        return []

    def _quiet(self) -> frozenset[int]:
        """Partial work: the workers that sent nothing in the last QUIET_ROUNDS rounds, left
        out of this one. A straggler far behind reads every message sent to it before it gets
        to the newest (and to STOP): each round skipped is a few messages fewer it must get
        through, and its share goes to the others from the start. It is back in the round
        after its next result, however stale, and is sent one round in QUIET_ROUNDS + 1 in any
        case (a worker purged before it sent anything has nothing stale to send). Never a
        worker without whom the round's blocks could not decode (a partition left with no
        holder; coded blocks too few for a range)."""
        quiet = {w for w in self.live if self.rounds - self.heard.setdefault(w, self.rounds)
                 > QUIET_ROUNDS and self.rounds - self.last_sent.get(w, 0) <= QUIET_ROUNDS}
        for w in sorted(quiet):
            if not self.code.decoder().could_finish(self._holding(self.live - quiet)):
                quiet.discard(w)
        return frozenset(quiet)

    def _owed(self, worker: int) -> list[int]:
        """Partial work: the pieces ``worker`` owns, has not reported and nobody has sent yet,
        in its order."""
        cur = self.current
        assert cur is not None
        needs = cur.decoder.needs
        return [t for t in cur.lists.get(worker, [])[cur.reported.get(worker, 0):]
                if cur.owner.get(t) == worker and needs(t)]

    def _spare(self, worker: int, tasks: list[int]) -> list[Action]:
        """Partial work: ``worker`` sent pieces that another now owns (it computed them before
        it read that they were taken): each such owner, working down from the far end, is told
        its list without them, so it does not compute them again; one that is left with
        nothing takes over something else. Not one told a list it has not read yet."""
        cur = self.current
        assert cur is not None
        owners = {cur.owner.get(t, -1) for t in tasks} & self.live - cur.told - {worker}
        actions: list[Action] = []
        for o in sorted(owners):
            pending = cur.lists.get(o, [])[cur.reported.get(o, 0):]
            left = self._owed(o)
            if len(left) != len(pending):
                actions += self._retell(o, left)
        return actions

    def _retell(self, worker: int, left: list[int], robber: int = -1) -> list[Action]:
        """Partial work: ``worker``'s list is now ``left`` (what it still owns, in its order).
        Left with nothing, it is idle: it takes something else over (not back from
        ``robber``, who has just taken its last), if there is any, and that one ASSIGN tells
        it both; else it is told its list is empty."""
        cur = self.current
        assert cur is not None
        cur.lists[worker], cur.reported[worker] = left, 0
        given = [] if left else self._hand_over([worker], robber)
        if any(isinstance(a, (SendAssign, SendIterate)) and a.worker == worker for a in given):
            return given
        return [SendAssign(worker, cur.job, cur.iteration, tuple(left), self.epoch), *given]

    def _stand_ins(self, wanted: list[int], thief: int) -> list[tuple[int, int]]:
        """Partial work: (piece, what ``thief`` computes in its place) for those of ``wanted``
        it can cover: the piece itself if it holds its block; under ranges of coded blocks
        (an MDS code decodes a range from any tasks that are enough), its own block's piece of
        the same range, if nobody has that one yet, unless the code is a repetition (every
        block needed: the piece replaced would be left to nobody); one stand-in a piece."""
        cur = self.current
        assert cur is not None
        params = self.code.params
        pieces, mine = params["pieces"], params["holds"][thief]
        m = len(params["ranges"]) if params.get("stand_ins") else 0
        out: list[tuple[int, int]] = []
        chosen: set[int] = set()
        for t in wanted:
            if pieces[t].key in mine:
                out.append((t, t))
                continue
            for key in sorted(mine) if m else ():
                q = key * m + t % m
                if (q not in chosen and cur.decoder.needs(q)
                        and cur.owner.get(q) not in self.live):
                    out.append((t, q))
                    chosen.add(q)
                    break
        return out

    def _hand_over(self, idle: list[int], robber: int = -1) -> list[Action]:
        """Partial work: each of ``idle`` that owes nothing more takes over the far half of the
        largest share still owed among the partitions it holds (all of a dead worker's), so a
        slow holder and its helper meet in the middle instead of repeating each other. The half
        is rounded up: the last piece a slow holder owes (it may be computing it at a twentieth
        of the speed) goes to the idle one too. The holder is told its shortened list, so it
        does not go on into pieces now another's, but once until it reports again: a straggler
        that has not read the last notice would only have more to read before its next STOP
        or ITERATE (at 1.5% of a core, ten notices an iteration took it seconds to get through
        by the end of a run), and what it computes past its share is dropped as a duplicate.
        A holder robbed of its last piece is idle too, and takes over in turn (never back
        from ``robber``): left alone it would wait for the next round while a straggler's
        share it could compute is still owed."""
        cur = self.current
        assert cur is not None
        actions: list[Action] = []
        needs = cur.decoder.needs
        for thief in idle:
            if thief not in self.live or self._owed(thief):
                continue
            unowned = sorted(t for t, w in cur.owner.items()  # a share nobody computes
                             if w not in self.live and w != RELEASED and needs(t))
            covered = self._stand_ins(unowned, thief)
            if thief not in cur.sent:  # quiet (or no share): only what no worker of the round
                others = cur.sent & self.live  # can take
                covered = [(t, q) for t, q in covered
                           if not any(self._stand_ins([t], o) for o in others)]
            pairs, victim = covered, -1
            if not pairs and thief in cur.sent:
                for other in sorted(self.live - {thief, robber}):
                    owed = self._stand_ins(self._owed(other), thief)
                    if len(owed) > len(pairs):
                        pairs, victim = owed, other
                pairs = pairs[len(pairs) // 2:][::-1]  # the far half, far end first
            if not pairs:
                continue
            for t, q in pairs:  # a piece stood in for is nobody's, free to stand in itself
                cur.owner[t] = thief if t == q else RELEASED
            actions.append(self._give(thief, [q for _, q in pairs]))
            if victim >= 0:
                left = self._owed(victim)  # what is still its own, in its order
                if victim in cur.told:  # not told again until it reports
                    cur.lists[victim], cur.reported[victim] = left, 0
                else:
                    cur.told.add(victim)
                    actions += self._retell(victim, left, robber=thief)
        return actions

    def _give(self, worker: int, taken: list[int]) -> SendAssign | SendIterate:
        """Partial work: ``taken`` becomes ``worker``'s list (and its pieces): an ASSIGN if it
        has this round's ITERATE, else the ITERATE."""
        cur = self.current
        assert cur is not None
        for t in taken:
            cur.owner[t] = worker
        cur.lists[worker], cur.reported[worker] = list(taken), 0
        cur.outstanding.setdefault(worker, set()).update(taken)
        if worker in cur.sent:
            return SendAssign(worker, cur.job, cur.iteration, tuple(taken), self.epoch)
        cur.sent.add(worker)  # an ASSIGN is for a round under way: it has not got this one
        self.last_sent[worker] = self.rounds
        return SendIterate(worker, cur.job, cur.iteration, tuple(taken), self.epoch)

    def _cover(self) -> list[Action]:
        """Ranges of coded blocks, every piece owed is in and a range is still not decoded
        (a code that is not MDS, whose shares or stand-ins were not enough; or deaths): each
        worker of the round computes every piece of its blocks still needed that nobody has.
        A re-code if even the living's every block would not do."""
        cur = self.current
        assert cur is not None
        if not cur.decoder.could_finish(self._holding(self.live)):
            return [Recode(self.dead, "every result is in and the code cannot decode them")]
        holds, pieces = self.code.params["holds"], self.code.params["pieces"]
        actions: list[Action] = []
        for w in sorted(cur.sent & self.live):
            taken = [t for t in range(self.code.n_tasks) if pieces[t].key in holds[w]
                     and cur.decoder.needs(t) and cur.owner.get(t) not in self.live]
            if taken:
                actions.append(self._give(w, taken))
        return actions

    def _decoded(self, now: float) -> list[Action]:
        """The iteration is decoded: its record, and a purge held for each worker with work
        left (``start_iteration``, ``stop`` or ``release_purges`` says where it goes)."""
        cur = self.current
        assert cur is not None
        cur.done = True
        cur.decoded_at = now - cur.started
        purged = 0
        for w in sorted(cur.outstanding):
            if cur.outstanding[w] and self.purge:
                purged += len(cur.outstanding[w])
                self.held.append(SendPurge(w, cur.job, cur.iteration, self.epoch))
        dec = cur.decoder
        missing = dec.missing_partitions
        record = IterationRecord(
            job=cur.job, iteration=cur.iteration, wall_s=now - cur.started,
            results_used=dec.results_used, results_received=cur.received,
            stale_results=self.stale_results, purged_tasks=purged, messages=cur.messages,
            volume=cur.received * self.code.result_fraction, missing_partitions=len(missing),
            started_s=cur.started, epoch=self.epoch,
        )
        self.stale_results = 0
        self.totals["purged_tasks"] += purged
        self.totals["iterations"] += 1
        result = dec.result() if dec.values else None
        return [Decoded(cur.job, cur.iteration, result, missing, record, frozenset(dec.used),
                        cur.arrivals, cur.decoded_at)]

    def release_purges(self) -> list[SendPurge]:
        """The last decode's purges, now: no iteration follows at once (the master waits for
        the next job to arrive), so nothing else would stop the work they drop."""
        held, self.held = [p for p in self.held if p.worker in self.live], []
        return held

    def on_worker_failed(self, worker: int) -> list[Action]:
        """A worker died: it is forgotten, gets no more work and its outstanding tasks are lost.
        If the results still to come from the living can no longer decode this iteration, ask
        for a re-code. Dead already: nothing new. One that acknowledged STOP has left as told
        (under ULFM its exit is reported as a failure): no loss either."""
        if worker not in self.live or worker in self.acked:
            return []
        self.live.discard(worker)
        self.totals["failed_workers"] += 1
        cur = self.current
        if cur is None or cur.done:
            return [Forget(worker)]
        cur.outstanding.pop(worker, None)
        if not self._still_decodable():
            return [Forget(worker), Recode(self.dead)]
        return [Forget(worker), *(self._hand_over(sorted(self.live)) if self.partial else [])]

    def silent(self, now: float, timeout: float) -> list[int]:
        """Workers that owe the open iteration results and have sent none for ``timeout``
        seconds (since it started, or since their last result): ``--iteration-timeout`` treats
        them as failed."""
        cur = self.current
        if cur is None or cur.done or now - cur.started < timeout:
            return []
        return sorted(w for w, tasks in cur.outstanding.items()
                      if tasks and w in self.live
                      and now - cur.started - max(cur.arrivals.get(w, [0.0])) >= timeout)

    def abandon(self) -> list[Action]:
        """Give up the open iteration (to re-code): purge every living worker still on it."""
        cur = self.current
        if cur is None or cur.done:
            return []
        cur.done = True
        return [SendPurge(w, cur.job, cur.iteration, self.epoch)
                for w in sorted(self.live) if cur.outstanding.get(w)]

    def describe(self) -> str:
        """One line on what this state waits for (a rank asked where it is: SIGUSR1)."""
        cur = self.current
        if cur is None:
            return f"epoch {self.epoch}: no iteration opened yet"
        head = f"epoch {self.epoch}, job {cur.job} iteration {cur.iteration} " + (
            "done" if cur.done else "open")
        if self.partial:  # hundreds of pieces: those still needed, by the worker they wait on
            needed: dict[int, list[int]] = {}
            for t in range(self.code.n_tasks):
                if cur.decoder.needs(t):
                    needed.setdefault(cur.owner.get(t, -1), []).append(t)
            return (f"{head}: {len(cur.decoder.tasks)} pieces in, still needed by owner "
                    f"{needed} (-1: nobody's), dead workers {sorted(self.dead)}")
        owed = {w: sorted(t) for w, t in cur.outstanding.items() if t}
        return (f"{head}: tasks decoded from {sorted(cur.decoder.tasks)}, "
                f"owed by live worker {owed}, dead workers {sorted(self.dead)}")

    def stop(self) -> list[Action]:
        """End of the run: every worker is told to stop (STOP supersedes the purges held)."""
        self.held = []
        return [SendStop(w) for w in sorted(self.live)]

    def on_stop_ack(self, worker: int) -> None:
        """A worker acknowledged STOP."""
        self.acked.add(worker)

    @property
    def all_acked(self) -> bool:
        return self.acked >= self.live
