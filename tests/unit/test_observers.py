"""The observers either executor calls with each event and the instructions it gave (pure):
reports and job records to their callbacks, run events to the metrics file with the time, the
task trace joined with what the Session made of each result, the log's lines; and the set-ups a
Place instruction becomes."""

from __future__ import annotations

import json
import logging

import numpy as np
from sessions import Driver

from mpicoded.codes import make_code
from mpicoded.codes.partial import partial_code
from mpicoded.core import events as ev
from mpicoded.core.observers import Metrics, Observers, Reports, Tracing, log_lines
from mpicoded.core.setup import SetupShared
from mpicoded.core.trace import SENT, TaskTrace, TraceEntry
from mpicoded.delays import DelayModel
from mpicoded.jobs import LogReg, coded

FRC = make_code("frc", 6, stragglers=1)


def entries(it, task, start, end):
    return np.array([TraceEntry(0, it, 0, task, start, end, 1, SENT)], dtype=float)


def test_the_observers_see_one_iteration_to_its_report_and_the_end():
    lines: list[str] = []
    iterations, jobs = [], []
    d = Driver(FRC, iterations=1)
    trace = TaskTrace()
    watch = Observers(Reports(lambda *a: iterations.append(a), jobs.append),
                      Metrics(lines.append, lambda: 2.5), log_lines,
                      Tracing(trace, d.session.ranks.world, d.session.is_live, lines.append))

    def feed(event):
        out = d.handle(event)
        watch(event, out)
        return out

    watch(ev.Started(0.0), d.started)
    feed(ev.JobArrived(0, 0.0))
    assert trace.open == (0, 0, 0)
    for w, at in ((0, 0.1), (2, 0.2), (3, 0.25), (4, 0.3)):  # 3 comes before 4 decodes
        feed(ev.ResultArrived(w + 1, 0, 0, 0, [w], None, at, entries(0, w, at - 0.1, at)))
    feed(ev.LossComputed(0, 0, 0.25, 0.4))
    for rank in range(1, 7):
        out = feed(ev.StopAcknowledged(rank))
    assert isinstance(out[-1], ev.Finish)
    assert len(iterations) == 1 and iterations[0][1] == 0.25 and len(jobs) == 1
    start = json.loads(lines[0])
    assert start == {"record": "start", "jobs": 1, "iterations": 1, "at_s": 2.5}
    tasks = [json.loads(line) for chunk in lines[1:] for line in chunk.splitlines()]
    assert sorted((t["task"], t["outcome"]) for t in tasks) == [
        (0, "used"), (2, "used"), (3, "received"), (4, "used")]


def test_a_lost_workers_late_result_is_traced_stale_and_a_log_line_goes_out(caplog):
    d = Driver(FRC)
    trace = TaskTrace()
    watch = Observers(Tracing(trace, d.session.ranks.world, d.session.is_live, None),
                      log_lines)
    d.open()
    event = ev.WorkerLost(2, 0.1)
    with caplog.at_level(logging.WARNING, logger="mpicoded"):
        watch(event, d.handle(event))
    assert "worker rank(s) [2] failed; 5 workers left" in caplog.text
    event = ev.ResultArrived(2, 0, 0, 0, [1], None, 0.2, entries(0, 1, 0.1, 0.2))
    watch(event, d.handle(event))
    assert [r.outcome for r in trace.take()] == ["stale"]


def test_a_workers_set_up_holds_its_blocks_and_under_partial_work_its_pieces():
    """Worker 1 of frc s=1 holds partitions 0 and 1: its task's terms, both blocks, and the
    row range and work of every piece of them (it may be sent any)."""
    job = coded(LogReg(samples=600, features=4, seed=0), FRC)
    part = partial_code(FRC, [100] * 6, 25)
    setup = SetupShared(FRC, job, DelayModel(), part, epoch=2).for_worker(2, 1, (1,))
    assert setup.worker == 1 and setup.epoch == 2 and sorted(setup.blocks) == [0, 1]
    assert setup.terms == {1: ((0, 1.0), (1, 1.0))}
    assert setup.pieces == {t: (t // 4, 25 * (t % 4), 25 * (t % 4 + 1)) for t in range(8)}
    assert setup.task_cost == {t: 0.25 for t in range(8)}
    whole = SetupShared(FRC, job, DelayModel()).for_worker(2, 1, (1,))
    assert whole.pieces is None and whole.task_cost == {1: 2.0}
