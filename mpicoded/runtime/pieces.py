"""A worker's iteration of pieces (partial work): ``core.piecelist.PieceList`` decides which
piece comes next and which finished pieces go out when; this computes them and sends."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

from ..core.protocol import Message, iterate_fields
from ..core.trace import SENT, TraceEntry
from ..jobs.task import run_piece

if TYPE_CHECKING:
    from .worker import Worker


def run_pieces(worker: Worker, msg: Message) -> None:
    setup, delay, plist = worker.setup, worker.setup.delay, worker.pieces
    assert setup.pieces is not None
    theta = iterate_fields(msg, worker.comm.Get_rank())[1]
    plist.begin(worker.inbox, msg, time.perf_counter())
    due = worker.begin(msg, theta, plist.resumed)
    if due is None:  # purged before the first piece began
        worker.trace_dropped(msg, [], None, plist.drop()[1])
        return
    repeat = delay.compute_factor(setup.worker, msg.iteration, msg.job)
    values: dict[int, np.ndarray] = {}
    entries: dict[int, TraceEntry] = {}

    def send(tasks: list[int]) -> None:
        if tasks:
            worker.send_result(msg, tasks, [values.pop(t) for t in tasks],
                               [entries.pop(t) for t in tasks if t in entries])

    while True:
        done, task = plist.next(worker.inbox, worker.interrupted)
        send(done)
        if task is None:
            if plist.queue:  # dropped between pieces
                lost, left = plist.drop()
                worker.trace_dropped(msg, [entries[t] for t in lost if t in entries], None,
                                     left)
            return
        began, computing = time.perf_counter(), time.monotonic()
        key, start, stop = setup.pieces[task]
        values[task] = run_piece(worker.kernel, worker.piece_block(key, start, stop), theta,
                                 setup.result_size, repeat)
        worker.rows += stop - start
        worker.computed += 1
        if delay.sleeps:
            model_time = delay.task_delay(setup.worker, msg.job, msg.iteration, plist.slot - 1,
                                          setup.task_cost[task])
            due += time.monotonic() - computing + delay.seconds(model_time)
            if model_time > 0 and not worker.serve_delay(due):  # cut in an injected delay
                lost, left = plist.drop(cut=task)
                worker.trace_dropped(msg, [entries[t] for t in lost if t in entries],
                                     (task, began, 1), left)
                return
        if worker.trace is not None:
            entries[task] = worker.entry(msg, task, began, 1, SENT)
        send(plist.finished(task, time.perf_counter()))
