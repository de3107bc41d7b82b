"""The Session's job stream (pure): jobs served in order as they arrive, theta stepped at every
decode, each iteration reported with the loss of the theta it produced, checkpoints.

The loss of iteration t is asked for (``ComputeLoss``, a pass over the data on rank 0) after
iteration t + 1 has been sent out, so that bookkeeping never delays the workers; a job whose
workers return their loss with their results (``free_loss``) reports t with the decode of t + 1.
An evaluation on held-out data (``eval_every``) is asked for the same way, with the loss or alone.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from .events import (
    ComputeLoss,
    Instruction,
    JobArrived,
    JobDone,
    LossComputed,
    Record,
    Report,
    SaveCheckpoint,
    Started,
)
from .result import IterationRecord, JobRecord

if TYPE_CHECKING:
    from .session import Session
    from .settings import Settings


class Ready(NamedTuple):
    """An iteration decoded whose report waits: its record, the loss decoded for it (if any)
    and the theta it produced (None: the newest)."""

    record: IterationRecord | None  # None: a job resumed at its end (its final loss only)
    loss: float | None = None
    theta: np.ndarray | None = None


class Stream:
    def __init__(self, session: Session, settings: Settings) -> None:
        self.session, self.settings = session, settings
        self.clock = 0.0  # the newest time an event told
        self.theta = settings.work.theta0()
        self.job = settings.resume[0] if settings.resume else 0  # the job served or next
        self.serving = False
        self.arrivals: dict[int, float] = {}
        self.began = self.done = 0.0
        self.previous: IterationRecord | None = None  # decoded, its report not out yet
        # reports waiting for their loss or evaluation: last? the loss asked for?
        self.pending: list[tuple[Ready, bool, bool]] = []
        self.records: list[IterationRecord] = []
        self.losses: list[float | None] = []
        self.jobs: list[JobRecord] = []
        self.thetas: list[np.ndarray] = []

    def started(self, event: Started) -> list[Instruction]:
        self.clock = max(self.clock, event.now)
        return [Record({"record": "start", "jobs": self.settings.jobs,
                        "iterations": self.settings.iterations})]

    def arrived(self, event: JobArrived) -> list[Instruction]:
        """A job arrived: served at once if it is the next one and nothing is being served."""
        self.clock = max(self.clock, event.now)
        self.arrivals[event.job] = event.now
        if not self.serving and event.job == self.job:
            return self.begin()
        return []

    def begin(self) -> list[Instruction]:
        """Serve ``self.job`` from its first iteration (or the checkpoint's)."""
        s = self.settings
        self.serving, self.began, self.previous = True, self.clock, None
        first = 0
        if s.resume is not None and self.job == s.resume[0]:
            first, theta = s.resume[1], s.resume[2]
            self.theta = theta.copy()
        else:
            self.theta = self.session.work.theta0()
        if first >= s.iterations:  # resumed at a job's end: its final loss only
            self.done = self.clock
            out = self.session.ending.stop() if self.job == s.jobs - 1 else []
            return out + self.report(Ready(None), last=True)
        return self.session.open(self.job, first, self.clock, self.theta)

    def decoded(self, record: IterationRecord, result: np.ndarray | None, missing: np.ndarray,
                now: float) -> list[Instruction]:
        """Iteration (job, t) decoded at ``now``: theta stepped, a checkpoint if one is due,
        t + 1 sent out, then the report that was waiting; at a job's last, STOP (the last job)
        and its final loss."""
        self.clock = max(self.clock, now)
        s, work = self.settings, self.session.work  # re-coded after deaths
        produced = self.theta.copy() if work.free_loss else None  # where this iteration began
        if result is not None:
            self.theta = work.update(self.theta, result, missing, record.iteration)
        out: list[Instruction] = []
        t = record.iteration
        if s.checkpoint_every and (t + 1) % s.checkpoint_every == 0:
            out.append(SaveCheckpoint(record.job, t + 1, self.theta.copy()))
        ready = None
        if not work.free_loss:
            ready = Ready(record)  # its loss at the theta it produced: the newest, for now
        elif self.previous is not None:  # this decode carried the loss of previous' theta
            ready = Ready(self.previous, work.decoded_loss, produced)
        self.previous = record
        if t + 1 < s.iterations:
            out += self.session.open(record.job, t + 1, now, self.theta)
            return out + (self.report(ready) if ready is not None else [])
        self.done = now
        if record.job == s.jobs - 1:  # no more work: STOP now, so that a straggler reads it
            out += self.session.ending.stop()  # with the last purge, and acknowledges while
        if ready is not None and ready.record is not record:  # the last loss is computed here
            out += self.report(ready)
        return out + self.report(Ready(record), last=True)

    def report(self, ready: Ready, last: bool = False) -> list[Instruction]:
        """Report ``ready`` with its loss: decoded, else computed every ``loss_every``-th
        iteration and at a job's last (a ComputeLoss first)."""
        s = self.settings
        t = s.iterations - 1 if ready.record is None else ready.record.iteration
        due = s.loss_every and (t + 1) % s.loss_every == 0
        theta = self.theta if ready.theta is None else ready.theta
        loss = ready.loss is None and (last or (bool(due) and not self.session.work.free_loss))
        evaluate = s.eval_every is not None and ready.record is not None and (
            last or (s.eval_every > 0 and (t + 1) % s.eval_every == 0))
        if loss or evaluate:
            self.pending.append((ready._replace(theta=theta), last, loss))
            return [ComputeLoss(self.job, t, theta, loss, evaluate)]
        return self._reported(ready.record, ready.loss, theta, last)

    def loss(self, event: LossComputed) -> list[Instruction]:
        self.clock = max(self.clock, event.now)
        if not self.pending:
            raise RuntimeError(f"a loss of job {event.job} iteration {event.iteration} came, "
                               "none was asked for")
        ready, last, asked = self.pending[0]
        t = self.settings.iterations - 1 if ready.record is None else ready.record.iteration
        if (event.job, event.iteration) != (self.job, t):
            raise RuntimeError(f"the loss of job {event.job} iteration {event.iteration} came; "
                               f"that of job {self.job} iteration {t} was asked for")
        self.pending.pop(0)
        record = ready.record
        if record is not None and event.evaluation is not None:
            record = replace(record, evaluation=event.evaluation)
        return self._reported(record, event.loss if asked else ready.loss, ready.theta, last)

    def _reported(self, record: IterationRecord | None, loss: float | None,
                  theta: np.ndarray | None, last: bool) -> list[Instruction]:
        out: list[Instruction] = []
        if record is not None:
            self.records.append(record)
            self.losses.append(loss)
            out.append(Report(record, loss, theta))
        return out + (self._job_done(loss) if last else [])

    def _job_done(self, loss: float | None) -> list[Instruction]:
        """The job is done: its record, then the next job (if it has arrived) or the end."""
        arrival = self.arrivals.get(self.job, 0.0)
        self.jobs.append(JobRecord(self.job, arrival, self.began, self.done, self.done - arrival,
                                   loss))
        self.thetas.append(self.theta.copy())
        out: list[Instruction] = [JobDone(self.jobs[-1])]
        self.serving = False
        self.job += 1
        if self.job >= self.settings.jobs:
            return out + self.session.ending.shutdown(self.clock)
        if self.job in self.arrivals:
            return out + self.begin()
        return out + self.session.release_purges()  # no ITERATE follows at once: purge now
