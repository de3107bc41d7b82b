"""A worker's iteration of whole tasks: each computed in row chunks, the iteration checked for a
purge between chunks, tasks and delay slices; each result sent at once (all at the end for a
one-message code)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from ..core.protocol import Message, Tag, iterate_fields, pack_progress
from ..core.trace import SENT, TraceEntry
from ..jobs.batches import StepRows
from ..jobs.task import Block, run_task
from .board import theta_of

if TYPE_CHECKING:
    from .worker import Worker

MASTER = 0


def run_tasks(worker: Worker, msg: Message) -> None:
    tasks, section = iterate_fields(msg, worker.comm.Get_rank())
    theta = theta_of(msg, section, worker.board, worker.latest)
    due = None if theta is None else worker.begin(msg, theta, resumed=False)
    if theta is None or due is None:
        worker.dropped += len(tasks)  # purged before the first task began, or stale
        worker.trace_skipped(msg, tasks)
        return
    setup, delay, kernel = worker.setup, worker.setup.delay, worker.kernel
    blocks: Mapping[int, Block] = setup.blocks
    chunk_rows = setup.chunk_rows
    if setup.batches is not None:  # the step's rows of each block; chunks of as many rows
        blocks = StepRows(setup.batches, setup.bounds, setup.blocks, msg.iteration)
        chunk_rows = chunk_rows and max(1, round(chunk_rows * setup.batches.share))
    repeat = delay.compute_factor(setup.worker, msg.iteration, msg.job)
    done_tasks: list[int] = []
    done_values: list[np.ndarray] = []
    unsent: list[TraceEntry] = []  # done_tasks' entries: SENT, or PURGED if a purge comes first
    unsent_since = time.perf_counter()
    for i, task in enumerate(tasks):
        if not done_tasks:  # the master has had every result so far: its view starts here
            unsent_since = time.perf_counter()
        began = time.perf_counter()
        computing = time.monotonic()
        value: np.ndarray | None = None
        fraction, chunks = 0.0, 0
        if not (i and worker.interrupted()):  # between tasks, as between chunks
            if setup.remote:
                worker.load(setup.blocks, setup.terms[task])
            value, fraction, chunks = run_task(kernel, blocks, setup.terms[task], theta,
                                               setup.result_size, chunk_rows, repeat,
                                               worker.interrupted)
            worker.rows += round(fraction * sum(kernel.rows(blocks[key])
                                                for key, _ in setup.terms[task]))
        dropped = value is None
        if not dropped:
            worker.computed += 1
            model_time = 0.0
            if delay.sleeps:
                model_time = delay.task_delay(setup.worker, msg.job, msg.iteration, i,
                                              setup.task_cost[task])
                due += time.monotonic() - computing + delay.seconds(model_time)
            if model_time > 0:  # cut in an injected, memoryless delay: none of it is done
                dropped = not worker.serve_delay(due)
                fraction = 0.0
            elif setup.report_progress and worker.interrupted():
                dropped = True  # done after the decode: a slow CPU's sample for the split
        if dropped:
            worker.dropped += len(tasks) - i + len(done_tasks)  # unsent results are lost too
            worker.trace_dropped(msg, unsent, (task, began, chunks), list(tasks[i + 1:]))
            if setup.report_progress:  # the adaptive split's sample of this worker's speed
                buf = pack_progress(msg.job, msg.iteration, setup.worker, task,
                                    len(done_tasks) + fraction,
                                    time.perf_counter() - unsent_since, msg.epoch)
                worker.outbox.send(buf, MASTER, Tag.PROGRESS)
            return
        assert value is not None  # a task stopped short was dropped above
        if worker.trace is not None:
            unsent.append(worker.entry(msg, task, began, chunks, SENT))
        if setup.single_message:
            done_tasks.append(task)
            done_values.append(value)
        else:
            worker.send_result(msg, [task], [value], unsent)
            unsent = []
    if done_tasks:
        worker.send_result(msg, done_tasks, done_values, unsent)
