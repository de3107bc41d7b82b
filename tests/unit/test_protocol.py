"""Wire format round trips (pure numpy), and the layout table checked against what the pack
functions write."""

from __future__ import annotations

import numpy as np
import pytest

from mpicoded.core.layouts import LAYOUTS, Size
from mpicoded.core.protocol import (
    TRACE_FIELDS,
    Message,
    Tag,
    ack_fields,
    assign_fields,
    iterate_fields,
    on_board,
    pack_assign,
    pack_clock,
    pack_control,
    pack_iterate,
    pack_progress,
    pack_result,
    pack_trace,
    progress_fields,
    result_fields,
    result_trace,
    run_ids,
    trace_fields,
    unpack,
)
from mpicoded.core.trace import DROPPED, PURGED, SENT, TraceEntry
from mpicoded.core.tree_messages import (
    pack_part,
    pack_reduce,
    part_value,
    reduce_fields,
    relay_children,
    relay_of,
)

ENTRIES = [TraceEntry(0, 1, 0, 4, 10.5, 11.25, 3, DROPPED),
           TraceEntry(0, 2, 0, 8, 12.0, 12.5, 7, SENT)]


def test_iterate_round_trip_one_buffer_for_every_worker():
    theta = np.linspace(-1, 1, 9)
    msg = unpack(Tag.ITERATE, pack_iterate(3, 41, theta, {1: (4, 0, 7), 3: (2,), 4: ()},
                                           epoch=2))
    assert (msg.tag, msg.job, msg.iteration, msg.epoch) == (Tag.ITERATE, 3, 41, 2)
    assert [iterate_fields(msg, rank)[0] for rank in range(6)] == [(), (4, 0, 7), (), (2,), (),
                                                                   ()]
    assert np.array_equal(iterate_fields(msg, 1)[1], theta)


def test_an_iterate_naming_the_board_carries_its_slot_not_theta():
    """θ on rank 0's board: the ITERATE holds its (slot, stamp) in θ's place, and the task
    lists and the relay read as ever; one that carries θ names no board."""
    theta = np.linspace(-1, 1, 100_000)
    msg = unpack(Tag.ITERATE, pack_iterate(0, 7, theta, {1: (1,), 2: (2, 0)}, half=True,
                                           board=(3, 42)))
    assert len(msg.payload) < 20 and msg.worker == theta.size
    assert on_board(msg) == (3, 42) and iterate_fields(msg, 2)[0] == (2, 0)
    assert relay_of(msg) == ()
    assert on_board(unpack(Tag.ITERATE, pack_iterate(0, 7, theta, {1: (1,)}))) is None


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
    tasks, got, trace, runs = result_fields(msg)
    assert msg.worker == 6 and tasks == [8, 9] and np.array_equal(got, np.stack(values))
    assert trace.shape == (0, len(TRACE_FIELDS)) and runs is None


@pytest.mark.parametrize("half", [False, True])
def test_a_result_of_runs_has_a_value_a_run(half):
    """Runs of pieces (each computed as one sum): the ids of a run after its first travel as
    -(id + 1), and the values, one a run, come back with the runs' lengths; a piece of id 0
    inside a run is told from the start of one."""
    runs = [(4, 0, 5), (9,), (2, 3)]
    values = [np.arange(3.0) + i for i in range(3)]
    assert run_ids(runs) == [4, -1, -6, 9, 2, -4]
    msg = unpack(Tag.RESULT, pack_result(0, 2, 6, run_ids(runs), values, trace=ENTRIES,
                                         half=half))
    tasks, got, trace, lengths = result_fields(msg, half_width=3 if half else 0)
    assert tasks == [4, 0, 5, 9, 2, 3] and lengths == (3, 1, 2)
    assert np.array_equal(got, np.stack(values))
    assert [TraceEntry(*row) for row in trace.tolist()] == ENTRIES


def test_result_carries_trace_entries_after_its_values():
    msg = unpack(Tag.RESULT, pack_result(0, 2, 6, [8], [np.arange(4.0)], trace=ENTRIES))
    tasks, got, trace, _ = result_fields(msg)
    assert tasks == [8] and np.array_equal(got, [np.arange(4.0)])
    assert [TraceEntry(*row) for row in trace.tolist()] == ENTRIES  # field by field, in order


@pytest.mark.parametrize("width", [1, 4, 5])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_float32_results_take_half_the_slots_and_round_only_to_float32(width, n):
    """A job whose results travel as float32: values packed two to a slot (odd counts padded),
    the trace entries after them intact, and each value back as its float32 rounding (a view
    of the message: the decoder widens them as it adds)."""
    rng = np.random.default_rng(width * 10 + n)
    values = [rng.standard_normal(width) * 1e3 for _ in range(n)]
    entries = [(0, 1, 0, 4, 10.5, 11.25, 3, SENT)]
    half = pack_result(0, 2, 6, list(range(n)), values, trace=entries, half=True)
    full = pack_result(0, 2, 6, list(range(n)), values, trace=entries)
    assert len(full) - len(half) == n * width // 2
    msg = unpack(Tag.RESULT, half)
    tasks, got, trace, _ = result_fields(msg, half_width=width)
    assert tasks == list(range(n)) and got.dtype == np.float32 and got.shape == (n, width)
    assert np.shares_memory(got, msg.payload)
    np.testing.assert_array_equal(got, np.stack(values).astype(np.float32))
    np.testing.assert_allclose(got, np.stack(values), rtol=2**-24)
    assert np.array_equal(trace, np.array(entries)) and np.array_equal(result_trace(msg), trace)


@pytest.mark.parametrize("n", [1, 2, 9])
def test_a_float32_theta_takes_half_the_slots_and_comes_back_exact(n):
    """An ITERATE whose θ travels as float32: half the slots (one value stays float64), θ back
    as the same float32 values, a view of the message, and the task lists where they were."""
    theta = np.linspace(-1, 1, n).astype(np.float32).astype(np.float64)
    lists = {1: (4, 0, 7), 3: (2,)}
    half, full = pack_iterate(3, 41, theta, lists, half=True), pack_iterate(3, 41, theta, lists)
    assert len(full) - len(half) == n // 2
    msg = unpack(Tag.ITERATE, half)
    tasks, got = iterate_fields(msg, 1)
    assert tasks == (4, 0, 7) and iterate_fields(msg, 3)[0] == (2,)
    assert got.dtype == (np.float32 if n > 1 else np.float64) and np.array_equal(got, theta)
    assert np.shares_memory(got, half)


def test_the_relay_gives_each_rank_the_ranks_it_forwards_to():
    """Each rank forwards to those whose parent it is (0: rank 0's); a rank outside the relay,
    and an ITERATE without one, forward to none."""
    relay = ((4, 0), (2, 0), (6, 4), (1, 4), (5, 2), (3, 2))
    msg = unpack(Tag.ITERATE, pack_iterate(0, 1, THETA, {r: (r,) for r in range(1, 7)},
                                           relay=relay))
    order = relay_of(msg)
    assert order == relay and iterate_fields(msg, 5)[0] == (5,)
    assert [relay_children(order, r) for r in (0, 4, 2, 6, 1, 5, 3)] == [
        (4, 2), (6, 1), (5, 3), (), (), (), ()]
    assert relay_children(order, 7) == ()
    assert relay_of(unpack(Tag.ITERATE, pack_iterate(0, 1, THETA, {1: (0,)}))) == ()


def test_a_reduce_and_a_part_come_back_from_their_fields():
    """A REDUCE's terms and children; a PART's sum, float32 two a slot where it travels so."""
    msg = unpack(Tag.REDUCE, pack_reduce(4, 17, 1, 2, 0, [(5, 1.0), (9, -0.5)], ()))
    assert reduce_fields(msg) == (((5, 1.0), (9, -0.5)), ()) and (msg.worker, msg.task) == (0, 2)
    value = np.linspace(-1, 1, 7)
    half = unpack(Tag.PART, pack_part(4, 17, 1, 2, 5, value, half=True))
    assert len(half.payload) == 4 and part_value(half).dtype == np.float32
    np.testing.assert_array_equal(part_value(half), value.astype(np.float32))
    np.testing.assert_array_equal(part_value(unpack(Tag.PART, pack_part(4, 17, 1, 2, 5, value))),
                                  value)


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


def sections(msg: Message) -> list[np.ndarray]:
    """``msg``'s payload cut into the sections its tag's layout names, sized by its header."""
    width = len(TRACE_FIELDS)
    sizes = {Size.COUNT: msg.count, Size.TASK: msg.task, Size.ENTRIES: msg.task * width, Size.ONE: 1}
    layout = [section.size for section in LAYOUTS[msg.tag].payload]
    known, at = [], 0
    for size in layout:  # the offsets' last says where the lists end: read as it comes
        n = int(msg.payload[at - 1]) if size == Size.LAST else sizes.get(size)
        known.append(n)
        at += n or 0
    rest = len(msg.payload) - sum(n for n in known if n is not None)
    assert rest >= 0 and (rest == 0 or None in known), f"{msg.tag.name}: {rest} values left"
    out, at = [], 0
    for n in known:
        out.append(msg.payload[at : at + (rest if n is None else n)])
        at += len(out[-1])
    return out


THETA = np.linspace(-1, 1, 9)
VALUES = [np.arange(5.0), np.arange(5.0) * 2]
# A message of every float64 kind, what its used header slots hold and its sections in order.
WIRE = [
    (Tag.ITERATE, pack_iterate(3, 41, THETA, {1: (4, 0, 7), 3: (2,)}, epoch=2, relay=((3, 0), (1, 3))),
     {"job": 3, "iteration": 41, "epoch": 2, "worker": 9, "task": 5, "count": 9},
     [THETA, [0, 0, 3, 3, 4], [4, 0, 7, 2], [3, 0, 1, 3]]),
    (Tag.RESULT, pack_result(3, 41, 6, [8, 9], VALUES, epoch=2, trace=ENTRIES),
     {"job": 3, "iteration": 41, "epoch": 2, "worker": 6, "task": 2, "count": 2},
     [[8, 9], np.concatenate(VALUES), np.ravel(ENTRIES)]),
    (Tag.PURGE, pack_control(4, 17, epoch=1), {"job": 4, "iteration": 17, "epoch": 1}, []),
    (Tag.STOP, pack_control(), {}, []),
    (Tag.STOP_ACK, pack_control(worker=3, counters=(10, 7, 3, 900), trace=ENTRIES),
     {"worker": 3, "task": 2, "count": 4}, [[10, 7, 3, 900], np.ravel(ENTRIES)]),
    (Tag.PROGRESS, pack_progress(4, 17, 3, 12, 2.5, 0.75, epoch=1),
     {"job": 4, "iteration": 17, "epoch": 1, "worker": 3, "task": 12, "count": 2},
     [[2.5], [0.75]]),
    (Tag.PING, pack_control(), {"worker": -1, "count": 0}, [[]]),  # the master's ping
    (Tag.PING, pack_clock(3, 12.5), {"worker": 3, "count": 1}, [[12.5]]),  # the answer
    (Tag.TRACE, pack_trace(3, ENTRIES), {"worker": 3, "task": 2, "count": 16}, [np.ravel(ENTRIES)]),
    (Tag.ASSIGN, pack_assign(4, 17, (5, 2, 9), epoch=1),
     {"job": 4, "iteration": 17, "epoch": 1, "count": 3}, [[5, 2, 9]]),
    (Tag.RELEASE, pack_control(), {}, []),
    (Tag.REDUCE, pack_reduce(4, 17, 1, 2, 3, [(5, 1.0), (9, -0.5)], (6, 2)),
     {"job": 4, "iteration": 17, "epoch": 1, "worker": 3, "task": 2, "count": 2},
     [[5, 9], [1.0, -0.5], [6, 2]]),
    (Tag.PART, pack_part(4, 17, 1, 2, 5, np.arange(4.0)),
     {"job": 4, "iteration": 17, "epoch": 1, "worker": 5, "task": 2, "count": 4},
     [np.arange(4.0)]),
]


def test_every_tag_has_a_layout_whose_sections_its_header_sizes():
    assert set(LAYOUTS) == set(Tag)
    for tag, layout in LAYOUTS.items():
        sizes = [section.size for section in layout.payload]
        assert sizes.count(Size.REST) <= 1, tag.name
        if layout.body != "float64":  # a pickle or raw bytes: no header, one section
            assert (layout.key, layout.worker, layout.task, layout.count) == (False, None, None, None)
            assert sizes == [Size.REST], tag.name
        assert layout.count is not None or Size.COUNT not in sizes, tag.name
        assert layout.task is not None or not {Size.TASK, Size.ENTRIES} & set(sizes), tag.name
    assert {tag for tag, _, _, _ in WIRE} == {t for t, layout in LAYOUTS.items()
                                              if layout.body == "float64"}


@pytest.mark.parametrize(("tag", "buf", "header", "parts"), WIRE, ids=[w[0].name for w in WIRE])
def test_header_slots_and_sections_are_what_the_layout_says(tag, buf, header, parts):
    """The slots the layout says are used hold what was packed (the others it leaves alone),
    and its sections, sized by the header, give back every part in order."""
    layout = LAYOUTS[tag]
    used = {*(("job", "iteration", "epoch") if layout.key else ()), *(("worker",) if layout.worker
            else ()), *(("task",) if layout.task else ()), *(("count",) if layout.count else ())}
    assert set(header) == used
    msg = unpack(tag, buf)
    assert {slot: getattr(msg, slot) for slot in used} == header
    got = sections(msg)
    assert len(got) == len(parts) and all(np.array_equal(g, p) for g, p in zip(got, parts, strict=True))


def test_assign_progress_and_trace_come_back_from_their_fields():
    """The kinds the round trips above leave out."""
    assert assign_fields(unpack(Tag.ASSIGN, pack_assign(4, 17, (5, 2, 9)))) == (5, 2, 9)
    assert progress_fields(unpack(Tag.PROGRESS, pack_progress(4, 17, 3, 12, 2.5, 0.75))) == (2.5, 0.75)
    trace = trace_fields(unpack(Tag.TRACE, pack_trace(3, ENTRIES)))
    assert [TraceEntry(*row) for row in trace.tolist()] == ENTRIES


def test_half_results_fill_the_values_section_two_to_a_slot():
    """A float32 RESULT: the section between ids and trace entries holds the values two to a
    slot, the last padded, and the trace entries still sit where ``task`` says."""
    values = [np.arange(3.0) + t / 2 for t in range(3)]  # 9 values: 5 slots
    entries = [TraceEntry(1, 2, 0, 7, 1.0, 2.0, 1, PURGED)]
    ids, packed, trace = sections(unpack(Tag.RESULT, pack_result(1, 2, 4, [7, 3, 0], values,
                                                                 trace=entries, half=True)))
    assert list(ids) == [7, 3, 0] and len(packed) == 5 and np.array_equal(trace, np.ravel(entries))
    assert np.array_equal(packed.view(np.float32), np.append(np.concatenate(values), 0.0))


def test_each_message_to_the_master_becomes_its_event():
    """A RESULT of the open epoch keeps its values (float32 where they travel so), one
    of another epoch only its ids and entries; PROGRESS, TRACE and STOP_ACK their fields; a
    late PING nothing; a tag the master never gets is an error."""
    from mpicoded.core import events as ev
    from mpicoded.core.reading import event_of

    entry = TraceEntry(0, 3, 1, 7, 0.5, 0.75, 2, SENT)
    values = [np.array([1.5, -2.0, 3.25])]
    half = unpack(Tag.RESULT, pack_result(0, 3, 4, [7], values, 1, [entry], half=True))
    got = event_of(half, 5, 9.0, 1, half_width=3)
    assert isinstance(got, ev.ResultArrived) and (got.rank, got.tasks, got.now) == (5, [7], 9.0)
    assert np.array_equal(got.values, [[1.5, -2.0, 3.25]]) and got.values.dtype == np.float32
    assert got.entries.tolist() == [list(entry)]
    stale = event_of(half, 5, 9.0, 2)  # a re-code since: its width may be another's
    assert stale.tasks == [7] and stale.values is None and stale.entries.tolist() == [list(entry)]
    progress = event_of(unpack(Tag.PROGRESS, pack_progress(0, 3, 4, 7, 1.5, 0.2, 1)), 5, 0, 1)
    assert progress == ev.ProgressReported(5, 0, 3, 1, 1.5, 0.2)
    trace = event_of(unpack(Tag.TRACE, pack_trace(4, [entry])), 5, 0, 1)
    assert isinstance(trace, ev.TraceArrived) and trace.entries.tolist() == [list(entry)]
    ack = event_of(unpack(Tag.STOP_ACK, pack_control(worker=4, counters=(1, 2, 3, 4))), 5, 0, 1)
    assert isinstance(ack, ev.StopAcknowledged) and ack.counters == (1, 2, 3, 4)
    assert event_of(unpack(Tag.PING, pack_clock(4, 1.0)), 5, 0, 1) is None
    with pytest.raises(RuntimeError, match="unexpected PURGE from rank 5"):
        event_of(unpack(Tag.PURGE, pack_control(0, 3)), 5, 0, 1)


def test_the_lists_of_iterates_withheld_are_those_last_sent():
    """An ITERATE withheld with the ASSIGN that replaced its list: the ASSIGN's list counts; a
    PURGE among them changes nothing; each iteration once."""
    from mpicoded.core.reading import withheld_lists

    theta = np.zeros(2)
    sent = [(pack_iterate(0, 5, theta, {2: (1, 2, 3), 3: (4,)}), Tag.ITERATE),
            (pack_assign(0, 5, (3, 9)), Tag.ASSIGN),
            (pack_iterate(0, 6, theta, {2: (7,)}), Tag.ITERATE),
            (pack_control(0, 6), Tag.PURGE)]
    assert withheld_lists(2, sent) == {(0, 5, 0): (3, 9), (0, 6, 0): (7,)}
