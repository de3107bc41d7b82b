"""MasterState without MPI: purges, stale results, exactly one decode per iteration."""

from __future__ import annotations

import numpy as np
import pytest

from mpicoded.codes import make_code
from mpicoded.runtime.state import (
    Decoded,
    Forget,
    MasterState,
    SendIterate,
    SendPurge,
    SendStop,
)


def value(code, task, f):
    return (code.B[task] @ f)[None, :]


@pytest.fixture
def frc6():
    return make_code("frc", 6, stragglers=1)  # groups {0,1} {2,3} {4,5}


def test_start_sends_each_worker_its_schedule(frc6):
    state = MasterState(frc6)
    actions = state.start_iteration(0, 0, now=0.0)
    assert actions == [SendIterate(w, 0, 0, (w,)) for w in range(6)]


def test_decode_purges_exactly_the_workers_with_work_left(frc6):
    f = np.random.default_rng(0).standard_normal((6, 3))
    state = MasterState(frc6)
    state.start_iteration(0, 0, now=1.0)
    assert state.on_result(0, 0, 0, [0], value(frc6, 0, f), now=1.1) == []
    assert state.on_result(2, 0, 0, [2], value(frc6, 2, f), now=1.2) == []
    actions = state.on_result(5, 0, 0, [5], value(frc6, 5, f), now=1.5)
    assert [type(a) for a in actions] == [Decoded]  # the purges are held (see below)
    assert state.release_purges() == [SendPurge(w, 0, 0) for w in (1, 3, 4)]
    assert state.release_purges() == []  # once
    decoded = actions[-1]
    assert np.allclose(decoded.result, f.sum(axis=0))
    rec = decoded.record
    assert rec.purged_tasks == 3 and rec.results_received == 3 and rec.results_used == 3
    assert rec.messages == 3 and rec.volume == 3.0 and rec.missing_partitions == 0
    assert rec.wall_s == pytest.approx(0.5)


def decoded_with_work_left(code):
    """A state whose iteration 0 decoded from workers 0, 2 and 5; 1, 3 and 4 still owe."""
    state = MasterState(code)
    state.start_iteration(0, 0, now=0.0)
    for w in (0, 2, 5):
        actions = state.on_result(w, 0, 0, [w], None, now=0.1)
    assert isinstance(actions[-1], Decoded)
    return state


def test_the_next_iterate_supersedes_the_purges_held(frc6):
    """A purge goes only to a worker that gets no ITERATE of the next round (here worker 3,
    with no tasks in it), first; the others drop what is left when the ITERATE comes."""
    state = decoded_with_work_left(frc6)
    schedule = tuple(() if w == 3 else (w,) for w in range(6))
    actions = state.start_iteration(0, 1, now=1.0, schedule=schedule)
    assert actions[0] == SendPurge(3, 0, 0)
    assert [a.worker for a in actions[1:] if isinstance(a, SendIterate)] == [0, 1, 2, 4, 5]
    assert len(actions) == 6 and state.release_purges() == []


def test_stop_supersedes_the_purges_held_and_the_dead_get_none(frc6):
    state = decoded_with_work_left(frc6)
    assert state.stop() == [SendStop(w) for w in range(6)] and state.release_purges() == []
    state = decoded_with_work_left(frc6)
    state.on_worker_failed(4)
    assert state.release_purges() == [SendPurge(w, 0, 0) for w in (1, 3)]


def test_exactly_one_decode_and_late_results_are_stale(frc6):
    f = np.ones((6, 2))
    state = MasterState(frc6)
    state.start_iteration(0, 0, now=0.0)
    decodes = 0
    for w in (0, 2, 4, 1, 3, 5):
        decodes += sum(isinstance(a, Decoded) for a in state.on_result(w, 0, 0, [w],
                                                                          value(frc6, w, f), 0.1))
    assert decodes == 1
    assert state.stale_results == 3  # workers 1, 3, 5 arrived after the decode
    state.start_iteration(0, 1, now=1.0)
    # a result of iteration 0 arriving during iteration 1 is counted and never decoded
    assert state.on_result(1, 0, 0, [1], value(frc6, 1, f), 1.1) == []
    assert state.stale_results == 4
    assert state.current.decoder.results_used == 0
    for w in (0, 2):
        state.on_result(w, 0, 1, [w], value(frc6, w, f), 1.2)
    decoded = state.on_result(4, 0, 1, [4], value(frc6, 4, f), 1.3)[-1]
    assert decoded.record.stale_results == 4 and state.stale_results == 0
    assert state.totals["stale_results"] == 4 and state.totals["iterations"] == 2


def test_cannot_start_before_decoding(frc6):
    state = MasterState(frc6)
    state.start_iteration(0, 0, 0.0)
    with pytest.raises(RuntimeError, match="still open"):
        state.start_iteration(0, 1, 0.0)


def test_ids_only_mode_for_simulation(frc6):
    state = MasterState(frc6)
    state.start_iteration(0, 0, 0.0)
    for w in (1, 3):
        state.on_result(w, 0, 0, [w], None, 0.0)
    decoded = state.on_result(4, 0, 0, [4], None, 0.0)[-1]
    assert isinstance(decoded, Decoded) and decoded.result is None


def test_one_message_with_several_results():
    """MCC-style single messages: one message, several results; a worker whose whole list
    arrived is not purged even when the decode happens part-way through its message."""
    from mpicoded.codes import Code, PeelingDecoder

    code = Code("test", np.eye(2), ((0, 1), (1,)), "each", PeelingDecoder, messages="single")
    state = MasterState(code)
    state.start_iteration(0, 0, 0.0)
    assert state.on_result(1, 0, 0, [1], np.ones((1, 3)), 0.0) == []
    actions = state.on_result(0, 0, 0, [0, 1], np.ones((2, 3)), 0.0)
    assert [type(a) for a in actions] == [Decoded]
    record = actions[0].record
    assert record.messages == 2 and record.results_received == 3 and record.purged_tasks == 0
    assert record.volume == pytest.approx(1.5)


def test_stop_and_acks(frc6):
    state = MasterState(frc6)
    assert state.stop() == [SendStop(w) for w in range(6)]
    for w in range(5):
        state.on_stop_ack(w)
    assert not state.all_acked
    state.on_stop_ack(5)
    assert state.all_acked


def test_without_purging_nothing_is_purged(frc6):
    """--no-purge (public peers' behaviour): the decode sends no PURGE and counts none."""
    state = MasterState(frc6, purge=False)
    state.start_iteration(0, 0, 0.0)
    for w in (0, 2):
        state.on_result(w, 0, 0, [w], None, 0.0)
    actions = state.on_result(4, 0, 0, [4], None, 0.0)
    assert [type(a) for a in actions] == [Decoded] and actions[0].record.purged_tasks == 0
    assert state.release_purges() == []


def test_dead_worker_within_tolerance_needs_no_recode(frc6):
    state = MasterState(frc6)
    state.start_iteration(0, 0, 0.0)
    assert state.on_worker_failed(1) == [Forget(1)]  # its group partner, 0, still computes
    assert 1 not in state.workers and state.totals["failed_workers"] == 1
    assert state.on_result(1, 0, 0, [1], None, 0.1) == []  # a dead worker's late result: stale
    assert state.stale_results == 1
    for w in (0, 2):
        state.on_result(w, 0, 0, [w], None, 0.2)
    assert isinstance(state.on_result(4, 0, 0, [4], None, 0.3)[-1], Decoded)
    assert all(a.worker != 1 for a in state.start_iteration(0, 1, 1.0))
    assert state.stop() == [SendStop(w) for w in (0, 2, 3, 4, 5)]


def test_losing_a_whole_group_asks_for_a_recode(frc6):
    from mpicoded.runtime.state import Recode

    state = MasterState(frc6)
    state.start_iteration(0, 0, 0.0)
    assert state.on_worker_failed(2) == [Forget(2)]
    actions = state.on_worker_failed(3)  # group {2, 3} is gone: partitions 2, 3 are lost
    assert actions == [Forget(3), Recode(frozenset({2, 3}))]
    purges = state.abandon()
    assert {p.worker for p in purges} == {0, 1, 4, 5} and state.current.done


def test_a_result_from_an_abandoned_epoch_is_stale(frc6):
    state = MasterState(frc6, epoch=1)
    assert {a.epoch for a in state.start_iteration(0, 0, 0.0)} == {1}
    assert state.on_result(0, 0, 0, [0], None, 0.1, epoch=0) == []
    assert state.stale_results == 1 and state.current.received == 0
    assert state.on_result(0, 0, 0, [0], None, 0.1, epoch=1) == []
    assert state.current.received == 1


def test_every_result_in_without_a_decode_asks_for_a_recode():
    """A code that cannot decode even with every result (a sampled sparse code can be one) must
    not leave the master waiting for ever: the last result asks for a re-code."""
    from mpicoded.codes._base import Code
    from mpicoded.codes.decoders import GenericDecoder
    from mpicoded.runtime.state import Recode

    B = np.array([[1.0, 0.0], [2.0, 0.0], [1.0, 0.0]])  # partition 1 is in no task
    code = Code("broken", B, ((0,), (1,), (2,)), "each", GenericDecoder, {})
    state = MasterState(code)
    state.start_iteration(0, 0, now=0.0)
    f = np.ones((2, 2))
    assert state.on_result(0, 0, 0, [0], value(code, 0, f), now=0.1) == []
    assert state.on_result(2, 0, 0, [2], value(code, 2, f), now=0.2) == []
    actions = state.on_result(1, 0, 0, [1], value(code, 1, f), now=0.3)
    assert len(actions) == 1 and isinstance(actions[0], Recode)
    assert actions[0].dead == frozenset() and "cannot decode" in actions[0].reason


def test_silent_workers_are_those_owing_results_and_sending_none():
    code = make_code("uncoded", 3)
    state = MasterState(code)
    state.start_iteration(0, 0, now=0.0)
    assert state.silent(now=0.5, timeout=1.0) == []  # not yet
    state.on_result(1, 0, 0, [1], [np.ones(2)], now=0.8)
    assert state.silent(now=1.5, timeout=1.0) == [0, 2]  # 1 answered 0.7 s ago
    state.on_worker_failed(2)
    assert state.silent(now=1.5, timeout=1.0) == [0]  # 2 is already gone


def test_silence_counts_from_a_workers_last_result():
    """A worker that answered once, then hung, owing more, is silent a timeout later."""
    code = make_code("uncoded", 2)
    state = MasterState(code)
    state.start_iteration(0, 0, now=0.0, schedule=((0, 1), ()))
    state.on_result(0, 0, 0, [0], [np.ones(2)], now=0.5)
    assert state.silent(now=1.2, timeout=1.0) == []  # its last result was 0.7 s ago
    assert state.silent(now=1.6, timeout=1.0) == [0]


def test_describe_says_what_the_open_iteration_waits_for(frc6):
    state = MasterState(frc6)
    assert state.describe() == "epoch 0: no iteration opened yet"
    state.start_iteration(0, 3, 0.0)
    state.on_result(0, 0, 3, [0], None, 0.1)
    state.on_worker_failed(5)
    assert state.describe() == (
        "epoch 0, job 0 iteration 3 open: tasks decoded from [0], owed by live worker "
        "{1: [1], 2: [2], 3: [3], 4: [4]}, dead workers [5]")
