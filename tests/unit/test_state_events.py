"""MasterState driven by typed events, in the manner of Dask's worker-state tests: feed a
sequence of events through ``handle`` and compare the whole list of actions each returns."""

from __future__ import annotations

import numpy as np
import pytest

from mpicoded.codes import make_code
from mpicoded.runtime.state import (
    Decoded,
    Forget,
    MasterState,
    Recode,
    ResultArrived,
    SendIterate,
    SendPurge,
    SendStop,
    StaleResults,
    StopAcknowledged,
    Tick,
    TimedOut,
    WorkerLost,
)


@pytest.fixture
def frc6():
    return make_code("frc", 6, stragglers=1)  # groups {0,1} {2,3} {4,5}


def result(code, worker, task, f, now, iteration=0):
    return ResultArrived(worker, 0, iteration, [task], (code.B[task] @ f)[None, :], now)


def test_a_decode_then_late_and_foreign_results_then_the_stop(frc6):
    f = np.random.default_rng(1).standard_normal((6, 2))
    state = MasterState(frc6)
    assert state.start_iteration(0, 0, now=0.0) == [SendIterate(w, 0, 0, (w,)) for w in range(6)]
    assert state.handle(result(frc6, 1, 1, f, 0.1)) == []
    assert state.handle(result(frc6, 3, 3, f, 0.2)) == []
    [decoded] = state.handle(result(frc6, 4, 4, f, 0.3))
    assert isinstance(decoded, Decoded) and np.allclose(decoded.result, f.sum(axis=0))
    # what the decode's observers (the task trace, the load split) read, from the action alone
    assert decoded.used == {1, 3, 4} and decoded.decoded_at == pytest.approx(0.3)
    assert decoded.arrivals == {1: [pytest.approx(0.1)], 3: [pytest.approx(0.2)],
                                4: [pytest.approx(0.3)]}
    assert state.release_purges() == [SendPurge(w, 0, 0) for w in (0, 2, 5)]
    # a purged worker's result that crossed the purge, and an old epoch's from another rank
    assert state.handle(result(frc6, 0, 0, f, 0.4)) == []
    assert state.handle(StaleResults(3)) == []
    assert state.stale_results == 4 and state.totals["stale_results"] == 4
    assert state.stop() == [SendStop(w) for w in range(6)]
    for w in range(6):
        assert not state.all_acked
        assert state.handle(StopAcknowledged(w)) == []
    assert state.all_acked


def test_a_loss_the_code_tolerates_is_forgotten_and_the_iteration_decodes(frc6):
    f = np.random.default_rng(3).standard_normal((6, 2))
    state = MasterState(frc6)
    state.start_iteration(0, 0, now=0.0)
    assert state.handle(WorkerLost(3)) == [Forget(3)]  # worker 2 still holds partitions 2, 3
    assert state.dead == {3} and state.totals["failed_workers"] == 1
    assert state.handle(result(frc6, 0, 0, f, 0.1)) == []
    assert state.handle(result(frc6, 2, 2, f, 0.2)) == []
    [decoded] = state.handle(result(frc6, 5, 5, f, 0.3))
    assert isinstance(decoded, Decoded) and np.allclose(decoded.result, f.sum(axis=0))
    assert state.release_purges() == [SendPurge(w, 0, 0) for w in (1, 4)]  # none to the dead


def test_losing_a_whole_group_asks_for_a_recode(frc6):
    state = MasterState(frc6)
    state.start_iteration(0, 0, now=0.0)
    assert state.handle(WorkerLost(0)) == [Forget(0)]  # its group mate holds partition 0
    assert state.handle(WorkerLost(1)) == [Forget(1), Recode(frozenset({0, 1}))]
    assert state.abandon() == [SendPurge(w, 0, 0) for w in (2, 3, 4, 5)]


def test_workers_silent_past_the_timeout_are_timed_out_then_lost(frc6):
    f = np.random.default_rng(5).standard_normal((6, 2))
    state = MasterState(frc6)
    state.start_iteration(0, 0, now=0.0)
    assert state.handle(result(frc6, 0, 0, f, 0.6)) == []
    assert state.handle(result(frc6, 2, 2, f, 0.7)) == []
    assert state.handle(Tick(now=0.9, timeout=1.0)) == []  # the iteration is younger than that
    # 1, 3, 4 and 5 owe results and sent none: lost in turn, and with 4 and 5 the last group
    assert state.handle(Tick(now=1.0, timeout=1.0)) == [
        TimedOut(1), Forget(1), TimedOut(3), Forget(3), TimedOut(4), Forget(4), TimedOut(5),
        Forget(5), Recode(frozenset({1, 3, 4, 5}))]
    assert state.handle(Tick(now=9.0, timeout=1.0)) == []  # lost already


def test_losses_between_iterations_ask_for_a_recode_when_the_next_one_opens(frc6):
    f = np.random.default_rng(4).standard_normal((6, 2))
    state = MasterState(frc6)
    state.start_iteration(0, 0, now=0.0)
    for w in (0, 2):
        assert state.handle(result(frc6, w, w, f, 0.1)) == []
    assert isinstance(state.handle(result(frc6, 4, 4, f, 0.2))[0], Decoded)
    assert state.handle(WorkerLost(4)) == [Forget(4)]  # decoded: nothing open to re-code
    assert state.handle(WorkerLost(5)) == [Forget(5)]
    assert state.start_iteration(0, 1, now=1.0) == [
        *(SendPurge(w, 0, 0) for w in (1, 3)), Recode(frozenset({4, 5}))]


def test_every_worker_lost_asks_for_a_recode_with_no_survivor(frc6):
    state = MasterState(frc6)
    state.start_iteration(0, 0, now=0.0)
    assert state.handle(WorkerLost(0)) == [Forget(0)]
    for w in range(1, 6):  # the iteration stays abandoned: every loss asks again
        assert state.handle(WorkerLost(w)) == [Forget(w), Recode(frozenset(range(w + 1)))]
    assert state.live == set() and state.totals["failed_workers"] == 6
    assert state.abandon() == [] and state.stop() == [] and state.all_acked


def test_losing_a_dead_worker_again_changes_nothing(frc6):
    state = MasterState(frc6)
    state.start_iteration(0, 0, now=0.0)
    assert state.handle(WorkerLost(2)) == [Forget(2)]
    assert state.handle(WorkerLost(2)) == []  # ULFM names a rank on every call that fails
    assert state.dead == {2} and state.totals["failed_workers"] == 1
    assert state.handle(WorkerLost(3)) == [Forget(3), Recode(frozenset({2, 3}))]
    assert state.handle(WorkerLost(3)) == []  # nor does it ask for the re-code twice
    assert state.dead == {2, 3} and state.totals["failed_workers"] == 2


def test_a_worker_gone_after_acknowledging_stop_is_no_loss(frc6):
    """Under ULFM a worker's exit after its STOP_ACK is reported as a failure: it left as told."""
    f = np.random.default_rng(5).standard_normal((6, 2))
    state = MasterState(frc6)
    state.start_iteration(0, 0, now=0.0)
    for w in (1, 3):
        assert state.handle(result(frc6, w, w, f, 0.1)) == []
    assert isinstance(state.handle(result(frc6, 5, 5, f, 0.2))[0], Decoded)
    assert state.stop() == [SendStop(w) for w in range(6)]
    assert state.handle(StopAcknowledged(3)) == []
    assert state.handle(WorkerLost(3)) == []
    assert state.dead == set() and state.totals["failed_workers"] == 0
    assert state.handle(WorkerLost(4)) == [Forget(4)]  # one that had not answered STOP: lost
    for w in (0, 1, 2):
        assert state.handle(StopAcknowledged(w)) == []
    assert not state.all_acked  # worker 5 has still to answer; 4 is not waited for
    assert state.handle(StopAcknowledged(5)) == [] and state.all_acked


def test_a_lost_workers_late_result_is_stale_and_it_gets_no_stop(frc6):
    f = np.random.default_rng(2).standard_normal((6, 2))
    state = MasterState(frc6)
    state.start_iteration(0, 0, now=0.0)
    assert state.handle(WorkerLost(2)) == [Forget(2)]
    assert state.handle(result(frc6, 2, 2, f, 0.1)) == []  # declared dead: never counted
    assert state.stale_results == 1
    assert state.stop() == [SendStop(w) for w in (0, 1, 3, 4, 5)]
