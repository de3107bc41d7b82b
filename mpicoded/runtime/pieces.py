"""A worker's iteration of pieces (partial work): ``core.piecelist.PieceList`` decides which
piece comes next and which finished pieces go out when; this computes them and sends."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

from ..core.piecelist import Run
from ..core.protocol import Message, iterate_fields, run_ids
from ..core.trace import SENT, TraceEntry
from ..jobs.batches import StepRows
from ..jobs.rows import join_rows
from ..jobs.task import run_piece
from .board import theta_of

if TYPE_CHECKING:
    from .worker import Worker


def spans(pieces: dict[int, tuple[int, int, int]], run: Run) -> list[tuple[int, int, int]]:
    """A run's rows as (block, first row, end row) ranges, adjoining pieces merged."""
    out: list[tuple[int, int, int]] = []
    for t in run:
        key, start, stop = pieces[t]
        if out and out[-1][0] == key and out[-1][2] == start:
            out[-1] = (key, out[-1][1], stop)
        else:
            out.append((key, start, stop))
    return out


def run_pieces(worker: Worker, msg: Message) -> None:
    setup, delay, plist = worker.setup, worker.setup.delay, worker.pieces
    assert setup.pieces is not None
    theta = theta_of(msg, iterate_fields(msg, worker.comm.Get_rank())[1], worker.board,
                     worker.latest)
    plist.runs = setup.runs
    plist.begin(worker.inbox, msg, time.perf_counter())
    due = None if theta is None else worker.begin(msg, theta, plist.resumed)
    if theta is None or due is None:  # purged before the first piece began, or stale
        worker.trace_dropped(msg, [], None, plist.drop()[1])
        return
    repeat = delay.compute_factor(setup.worker, msg.iteration, msg.job)
    pieces, kernel, size, sleeps = setup.pieces, worker.kernel, setup.result_size, delay.sleeps
    batch = None if setup.batches is None else StepRows(setup.batches, setup.bounds,
                                                        setup.blocks, msg.iteration)
    values: dict[int, np.ndarray] = {}
    entries: dict[int, TraceEntry] = {}

    def send(runs: list[Run]) -> None:
        if runs:
            tasks = [t for run in runs for t in run]
            worker.send_result(msg, run_ids(runs) if len(tasks) > len(runs) else tasks,
                               [values.pop(run[0]) for run in runs],
                               [entries.pop(t) for t in tasks if t in entries])

    while True:
        done, run = plist.next(worker.inbox, worker.interrupted)
        send(done)
        if run is None:
            if plist.queue:  # dropped between pieces
                lost, left = plist.drop()
                worker.trace_dropped(msg, [entries[t] for t in lost if t in entries], None,
                                     left)
            return
        began, computing = time.perf_counter(), time.monotonic()
        rows = join_rows([worker.piece_block(*span) if batch is None else batch.piece(*span)
                          for span in spans(pieces, run)])
        values[run[0]] = run_piece(kernel, rows, theta, size, repeat)
        worker.rows += kernel.rows(rows)
        worker.computed += len(run)
        if sleeps:  # runs of one piece (``Runs`` is off)
            model_time = delay.task_delay(setup.worker, msg.job, msg.iteration, plist.slot - 1,
                                          setup.task_cost[run[0]])
            due += time.monotonic() - computing + delay.seconds(model_time)
            if model_time > 0 and not worker.serve_delay(due):  # cut in an injected delay
                lost, left = plist.drop(cut=run)
                worker.trace_dropped(msg, [entries[t] for t in lost if t in entries],
                                     (run[0], began, 1), left)
                return
        if worker.trace is not None:  # a run's time shared out evenly over its pieces, so
            ended = time.perf_counter()  # that a worker's busy time is counted once
            step = (ended - began) / len(run)
            for i, task in enumerate(run):
                entries[task] = worker.entry(msg, task, began + i * step, 1, SENT,
                                             began + (i + 1) * step)
        send(plist.finished(run, time.perf_counter()))
