"""What the master reads: a worker's message as the Session's event, and the task lists of
sends given up on (``protocol`` is the wire format alone)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .events import (
    Event,
    PartArrived,
    ProgressReported,
    ResultArrived,
    StopAcknowledged,
    TraceArrived,
)
from .protocol import (
    Message,
    Tag,
    ack_fields,
    assign_fields,
    iterate_fields,
    progress_fields,
    result_fields,
    result_trace,
    split_ids,
    trace_fields,
    unpack,
)
from .tree_messages import part_value


def withheld_lists(rank: int, messages: Sequence[tuple[object, Tag]]) -> dict[
        tuple[int, int, int], tuple[int, ...]]:
    """The task list of each ITERATE among ``messages`` (buffers and tags sent to comm rank
    ``rank``, in order), or of the ASSIGN that replaced it, by (job, iteration, epoch)."""
    lists: dict[tuple[int, int, int], tuple[int, ...]] = {}
    for buf, tag in messages:
        assert isinstance(buf, np.ndarray)  # ITERATE, PURGE and ASSIGN are doubles
        msg = unpack(tag, buf)
        key = (msg.job, msg.iteration, msg.epoch)
        if tag == Tag.ITERATE:
            lists[key] = iterate_fields(msg, rank)[0]
        elif tag == Tag.ASSIGN and key in lists:
            lists[key] = assign_fields(msg)
    return lists


def event_of(msg: Message, rank: int, now: float, epoch: int,
             half_width: int = 0) -> Event | None:
    """What a message from ``rank`` tells the master, read at ``now``: a RESULT of ``epoch``
    has its values (float32, ``half_width`` a task, where they travel so; none where the
    workers keep them to add up: ids alone); one of another epoch is stale, whatever its
    width. None for a late PING answer."""
    tag = msg.tag
    if tag == Tag.RESULT:
        if msg.epoch == epoch:
            tasks, values, entries, runs = result_fields(msg, half_width)
            return ResultArrived(rank, msg.job, msg.iteration, msg.epoch, tasks,
                                 values if values.size else None, now, entries, runs)
        return ResultArrived(rank, msg.job, msg.iteration, msg.epoch,
                             split_ids(msg.payload[:msg.count])[0], None, now, result_trace(msg))
    if tag == Tag.PART:
        return PartArrived(rank, msg.job, msg.iteration, msg.epoch, msg.task, part_value(msg),
                           now)
    if tag == Tag.PROGRESS:
        return ProgressReported(rank, msg.job, msg.iteration, msg.epoch, *progress_fields(msg))
    if tag == Tag.TRACE:
        return TraceArrived(rank, trace_fields(msg))
    if tag == Tag.STOP_ACK:
        counters, entries = ack_fields(msg)
        return StopAcknowledged(rank, counters, entries)
    if tag == Tag.PING:
        return None
    raise RuntimeError(f"master got an unexpected {tag.name} from rank {rank}")
