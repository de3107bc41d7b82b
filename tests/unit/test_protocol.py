"""Wire format round trips (pure numpy)."""

from __future__ import annotations

import numpy as np
import pytest

from mpicoded.runtime.protocol import (
    DROPPED,
    SENT,
    TRACE_FIELDS,
    Tag,
    TraceEntry,
    ack_fields,
    iterate_fields,
    pack_control,
    pack_iterate,
    pack_progress,
    pack_result,
    progress_fields,
    result_fields,
    result_trace,
    unpack,
)


def test_iterate_round_trip_one_buffer_for_every_worker():
    theta = np.linspace(-1, 1, 9)
    msg = unpack(Tag.ITERATE, pack_iterate(3, 41, theta, {1: (4, 0, 7), 3: (2,), 4: ()},
                                           epoch=2))
    assert (msg.tag, msg.job, msg.iteration, msg.epoch) == (Tag.ITERATE, 3, 41, 2)
    assert [iterate_fields(msg, rank)[0] for rank in range(6)] == [(), (4, 0, 7), (), (2,), (),
                                                                   ()]
    assert np.array_equal(iterate_fields(msg, 1)[1], theta)


def test_iterate_task_lists_built_once_follow_a_changed_schedule():
    """The task lists are built once per schedule: a re-split's new lists, the old ones again
    and a new theta each time all come out as sent."""
    schedules = [{1: (0,), 2: (1,)}, {1: (0, 1), 2: ()}, {2: (1,), 1: (0,)}, {1: (0,), 3: (5, 1)}]
    for i, tasks in enumerate(schedules * 2):
        theta = np.full(3, float(i))
        msg = unpack(Tag.ITERATE, pack_iterate(0, i, theta, tasks))
        for rank in range(5):
            assert iterate_fields(msg, rank)[0] == tuple(tasks.get(rank, ()))
        assert np.array_equal(iterate_fields(msg, 1)[1], theta)
    column = np.arange(3.0).reshape(3, 1)  # what a job's step may return: sent flat
    msg = unpack(Tag.ITERATE, pack_iterate(0, 9, column, {1: (0,)}))
    assert np.array_equal(iterate_fields(msg, 1)[1], column.ravel())


def test_result_round_trip_single_and_multi():
    values = [np.arange(5.0), np.arange(5.0) * 2]
    msg = unpack(Tag.RESULT, pack_result(0, 2, 6, [8, 9], values))
    tasks, got, trace = result_fields(msg)
    assert msg.worker == 6 and tasks == [8, 9] and np.array_equal(got, np.stack(values))
    assert trace.shape == (0, len(TRACE_FIELDS))


def test_result_carries_trace_entries_after_its_values():
    entries = [TraceEntry(0, 1, 0, 4, 10.5, 11.25, 3, DROPPED),
               TraceEntry(0, 2, 0, 8, 12.0, 12.5, 7, SENT)]
    msg = unpack(Tag.RESULT, pack_result(0, 2, 6, [8], [np.arange(4.0)], trace=entries))
    tasks, got, trace = result_fields(msg)
    assert tasks == [8] and np.array_equal(got, [np.arange(4.0)])
    assert [TraceEntry(*row) for row in trace.tolist()] == entries  # field by field, in order


@pytest.mark.parametrize("width", [1, 4, 5])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_float32_results_take_half_the_slots_and_round_only_to_float32(width, n):
    """A job whose results travel as float32: values packed two to a slot (odd counts padded),
    the trace entries after them intact, and each value back as its float32 rounding."""
    rng = np.random.default_rng(width * 10 + n)
    values = [rng.standard_normal(width) * 1e3 for _ in range(n)]
    entries = [(0, 1, 0, 4, 10.5, 11.25, 3, SENT)]
    half = pack_result(0, 2, 6, list(range(n)), values, trace=entries, half=True)
    full = pack_result(0, 2, 6, list(range(n)), values, trace=entries)
    assert len(full) - len(half) == n * width // 2
    msg = unpack(Tag.RESULT, half)
    tasks, got, trace = result_fields(msg, half_width=width)
    assert tasks == list(range(n)) and got.dtype == np.float64 and got.shape == (n, width)
    np.testing.assert_array_equal(got, np.stack(values).astype(np.float32))
    np.testing.assert_allclose(got, np.stack(values), rtol=2**-24)
    assert np.array_equal(trace, np.array(entries)) and np.array_equal(result_trace(msg), trace)


def test_purge_names_its_iteration():
    msg = unpack(Tag.PURGE, pack_control(4, 17))
    assert (msg.tag, msg.job, msg.iteration, msg.count) == (Tag.PURGE, 4, 17, 0)


def test_control_carries_counters():
    msg = unpack(Tag.STOP_ACK, pack_control(worker=3, counters=(10, 7, 3, 900)))
    assert msg.worker == 3 and list(msg.payload) == [10, 7, 3, 900]
    assert ack_fields(msg)[0] == (10, 7, 3, 900) and ack_fields(msg)[1].shape == (0, 8)
    entry = (1, 5, 2, 3, 1.0, 1.0, 0, DROPPED)
    counters, trace = ack_fields(unpack(Tag.STOP_ACK, pack_control(
        worker=3, counters=(10, 7, 3, 900), trace=[entry])))
    assert counters == (10, 7, 3, 900) and np.array_equal(trace, [entry])


def test_a_message_of_no_known_kind_is_refused_by_name():
    with pytest.raises(ValueError, match="tag 99, which no message kind has"):
        unpack(99, pack_control(worker=1, counters=(0, 0, 0)))
    assert unpack(int(Tag.PURGE), pack_control(worker=1, counters=(0, 0, 0))).tag is Tag.PURGE


def test_progress_comes_back_from_its_fields():
    msg = unpack(Tag.PROGRESS, pack_progress(4, 17, 3, 12, 2.5, 0.75))
    assert (msg.task, msg.worker) == (12, 3) and progress_fields(msg) == (2.5, 0.75)
