"""MasterState driven by typed events, in the manner of Dask's worker-state tests: feed a
sequence of events through ``handle`` and compare the whole list of actions each returns."""

from __future__ import annotations

import numpy as np
import pytest

from mpicoded.codes import make_code
from mpicoded.runtime.state import (
    Decoded,
    MasterState,
    Recode,
    ResultArrived,
    SendIterate,
    SendPurge,
    SendStop,
    StaleResults,
    StopAcknowledged,
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


def test_losing_a_whole_group_asks_for_a_recode_once(frc6):
    state = MasterState(frc6)
    state.start_iteration(0, 0, now=0.0)
    assert state.handle(WorkerLost(0)) == []  # its group mate still holds partition 0
    assert state.handle(WorkerLost(1)) == [Recode(frozenset({0, 1}))]
    assert state.handle(WorkerLost(1)) == []  # told twice: once is enough
    assert state.totals["failed_workers"] == 2


def test_a_lost_workers_late_result_is_stale_and_it_gets_no_stop(frc6):
    f = np.random.default_rng(2).standard_normal((6, 2))
    state = MasterState(frc6)
    state.start_iteration(0, 0, now=0.0)
    assert state.handle(WorkerLost(2)) == []
    assert state.handle(result(frc6, 2, 2, f, 0.1)) == []  # declared dead: never counted
    assert state.stale_results == 1
    assert state.stop() == [SendStop(w) for w in (0, 1, 3, 4, 5)]
