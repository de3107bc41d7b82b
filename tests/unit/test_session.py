"""The Session driven by events alone, in the manner of Dask's worker-state tests: feed events
through ``handle`` and compare the whole list of instructions each returns. Worker w is rank w + 1."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from sessions import Decodes, Driver

from mpicoded.codes import Code, make_code
from mpicoded.codes.decoders import GenericDecoder
from mpicoded.core.events import (
    Abort,
    ComputeLoss,
    Decoded,
    Finish,
    Forget,
    Iterate,
    JobDone,
    Log,
    LossComputed,
    Place,
    Purge,
    Record,
    Release,
    Report,
    ResultArrived,
    SaveCheckpoint,
    Settle,
    Stop,
    StopAcknowledged,
    Target,
    Tick,
    WakeAt,
    WorkerFailed,
)
from mpicoded.core.result import IterationRecord, JobRecord

FRC = make_code("frc", 6, stragglers=1)  # groups {0,1} {2,3} {4,5}, one task each
THETA = np.zeros(1)  # theta is compare=False in Iterate, Report, ComputeLoss, SaveCheckpoint
END = Finish(None)  # type: ignore[arg-type]  # the outcome is compare=False too
ALL = tuple((w + 1, (w,)) for w in range(6))
DIED = "every worker has failed: the job cannot go on"


def it(t, lists=ALL, job=0, epoch=0):
    return Iterate(job, t, epoch, lists, THETA)


def without(*workers):
    return tuple(entry for entry in ALL if entry[0] - 1 not in workers)


def report(t, wall, loss=None, purged=3, started=0.0, received=3, used=3, stale=0, job=0,
           epoch=0, volume=None):
    return Report(IterationRecord(job, t, wall, used, received, stale, purged, received,
                                  float(received) if volume is None else volume, 0, started,
                                  epoch), loss)


def decoded(t, used, job=0, epoch=0):
    return Decoded(job, t, epoch, frozenset(used))


def stops(*ranks):
    return [Stop(r) for r in ranks]


def failure(ranks, left):
    return [*(Forget(r) for r in ranks),
            Log("warning", f"worker rank(s) {ranks} failed; {left} workers left"),
            Record({"record": "failure", "ranks": ranks, "workers_left": left})]


def recoded(epoch, workers, code="gfrc", reason="workers died"):
    return [Log("info", f"{reason}: re-coded for {workers} workers: {code} stragglers=1, "
                        f"tolerance 0 (epoch {epoch})"),
            Record({"record": "recode", "reason": reason, "epoch": epoch, "workers": workers,
                    "code": code})]


def place(epoch, *ranks, worlds=None):
    """Each rank's set-up of a one-task-a-worker code: worker i holds task i."""
    worlds = worlds or ranks
    return Place(epoch, tuple(Target(r, wr, i, (i,)) for i, (r, wr) in
                              enumerate(zip(ranks, worlds, strict=True))), None, None, None, 0)


def play(d, workers=(0, 2, 4), now=0.0, **kw):
    """Results of ``workers``' one task each, all at ``now``: what the last returned."""
    for w in workers:
        out = d.result(w, [w], now=now, **kw)
    return out


def acknowledge(d, *ranks):
    return [i for r in ranks for i in d.handle(StopAcknowledged(r))]


class Split:
    """A load split that gives schedules[i] after i decodes (then the last for ever)."""

    kind = "uniform"

    def __init__(self, *schedules):
        self.schedules, self.loads = list(schedules), [1] * 6

    def schedule(self):
        return self.schedules[0]

    def observe(self, *args):
        if len(self.schedules) > 1:
            self.schedules.pop(0)


# ---- rounds, decodes and purges (ported from the MasterState tests) --------------------------

def test_begin_places_every_worker_and_the_arrival_sends_the_first_round():
    d = Driver(FRC)
    assert d.placed == [place(0, 1, 2, 3, 4, 5, 6), Settle()]
    assert d.started == [Record({"record": "start", "jobs": 1, "iterations": 100})]
    assert d.open() == [it(0)]
    assert d.open() == []  # the job served arrives again: no second round while one is open


def test_a_decode_is_exact_purges_are_held_and_the_next_round_goes_out():
    work = Decodes(FRC)
    d = Driver(FRC, work=work)
    f = np.random.default_rng(0).standard_normal((6, 3))
    d.open(now=1.0)
    assert d.result(0, [0], FRC.B[[0]] @ f, now=1.1) == []
    assert d.result(2, [2], FRC.B[[2]] @ f, now=1.2) == []
    assert d.result(5, [5], FRC.B[[5]] @ f, now=1.5) == [
        decoded(0, {0, 2, 5}), it(1), report(0, 0.5, started=1.0)]  # no purge: ITERATE is one
    [(result, missing)] = work.decoded
    assert np.allclose(result, f.sum(axis=0)) and len(missing) == 0


def test_the_next_iterate_supersedes_the_purges_held():
    """A purge goes, first, only to a worker the next round leaves out (worker 3 here)."""
    quiet = tuple(() if w == 3 else (w,) for w in range(6))
    d = Driver(FRC, splitter=Split(FRC.schedule, quiet))
    d.open()
    assert play(d, (0, 2, 5), 0.5) == [
        decoded(0, {0, 2, 5}), Purge(4, 0, 0, 0), it(1, without(3)), report(0, 0.5)]
    assert play(d, (0, 2, 4), 1.0) == [decoded(1, {0, 2, 4}), it(2, without(3)),
                                       report(1, 0.5, started=0.5, purged=2)]


def test_stop_supersedes_the_purges_held():
    d = Driver(FRC, iterations=1)
    d.open()
    assert play(d, (0, 2, 5), 0.5) == [decoded(0, {0, 2, 5}), *stops(1, 2, 3, 4, 5, 6),
                                       ComputeLoss(0, 0, THETA)]


def test_held_purges_go_when_no_iterate_follows_and_the_dead_get_none():
    """Two jobs: the second waits for its arrival, so job 0's purges go at its end."""
    d = Driver(FRC, iterations=1, jobs=2)
    d.open()
    assert play(d, (0, 2, 5), 0.5) == [decoded(0, {0, 2, 5}), ComputeLoss(0, 0, THETA)]
    assert d.lose(3, now=0.6) == failure([4], 5)
    assert d.handle(LossComputed(0, 0, 2.0, 0.7)) == [
        report(0, 0.5, 2.0), JobDone(JobRecord(0, 0.0, 0.0, 0.5, 0.5, 2.0)),
        Purge(2, 0, 0, 0), Purge(5, 0, 0, 0)]
    assert d.open(now=1.0, job=1) == [it(0, without(3), job=1)]


def test_exactly_one_decode_per_iteration_and_late_results_are_stale():
    d = Driver(FRC)
    d.open()
    assert play(d, (0, 2), 0.1) == []
    assert d.result(4, [4], now=0.1) == [decoded(0, {0, 2, 4}), it(1), report(0, 0.1)]
    assert play(d, (1, 3, 5), 0.2, iteration=0) == []  # after the decode: stale
    assert d.result(1, [1], now=0.3, iteration=0) == []  # iteration 0 during 1: stale too
    assert play(d, (0, 2), 0.4) == []
    assert d.result(4, [4], now=0.5) == [
        decoded(1, {0, 2, 4}), it(2), report(1, 0.4, started=0.1, stale=4)]
    assert d.session.totals["stale_results"] == 4 and d.session.totals["iterations"] == 2


def test_results_without_values_decode_from_ids_alone():
    work = Decodes(FRC)
    d = Driver(FRC, work=work)
    d.open()
    assert play(d, (1, 3, 4)) == [decoded(0, {1, 3, 4}), it(1), report(0, 0.0)]
    assert work.decoded == []  # nothing to decode: theta is not stepped


def test_one_message_codes_purge_only_the_workers_whose_list_is_not_all_in():
    """mcc: a message of several results; the decode part-way through one purges not its sender."""
    mcc = make_code("mcc", 3, load=2)  # 6 tasks, any 3 decode; worker w holds 2w, 2w + 1
    work = Decodes(mcc)
    d = Driver(mcc, work=work)
    f = np.random.default_rng(1).standard_normal((3, 2))
    lists = ((1, (0, 1)), (2, (2, 3)), (3, (4, 5)))
    assert d.open() == [it(0, lists)]
    assert d.result(0, [0, 1], mcc.B[[0, 1]] @ f, now=0.1) == []
    assert d.result(1, [2, 3], mcc.B[[2, 3]] @ f, now=0.2) == [
        decoded(0, {0, 1, 2}), it(1, lists),
        Report(IterationRecord(0, 0, 0.2, 3, 4, 0, 2, 2, 4 / 3, 0, 0.0, 0), None)]
    assert np.allclose(work.decoded[0][0], f)


def test_without_purging_nothing_is_purged():
    """--no-purge (public peers' behaviour): no PURGE is held, none is counted."""
    d = Driver(FRC, iterations=1, jobs=2, purge=False)
    d.open()
    assert play(d) == [decoded(0, {0, 2, 4}), ComputeLoss(0, 0, THETA)]
    assert d.handle(LossComputed(0, 0, None)) == [
        report(0, 0.0, purged=0), JobDone(JobRecord(0, 0.0, 0.0, 0.0, 0.0, None))]


# ---- losses ----------------------------------------------------------------------------------

def test_a_loss_the_code_tolerates_is_forgotten_and_the_round_decodes():
    d = Driver(FRC, iterations=2)
    d.open()
    assert d.lose(1, now=0.1) == failure([2], 5)  # worker 0 still holds partitions 0, 1
    assert d.result(1, [1], now=0.2) == []  # a lost worker's late result: stale
    assert play(d, (0, 2), 0.3) == []
    assert d.result(5, [5], now=0.4) == [
        decoded(0, {0, 2, 5}), it(1, without(1)), report(0, 0.4, stale=1, purged=2)]
    assert play(d, (0, 3, 4), 0.5) == [decoded(1, {0, 3, 4}), *stops(1, 3, 4, 5, 6),
                                       ComputeLoss(0, 1, THETA)]
    assert d.session.totals["failed_workers"] == 1


def test_losing_a_whole_group_recodes_and_the_old_epoch_is_stale():
    d = Driver(FRC)
    d.open()
    assert d.lose(2, now=0.1) == failure([3], 5)
    assert d.lose(2) == []  # ULFM names a rank on every call that fails
    assert d.lose(3, now=0.2) == [  # partitions 2, 3 are lost: re-code for the survivors
        *failure([4], 4), *(Purge(r, 0, 0, 0) for r in (1, 2, 5, 6)),
        *recoded(1, 4, "frc"), place(1, 1, 2, 5, 6),
        it(0, ((1, (0,)), (2, (1,)), (5, (2,)), (6, (3,))), epoch=1)]
    assert d.lose(3) == []  # nor is the re-code asked for twice
    assert d.result(0, [0], now=0.3, epoch=0) == []  # the abandoned epoch's: stale
    assert d.handle(ResultArrived(3, 0, 0, 1, [2], None, 0.3)) == []  # no worker of the code
    assert d.result(0, [0], now=0.4) == []
    assert d.handle(ResultArrived(5, 0, 0, 1, [2], None, 0.5)) == [  # new worker 2: rank 5
        decoded(0, {0, 2}, epoch=1), it(1, ((1, (0,)), (2, (1,)), (5, (2,)), (6, (3,))), epoch=1),
        report(0, 0.3, started=0.2, received=2, used=2, purged=2, stale=2, epoch=1)]
    assert d.session.recodes == 1 and d.session.totals["failed_workers"] == 2


class Partitions(Decodes):
    """A job's shape that records which code's partitions each step was given."""

    steps: list[int] = []

    def recoded(self, code):
        return Partitions(code)

    def update(self, theta, decoded, missing, step):
        self.steps.append(self.code.n_partitions)
        return theta


def test_after_a_recode_theta_steps_with_the_recoded_job():
    """The step after a re-code is the re-coded job's (its partitions are the survivors'):
    the old job's, with the old partitions, failed over MPI (an index out of range)."""
    Partitions.steps = []
    d = Driver(FRC, work=Partitions(FRC))
    d.open()
    f = np.ones((6, 2))
    for w in (0, 2, 4):
        d.result(w, [w], FRC.B[[w]] @ f, now=0.1)
    d.lose(2, now=0.2)
    d.lose(3, now=0.2)  # partitions 2, 3 lost: re-coded for four workers
    code = d.session.code
    for w in range(code.n_workers):
        d.handle(ResultArrived(d.session.ranks.rank(w), 0, 1, 1, [w],
                               code.B[[w]] @ np.ones((code.n_partitions, 2)), 0.3))
    assert Partitions.steps == [6, code.n_partitions] and code.n_partitions == 4


def test_every_worker_lost_aborts():
    d = Driver(FRC)
    d.open()
    for w in range(5):  # frc for 4, then for 2 workers, each a re-code
        d.lose(w)
    assert d.session.epoch == 2
    assert d.lose(5) == [*failure([6], 0), Abort(None, DIED)]
    assert d.session.totals["failed_workers"] == 6


def test_losses_between_jobs_recode_when_the_next_round_opens():
    """Job 1 arrived early: job 0's held purges go first, then the re-code and its round."""
    d = Driver(FRC, iterations=1, jobs=2)
    d.open()
    assert d.open(now=0.2, job=1) == []
    assert play(d, (0, 2, 4), 0.5) == [decoded(0, {0, 2, 4}), ComputeLoss(0, 0, THETA)]
    assert d.lose(4, now=0.6) == failure([5], 5)  # nothing open to re-code
    assert d.lose(5, now=0.7) == failure([6], 4)
    assert d.handle(LossComputed(0, 0, None, 0.8)) == [
        report(0, 0.5), JobDone(JobRecord(0, 0.0, 0.0, 0.5, 0.5, None)),
        Purge(2, 0, 0, 0), Purge(4, 0, 0, 0), *recoded(1, 4, "frc"), place(1, 1, 2, 3, 4),
        it(0, ALL[:4], job=1, epoch=1)]


def test_every_result_in_without_a_decode_recodes():
    """A code that cannot decode even with every result must not leave the master waiting."""
    B = np.array([[1.0, 0.0], [2.0, 0.0], [1.0, 0.0]])  # partition 1 is in no task
    d = Driver(Code("broken", B, ((0,), (1,), (2,)), "each", GenericDecoder, {}))
    d.open()
    assert play(d, (0, 2), 0.1) == []
    assert d.result(1, [1], now=0.3) == [
        *recoded(1, 3, reason="every result is in and the code cannot decode them"),
        place(1, 1, 2, 3), it(0, ALL[:3], epoch=1)]


def test_a_worker_gone_after_acknowledging_stop_is_no_loss():
    """Under ULFM a worker's exit after its STOP_ACK is reported as a failure: it left as told."""
    d = Driver(FRC, iterations=1)
    d.open()
    assert play(d, (1, 3, 5), 0.5) == [decoded(0, {1, 3, 5}), *stops(1, 2, 3, 4, 5, 6),
                                       ComputeLoss(0, 0, THETA)]
    assert acknowledge(d, 4) == []
    assert d.lose(3, now=0.6) == []
    assert d.session.totals["failed_workers"] == 0
    assert d.lose(4, now=0.7) == failure([5], 5)  # one that had not answered STOP: lost
    assert acknowledge(d, 1, 2, 3) == []
    assert d.handle(LossComputed(0, 0, None, 0.8)) == [
        report(0, 0.5), JobDone(JobRecord(0, 0.0, 0.0, 0.5, 0.5, None))]
    out = acknowledge(d, 6)  # the last: 5 is dead, 4 acknowledged then died
    assert out == [*(Release(r) for r in (1, 2, 3, 6)), END]
    assert out[-1].outcome.totals["failed_workers"] == 1 and out[-1].outcome.unstopped == []


def test_describe_says_what_the_open_round_waits_for():
    d = Driver(FRC)
    assert d.session.describe() == "epoch 0: no iteration opened yet"
    d.open()
    d.result(0, [0], now=0.1)
    d.lose(5)
    assert d.session.describe() == (
        "epoch 0, job 0 iteration 0 open: tasks decoded from [0], owed by "
        "{1: [1], 2: [2], 3: [3], 4: [4]}; lost workers [5]")


# ---- --iteration-timeout ---------------------------------------------------------------------

def test_silence_past_the_timeout_loses_a_worker_counted_from_its_last_result():
    """ucmmc: worker w holds tasks w, w + 1; silent workers 1 and 3 are tolerated."""
    ucmmc = make_code("ucmmc", 4)
    d = Driver(ucmmc, iterations=2, iteration_timeout=1.0)
    lists = tuple((w + 1, ucmmc.schedule[w]) for w in range(4))
    assert d.open() == [it(0, lists), WakeAt(1.0)]
    assert play(d, (0, 2), 0.5) == []
    assert d.handle(Tick(0.9)) == [WakeAt(1.0)]  # not yet
    assert d.handle(Tick(1.0)) == [
        Log("warning", "worker rank(s) [2, 4] sent nothing in 1 s (--iteration-timeout)"),
        *failure([2, 4], 2), WakeAt(1.5)]  # 0 and 2 answered 0.5 s ago
    assert d.handle(Tick(1.2)) == [WakeAt(1.5)]
    assert d.result(0, [1], now=1.3) == []
    assert d.result(2, [3], now=1.5) == [
        decoded(0, {0, 1, 2, 3}), it(1, (lists[0], lists[2])), WakeAt(2.5),
        report(0, 1.5, purged=0, received=4, used=4, volume=1.0)]
    assert d.handle(Tick(9.0)) == [  # then 0 and 2 in iteration 1: nobody is left
        Log("warning", "worker rank(s) [1, 3] sent nothing in 1 s (--iteration-timeout)"),
        *failure([1, 3], 0), Abort(None, DIED)]


def test_a_timeout_that_takes_a_whole_group_recodes():
    d = Driver(FRC, iteration_timeout=1.0)
    d.open()
    assert play(d, (0, 2), 0.6) == []
    assert d.handle(Tick(1.0)) == [
        Log("warning", "worker rank(s) [2, 4, 5, 6] sent nothing in 1 s (--iteration-timeout)"),
        *failure([2, 4, 5, 6], 2), *recoded(1, 2, "frc"), place(1, 1, 3),
        it(0, ((1, (0,)), (3, (1,))), epoch=1), WakeAt(2.0)]


def test_timed_out_workers_get_stop_and_are_forgotten_at_the_end():
    ucmmc = make_code("ucmmc", 4)
    d = Driver(ucmmc, iterations=1, iteration_timeout=1.0)
    d.open()
    play(d, (0, 2), 0.5)
    d.handle(Tick(1.0))
    d.result(0, [1], now=1.3)
    assert d.result(2, [3], now=1.4) == [decoded(0, {0, 1, 2, 3}), *stops(1, 2, 3, 4),
                                         ComputeLoss(0, 0, THETA)]  # 2, 4 are alive maybe
    assert d.handle(LossComputed(0, 0, 0.5, 1.5)) == [
        report(0, 1.4, 0.5, purged=0, received=4, used=4, volume=1.0),
        JobDone(JobRecord(0, 0.0, 0.0, 1.4, 1.4, 0.5)), WakeAt(6.5)]  # the grace: 5 s at least
    out = acknowledge(d, 1, 2, 3, 4)
    assert out == [*(Release(r) for r in (1, 2, 3, 4)), END]  # all acknowledged: none hung
    assert out[-1].outcome.timed_out == [2, 4] and out[-1].outcome.unstopped == []


# ---- the stream ------------------------------------------------------------------------------

def test_the_loss_of_an_iteration_is_asked_after_the_next_goes_out_and_stop_before_the_last():
    d = Driver(FRC, loss_every=1, iterations=3)
    assert d.open() == [it(0)]
    assert play(d, now=0.5) == [decoded(0, {0, 2, 4}), it(1), ComputeLoss(0, 0, THETA)]
    assert d.handle(LossComputed(0, 0, 3.0, 0.6)) == [report(0, 0.5, 3.0)]
    assert play(d, now=1.0) == [decoded(1, {0, 2, 4}), it(2), ComputeLoss(0, 1, THETA)]
    assert d.handle(LossComputed(0, 1, 2.0, 1.1)) == [report(1, 0.5, 2.0, started=0.5)]
    assert play(d, now=1.5) == [decoded(2, {0, 2, 4}), *stops(1, 2, 3, 4, 5, 6),
                                ComputeLoss(0, 2, THETA)]
    assert d.handle(LossComputed(0, 2, 1.0, 1.6)) == [
        report(2, 0.5, 1.0, started=1.0), JobDone(JobRecord(0, 0.0, 0.0, 1.5, 1.5, 1.0))]
    assert d.session.stream.losses == [3.0, 2.0, 1.0]


def test_an_evaluation_is_asked_every_eval_every_iterations_and_at_the_end():
    """Beside the loss where one is due, alone where not (the loss then stays the decoded or
    missing one); the report's record carries what came back."""
    d = Driver(FRC, loss_every=2, iterations=3, eval_every=1)
    d.open()
    assert play(d, now=0.5) == [decoded(0, {0, 2, 4}), it(1),
                                ComputeLoss(0, 0, THETA, with_loss=False, evaluate=True)]
    measured = {"accuracy": 0.5}
    assert d.handle(LossComputed(0, 0, None, 0.6, measured)) == [
        Report(replace(report(0, 0.5).record, evaluation=measured), None)]
    assert play(d, now=1.0) == [decoded(1, {0, 2, 4}), it(2),
                                ComputeLoss(0, 1, THETA, evaluate=True)]
    assert d.handle(LossComputed(0, 1, 2.0, 1.1, {"accuracy": 0.75})) == [
        Report(replace(report(1, 0.5, started=0.5).record, evaluation={"accuracy": 0.75}), 2.0)]
    assert play(d, now=1.5)[-1] == ComputeLoss(0, 2, THETA, evaluate=True)
    at_end = Driver(FRC, iterations=2, eval_every=0)  # at the end only
    at_end.open()
    assert play(at_end, now=0.5)[-1] == report(0, 0.5)
    assert play(at_end, now=1.0)[-1] == ComputeLoss(0, 1, THETA, evaluate=True)
    never = Driver(FRC, iterations=2)  # a job with no evaluation
    never.open()
    play(never, now=0.5)
    assert play(never, now=1.0)[-1] == ComputeLoss(0, 1, THETA)


def test_the_end_stops_every_running_rank_then_releases_them_once_all_acknowledged():
    d = Driver(FRC, iterations=1)
    d.open()
    assert play(d, now=0.5) == [decoded(0, {0, 2, 4}), *stops(1, 2, 3, 4, 5, 6),
                                ComputeLoss(0, 0, THETA)]
    assert acknowledge(d, 1, 2, 3, 4, 5) == []  # before the last loss: not stopping yet
    assert d.handle(LossComputed(0, 0, 0.25, 0.6)) == [
        report(0, 0.5, 0.25), JobDone(JobRecord(0, 0.0, 0.0, 0.5, 0.5, 0.25))]  # 6 owes its ack
    out = d.handle(StopAcknowledged(6, (1, 1, 0, 7)))
    assert out == [*(Release(r) for r in range(1, 7)), END]
    outcome = out[-1].outcome
    assert outcome.losses == [0.25] and outcome.counters[5] == (1, 1, 0, 7)
    assert outcome.totals["iterations"] == 1 and outcome.unstopped == outcome.timed_out == []


def test_the_shutdowns_grace_finishes_without_those_that_never_acknowledged():
    d = Driver(FRC, iterations=1, iteration_timeout=2.0)
    assert d.open() == [it(0), WakeAt(2.0)]
    play(d, now=0.5)
    assert d.handle(LossComputed(0, 0, 1.0, 0.6)) == [
        report(0, 0.5, 1.0), JobDone(JobRecord(0, 0.0, 0.0, 0.5, 0.5, 1.0)), WakeAt(5.6)]
    assert acknowledge(d, 1, 2, 3, 4, 5) == []
    assert d.handle(Tick(5.0)) == []
    out = d.handle(Tick(5.6))
    assert out == [Forget(6), *(Release(r) for r in range(1, 6)), END]
    assert out[-1].outcome.unstopped == [6]
    assert d.handle(StopAcknowledged(6)) == [] and d.handle(Tick(9.0)) == []


def test_a_worker_failure_aborts_before_stop_and_changes_nothing_after():
    d = Driver(FRC, iterations=1)
    d.open()
    assert d.handle(WorkerFailed(3, "Traceback ...")) == [Abort(3, "Traceback ...")]
    play(d)
    assert d.handle(WorkerFailed(3, "Traceback ...")) == []


def test_a_second_job_waits_for_its_arrival_and_one_arrived_early_begins_at_once():
    d = Driver(FRC, iterations=1, jobs=3)
    d.open()
    play(d, now=0.5)
    assert d.handle(LossComputed(0, 0, None, 0.5)) == [
        report(0, 0.5), JobDone(JobRecord(0, 0.0, 0.0, 0.5, 0.5, None)),
        *(Purge(r, 0, 0, 0) for r in (2, 4, 6))]
    assert d.open(now=2.0, job=2) == []  # not its turn: job 1 has not arrived
    assert d.open(now=3.0, job=1) == [it(0, job=1)]
    assert play(d, now=3.5) == [decoded(0, {0, 2, 4}, job=1), ComputeLoss(1, 0, THETA)]
    assert d.handle(LossComputed(1, 0, None, 3.5)) == [
        report(0, 0.5, started=3.0, job=1), JobDone(JobRecord(1, 3.0, 3.0, 3.5, 0.5, None)),
        it(0, job=2)]  # job 2 is waiting: no purge, its ITERATE supersedes them


def test_a_checkpoint_every_checkpoint_every_iterations():
    d = Driver(FRC, iterations=5, checkpoint_every=2)
    d.open()
    assert play(d, now=0.25) == [decoded(0, {0, 2, 4}), it(1), report(0, 0.25)]
    assert play(d, now=0.5) == [decoded(1, {0, 2, 4}), SaveCheckpoint(0, 2, THETA), it(2),
                                report(1, 0.25, started=0.25)]
    assert play(d, now=0.75) == [decoded(2, {0, 2, 4}), it(3), report(2, 0.25, started=0.5)]
    assert play(d, now=1.0) == [decoded(3, {0, 2, 4}), SaveCheckpoint(0, 4, THETA), it(4),
                                report(3, 0.25, started=0.75)]
    assert play(d, now=1.25) == [decoded(4, {0, 2, 4}), *stops(1, 2, 3, 4, 5, 6),
                                 ComputeLoss(0, 4, THETA)]  # 5 is no multiple of 2


# ---- after a failover ------------------------------------------------------------------------

def test_an_adopted_run_places_nothing_and_the_missing_workers_are_lost():
    """World rank 2 died in the failover; the survivors' ranks are those of the new world."""
    d = Driver(FRC, iterations=2, adopt=({1: 1, 3: 2, 4: 3, 5: 4, 6: 5}, 0, False))
    assert d.placed == [Settle()]
    assert d.session.totals["failed_workers"] == 1
    lists = ((1, (0,)), (2, (2,)), (3, (3,)), (4, (4,)), (5, (5,)))
    assert d.open() == [it(0, lists)]
    assert d.handle(ResultArrived(1, 0, 0, 0, [0], None, 0.1)) == []
    assert d.handle(ResultArrived(2, 0, 0, 0, [2], None, 0.2)) == []
    assert d.handle(ResultArrived(5, 0, 0, 0, [5], None, 0.3)) == [
        decoded(0, {0, 2, 5}), it(1, lists), report(0, 0.3, purged=2)]


def test_an_adopted_run_whose_group_is_gone_recodes_when_its_round_opens():
    d = Driver(FRC, adopt=({1: 1, 2: 2, 5: 3, 6: 4}, 0, False))  # group {2, 3} died
    assert d.placed == [Settle()]
    assert d.open() == [*recoded(1, 4, "frc"), place(1, 1, 2, 3, 4, worlds=(1, 2, 5, 6)),
                        it(0, ALL[:4], epoch=1)]


def test_an_adopted_recoded_run_recodes_for_its_survivors():
    d = Driver(FRC, adopt=({1: 1, 2: 2, 5: 3, 6: 4}, 1, True))
    assert d.placed == [*recoded(2, 4, "frc", "taken over from a re-coded run"),
                        place(2, 1, 2, 3, 4, worlds=(1, 2, 5, 6)), Settle()]
    assert d.session.totals["failed_workers"] == 2
    assert d.open() == [it(0, ALL[:4], epoch=2)]


def test_a_dead_workers_load_is_split_among_the_living():
    """Under a declared (optimal) split a loss re-splits the tasks among the living and places
    what moved; under the adaptive split every worker holds every task, so nothing is placed
    and the next round's lists leave the dead out."""
    from mpicoded.balance.split import Moments
    from mpicoded.balance.splitter import Splitter

    mds = make_code("mds", 6, partitions=12, redundancy=1.5)
    m = np.array([1.0, 1.0, 1.0, 3.0, 3.0, 3.0])
    for kind in ("optimal", "adaptive"):
        split = Splitter(kind, mds.n_tasks, 6, Moments(m, m**2, np.full(6, 0.1)))
        d = Driver(mds, splitter=split)
        d.open()
        out = d.lose(5, now=0.1)
        assert out[:3] == failure([6], 5)
        assert sum(split.loads) == mds.n_tasks and split.loads[5] == 0
        if kind == "optimal":
            (place,) = out[3:]
            assert isinstance(place, Place) and [t.rank for t in place.targets] == [1, 2, 3, 4, 5]
            assert [t.tasks for t in place.targets] == list(split.schedule()[:5])
        else:
            assert out[3:] == []
