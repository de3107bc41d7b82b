"""The Session's losses (pure): a worker dead or silent past --iteration-timeout is forgotten,
the load split again among the living, the open round handed over or, when the living can no
longer decode it, the code re-built for them under a new epoch and the round sent again."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..codes import Code, rebuild, rescaled_tolerance
from . import relay
from .events import Abort, Forget, Instruction, Log, Purge, Record, Tick, WakeAt, WorkerLost
from .piecelist import run_rows
from .round import Round

if TYPE_CHECKING:
    from .session import Session
    from .settings import Workload


def task_share(work: Workload, code: Code) -> float:
    """The share of the data a mean task of ``code`` computes over (its work, relatively): a
    coded block is one partition's rows, a task coded on results ``work_units`` 1/n shares."""
    units = float(work.task_cost().mean())
    return units / (code.n_partitions if work.data_coded else code.n_workers)


class Losses:
    def __init__(self, session: Session) -> None:
        self.session = session

    def lost(self, event: WorkerLost) -> list[Instruction]:
        s = self.session
        s.stream.clock = max(s.stream.clock, event.now)
        s.ending.gone.add(event.rank)
        return self.lose([event.rank], s.stream.clock)

    def lose(self, ranks: list[int], now: float) -> list[Instruction]:
        """``ranks`` are lost: each is forgotten and gets no more work, the load is split again
        among the living, and the open round goes on without them (handed over under partial
        work) or, if the living can no longer decode it, the code is re-built. A rank already
        lost, or one that acknowledged STOP (its exit is reported as a failure under ULFM),
        is no loss."""
        s = self.session
        lost = [w for w in (s.ranks.index(r) for r in ranks)
                if w is not None and w in s.live and s.ranks.rank(w) not in
                s.ending.stopped]
        if not lost:
            return s.ending.check()
        for w in lost:
            s.live.discard(w)
            s.totals["failed_workers"] += 1
        shown = [s.ranks.rank(w) for w in lost]
        out: list[Instruction] = [
            *(Forget(r) for r in shown),
            Log("warning", f"worker rank(s) {shown} failed; {len(s.live)} workers left"),
            Record({"record": "failure", "ranks": shown, "workers_left": len(s.live)})]
        if s.splitter is not None:
            for w in lost:
                s.splitter.exclude(w)
        rnd = s.round
        if rnd is not None and rnd.reducing is not None and {
                s.ranks.rank(w) for w in lost} & set(rnd.reducing.plan):
            out += s.reduction.lost(rnd, now)  # their values went with them
        elif rnd is not None and not rnd.done:
            if rnd.relay:  # those it relayed θ to may not have it
                out += relay.resend(s, rnd, rnd.relayed_below({s.ranks.rank(w) for w in lost}))
            for w in lost:
                rnd.outstanding.pop(w, None)
            if rnd.log is not None:  # the values they sent went with them: their pieces are
                seen = set(rnd.decoder.seen)  # owed again, by nobody (handed over below)
                rnd.redecode(s.decoding, s.tolerance, s.live)
                for t in seen - rnd.decoder.seen:
                    rnd.owner[t] = lost[0]
            if not s._decodable():
                return out + self.recode("workers died", now)
            if s.piecework is not None:
                s.piecework.forget(lost)
                out += s._gives(s.piecework.hand_over(rnd, s.live, now))
        if s.splitter is not None and s.splitter.kind != "adaptive":
            out.append(s.place(s.splitter.schedule()))  # only adaptive has all data
        return out + s.ending.check()

    def tick(self, event: Tick) -> list[Instruction]:
        """The clock: workers silent past --iteration-timeout are lost; past the shutdown's
        grace, the run ends without those that never acknowledged STOP (past its patience,
        with them lingering)."""
        s = self.session
        s.stream.clock = max(s.stream.clock, event.now)
        timeout = s.settings.iteration_timeout
        if s.ending.stopping:
            return s.ending.tick(event.now)
        rnd = s.round
        if timeout is None or rnd is None or rnd.done:
            return []
        silent = rnd.silent(event.now, timeout, self.owing(rnd))
        out: list[Instruction] = []
        if silent:
            ranks = [s.ranks.rank(w) for w in silent]
            s.ending.timed_out.update(ranks)
            out += [Log("warning", f"worker rank(s) {ranks} sent nothing in {timeout:g} s "
                                   "(--iteration-timeout)"), *self.lose(ranks, event.now)]
        rnd = s.round
        if rnd is not None and not rnd.done:
            wake = self.wake(rnd, event.now + timeout)  # owing none now: maybe after a
            if wake not in out:  # hand-over, so look again; a re-opened round asked already
                out.append(wake)
        return out

    def wake(self, rnd: Round, at: float) -> WakeAt:
        """The Tick to ask for: at ``at``, or before if a worker the open round waits on will
        have been silent past --iteration-timeout by then, or the ranks a relayed θ has not
        reached are due to be sent it directly."""
        timeout = self.session.settings.iteration_timeout
        due = [] if rnd.relay_due is None else [rnd.relay_due]
        if timeout is None:
            return WakeAt(min([at, *due]))
        return WakeAt(min([at, *due, *(rnd.deadline(w, timeout) for w in self.owing(rnd))]))

    def owing(self, rnd: Round) -> set[int]:
        """The living workers the open round waits on: those that owe tasks, or under partial
        work those that own a piece still needed (one robbed of its pieces owes nothing)."""
        s = self.session
        if s.piecework is None:
            return {w for w, tasks in rnd.outstanding.items() if tasks} & s.live
        needs = rnd.decoder.needs
        return {w for t, w in rnd.owner.items() if needs(t)} & s.live

    def recode(self, reason: str, now: float = 0.0,
               reopen: tuple[int, int, np.ndarray] | None = None) -> list[Instruction]:
        """Abandon the open round, re-build the code and the data for the living and open the
        round again at ``now`` (or ``reopen``'s (job, iteration, theta), not sent yet)."""
        s = self.session
        rnd = s.round
        out: list[Instruction] = []
        if rnd is not None and (not rnd.done or rnd.reducing is not None):
            rnd.done = True
            summing = set() if rnd.reducing is None else set(rnd.reducing.plan)
            out += [Purge(s.ranks.rank(w), rnd.job, rnd.iteration, rnd.epoch)
                    for w in sorted(s.live) if rnd.outstanding.get(w)
                    or s.ranks.rank(w) in summing]
            reopen = (rnd.job, rnd.iteration, s.stream.theta)
        survivors = sorted(s.live)
        if not survivors:
            return [*out, Abort(None, "every worker has failed: the job cannot go on")]
        live = [s.ranks.rank(w) for w in survivors]
        code = rebuild(s.code, len(live))
        s.tolerance = rescaled_tolerance(s.tolerance, s.code, code)
        work = s.work.recoded(code)
        if s.splitter is not None:  # what is known of the living, for tasks of a new size
            scale = task_share(work, code) / task_share(s.work, s.code)
            s.splitter = s.splitter.for_survivors(survivors, code.n_tasks, scale)
        s.code, s.work, s.ranks = code, work, s.ranks.recoded(live)
        s.epoch += 1
        s.live = set(range(code.n_workers))
        if s.settings.fit_chunks:  # the survivors' partitions are new: cut them evenly too
            s.chunk_rows = work.default_chunk_rows()
            s.run_rows = run_rows(s.chunk_rows, value_size=s.settings.value_size) \
                if s.run_rows else 0
        s._cut(None if s.pieces is None else work.pieces(s.chunk_rows,
                                                                fit=s.settings.fit_chunks))
        s.round, s.held = None, []
        s.recodes += 1
        shown = ", ".join(f"{k}={v}" for k, v in code.built_with.items())
        out += [Log("info", f"{reason}: re-coded for {len(live)} workers: {code.name} {shown}, "
                            f"tolerance {s.tolerance} (epoch {s.epoch})"),
                Record({"record": "recode", "reason": reason, "epoch": s.epoch,
                        "workers": len(live), "code": code.name}),
                s.place()]
        if reopen is not None:
            out += s.open(*reopen[:2], now, reopen[2])
        return out
