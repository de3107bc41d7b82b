"""The Session's shutdown (pure): STOP to every worker that may still run, their
acknowledgements, and RELEASE once all are in, so that no worker's exit is taken for a death
while others still stop. Under --iteration-timeout nobody is waited for longer than that (or
5 s): a worker hung in the last iteration, which decoded without it, never acknowledges.
Under partial work (``Settings.linger``) a rank known slow is not waited for: it lingers, and
its acknowledgement is taken after the run has returned (a slow rank needs several of its
scheduling periods to read STOP and answer, which the run's end would otherwise pay); so does
one that has not answered once silent for longer than a worker on time ever is
(``Paces.stalled``) since the end began to wait, after the final loss (a rank stalled after
its last result); not since STOP went out, as the master computes that loss meanwhile."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .events import (
    Abort,
    Finish,
    Forget,
    Instruction,
    Linger,
    Outcome,
    Release,
    Stop,
    StopAcknowledged,
    WakeAt,
    WorkerFailed,
)

if TYPE_CHECKING:
    from .session import Session

GRACE_S = 5.0  # the least a shutdown under --iteration-timeout waits for acknowledgements


class Ending:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.stop_sent = False
        self.stopping = False  # every job is done: waiting for acknowledgements
        self.finished = False
        self.grace: float | None = None
        self.patience: float | None = None  # then the unanswered linger (Paces.stalled)
        self.stopped: set[int] = set()  # ranks that acknowledged STOP
        self.gone: set[int] = set()  # ranks found dead
        self.timed_out: set[int] = set()  # ranks declared failed for silence: alive, maybe
        self.counters: dict[int, tuple[int, int, int, int]] = {}  # by world rank - 1

    def running(self) -> set[int]:
        """Ranks that may still be running: the code's living workers, and those timed out
        (lost to the code, but alive maybe), less the dead."""
        s = self.session
        return ({s.ranks.rank(w) for w in s.live} | self.timed_out) - self.gone

    def stop(self) -> list[Instruction]:
        """STOP to every rank that may still run, once (it supersedes the purges held)."""
        if self.stop_sent:
            return []
        self.stop_sent = True
        self.session.held = []
        return [Stop(rank) for rank in sorted(self.running())]

    def shutdown(self, now: float) -> list[Instruction]:
        """Every job is done: wait for the acknowledgements (within a grace under a timeout;
        under ``linger``, once two rounds or more measured silences, until a rank that has not
        answered is stalled, ``Paces.stalled`` from ``now``: the final loss, when the end
        begins to wait)."""
        out = self.stop()
        self.stopping = True
        s = self.session
        timeout = s.settings.iteration_timeout
        if timeout is not None:
            self.grace = now + max(GRACE_S, timeout)
            out.append(WakeAt(self.grace))
        stalled = s.piecework.paces.stalled() if s.piecework is not None else None
        if s.settings.linger and stalled is not None and timeout is None:
            self.patience = now + stalled
            out.append(WakeAt(self.patience))
        return out + self.check()

    def acknowledged(self, event: StopAcknowledged) -> list[Instruction]:
        self.counters[self.session.ranks.world(event.rank) - 1] = event.counters
        self.stopped.add(event.rank)
        return self.check()

    def failed(self, event: WorkerFailed) -> list[Instruction]:
        """A worker's exception ends the run, unless it is stopping already (then a second
        failure changes nothing: the others are still drained)."""
        return [] if self.stop_sent else [Abort(event.rank, event.text)]

    def tick(self, now: float) -> list[Instruction]:
        if self.finished:
            return []
        if self.grace is not None and now >= self.grace:
            return self.finish(sorted(self.running() - self.stopped), [])
        if self.patience is not None and now >= self.patience:
            return self.finish([], sorted(self.running() - self.stopped))
        return []

    def lagging(self) -> set[int]:
        """The ranks whose acknowledgement the end does not wait for: under partial work with
        ``linger``, the living workers that sent no live result in the last round."""
        s = self.session
        if not s.settings.linger or s.piecework is None:
            return set()
        return {s.ranks.rank(w) for w in s.piecework.lagging(s.live)}

    def check(self) -> list[Instruction]:
        """The end, once stopping and every rank that may run has acknowledged, but those
        known slow."""
        if not self.stopping or self.finished:
            return []
        waiting = self.running() - self.stopped
        if waiting - self.lagging():
            return []
        return self.finish([], sorted(waiting))

    def finish(self, unstopped: list[int], lingering: list[int]) -> list[Instruction]:
        """Forget the hung (their sends may never end), release the acknowledged, leave the
        lingering to the executor, and finish."""
        self.finished = True
        s, stream = self.session, self.session.stream
        running = self.running()
        loads = None if s.splitter is None else [int(k) for k in s.splitter.loads]
        outcome = Outcome(stream.theta, stream.records, stream.losses, dict(s.totals),
                          self.counters, stream.jobs, s.recodes, stream.thetas, loads,
                          sorted(self.timed_out), unstopped, s.withheld_tasks,
                          dict(sorted(s.handed.items())))
        hung = (self.timed_out - self.stopped) | set(unstopped)
        return [*(Forget(r) for r in sorted(hung)),
                *(Release(r) for r in sorted(self.stopped & running)),
                *(Linger(r) for r in lingering), Finish(outcome)]
