"""The task trace on the master (pure): workers' entries joined with what only the master
knows, on its clock."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mpicoded.core.trace import DROPPED, OUTCOMES, PURGED, SENT, TaskTrace


def entry(iteration, task, start, end, outcome=SENT, chunks=2, job=0, epoch=0):
    return np.array([[job, iteration, epoch, task, start, end, chunks, outcome]], dtype=float)


def test_used_received_stale_purged_and_dropped():
    trace = TaskTrace()
    trace.opened(0, 0, 0)
    trace.add(1, entry(0, 3, 1.0, 2.0))
    trace.add(2, entry(0, 3, 1.0, 2.5))  # a replica of task 3: the first one counts
    trace.add(3, entry(0, 4, 1.0, 2.6))  # arrived, the decoder took it, but did not need it
    assert trace.take() == []  # not known until the decode
    trace.decoded({3})
    trace.add(4, entry(0, 4, 1.0, 3.0))  # after the decode: stale
    trace.add(5, entry(0, 5, 1.0, 1.5, PURGED, chunks=1))
    trace.add(5, entry(0, 6, 1.5, 1.5, DROPPED, chunks=0))
    got = [(r.worker, r.task, r.outcome, r.chunks) for r in trace.take()]
    assert got == [(1, 3, "used", 2), (2, 3, "received", 2), (3, 4, "received", 2),
                   (4, 4, "stale", 2), (5, 5, "purged", 1), (5, 6, "dropped", 0)]
    assert {o for _, _, o, _ in got} == set(OUTCOMES)
    assert trace.take() == []


def test_results_of_a_worker_declared_failed_are_stale():
    trace = TaskTrace()
    trace.opened(0, 0, 0)
    trace.add(1, entry(0, 3, 1.0, 2.0), stale=True)  # timed out, its result late
    trace.add(2, entry(0, 3, 1.0, 2.5))
    trace.decoded({3})
    assert [(r.worker, r.outcome) for r in trace.take()] == [(1, "stale"), (2, "used")]


def test_results_of_another_iteration_or_epoch_are_stale():
    trace = TaskTrace()
    trace.opened(0, 5, 1)
    trace.add(0, entry(4, 0, 0.0, 1.0, epoch=1))
    trace.add(0, entry(5, 0, 0.0, 1.0, epoch=0))  # the abandoned attempt before a re-code
    assert [r.outcome for r in trace.take()] == ["stale", "stale"]


def test_an_abandoned_iteration_received_but_used_nothing():
    trace = TaskTrace()
    trace.opened(0, 2, 0)
    trace.add(0, entry(2, 1, 0.0, 1.0))
    trace.opened(0, 2, 1)  # re-coded: the iteration starts again in a new epoch
    assert [r.outcome for r in trace.take()] == ["received"]


def test_worker_clocks_are_shifted_onto_the_masters():
    trace = TaskTrace(default_offset=-100.0)
    trace.set_offset(1, sent=10.0, reply=1005.0, back=10.2)  # the worker's clock is 994.9 ahead
    trace.set_offset(3, sent=10.0, reply=110.5, back=11.0)  # one clock: -100 is consistent
    assert trace.offsets[3] == -100.0
    trace.opened(0, 0, 0)
    trace.add(1, entry(0, 0, 1005.0, 1005.5))
    trace.add(2, entry(0, 1, 110.0, 111.0))  # never pinged: the default offset
    trace.decoded({0, 1})
    first, second = trace.take()
    assert (first.start_s, first.end_s) == pytest.approx((10.1, 10.6))
    assert (second.start_s, second.end_s) == pytest.approx((10.0, 11.0))


def test_record_lines_are_json_with_the_documented_fields():
    trace = TaskTrace()
    trace.add(7, entry(3, 9, 0.25, 0.5, DROPPED, chunks=0, job=1))
    row = json.loads(trace.take()[0].line())
    assert row == {"record": "task", "worker": 7, "job": 1, "iteration": 3, "epoch": 0,
                   "task": 9, "start_s": 0.25, "end_s": 0.5, "chunks": 0, "outcome": "dropped"}
