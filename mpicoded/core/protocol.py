"""Wire format: a fixed handful of tags, and one float64 buffer per message (header, then payload).

Ids live in the header, never in the tag, so a receiver matches on the tag alone and reads the
rest. The header is ``(job, iteration, epoch, task, worker, count)``; what each slot and the
payload hold depends on the tag, and ``layouts.LAYOUTS`` says it for every tag (the docs
render it).
``epoch`` counts re-codings: an iteration restarted on a new code after workers died gets a new
epoch, so results of the abandoned attempt stay stale. Floats hold integers exactly below 2**53.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from .trace import TraceEntry

HEADER = 6
ON_BOARD = -2  # an ITERATE's θ slots where θ is on rank 0's board: its section is (slot, stamp)


class Tag(IntEnum):
    """Message kinds; every message of a kind has the same tag (``LAYOUTS`` says what each is)."""

    SETUP = 1
    ITERATE = 2
    RESULT = 3
    PURGE = 4
    STOP = 5
    STOP_ACK = 6
    ERROR = 7
    PROGRESS = 8
    PING = 9
    TRACE = 10
    ASSIGN = 11
    SETUP_DATA = 12
    RELEASE = 13
    REDUCE = 14
    PART = 15


_TAGS = {int(tag): tag for tag in Tag}  # a dict lookup: Tag(n) costs ten times as much

TRACE_FIELDS = TraceEntry._fields  # an entry's slots on the wire, in this order


@dataclass(slots=True)
class Message:
    """A decoded message: header fields and the payload that follows them. Not frozen: one is
    made for every message on the hot paths, and a frozen dataclass's init costs five times as
    much (1.07 against 0.20 µs)."""

    tag: Tag
    job: int
    iteration: int
    epoch: int
    task: int
    worker: int
    count: int
    payload: np.ndarray  # a SETUP message carries its pickled object here instead
    raw: np.ndarray | None = None  # the whole buffer it was read from (header and payload)


def pack(job: int, iteration: int, epoch: int, task: int, worker: int,
         *parts: np.ndarray) -> np.ndarray:
    """One contiguous buffer: header (``count`` = length of the first part) then every part."""
    sizes = [np.size(p) for p in parts]
    buf = np.empty(HEADER + sum(sizes), dtype=np.float64)
    buf[:HEADER] = (job, iteration, epoch, task, worker, sizes[0] if sizes else 0)
    at = HEADER
    for part, size in zip(parts, sizes, strict=True):
        buf[at : at + size] = np.ravel(part)
        at += size
    return buf


def unpack(tag: int, buf: np.ndarray) -> Message:
    """Read a buffer produced by ``pack``."""
    if len(buf) < HEADER:
        raise ValueError(f"message with tag {tag} has {len(buf)} values, fewer than the header's {HEADER}")
    try:
        kind = _TAGS[tag]
    except KeyError:
        raise ValueError(f"message with tag {tag}, which no message kind has") from None
    job, iteration, epoch, task, worker, count = buf[:HEADER].astype(np.int64).tolist()
    return Message(kind, job, iteration, epoch, task, worker, count, buf[HEADER:], buf)


def header_key(buf: np.ndarray | bytes | memoryview) -> tuple[int, int, int]:
    """The (job, iteration, epoch) in a packed message's header."""
    head = np.frombuffer(buf, dtype=np.float64, count=3)
    return int(head[0]), int(head[1]), int(head[2])


def pack_iterate(job: int, iteration: int, theta: np.ndarray,
                 tasks: Mapping[int, Sequence[int]], epoch: int = 0, half: bool = False,
                 out: Callable[[int], np.ndarray] = np.empty,
                 relay: Sequence[tuple[int, int]] = (),
                 board: tuple[int, int] | None = None) -> np.ndarray:
    """ITERATE (laid out as ``LAYOUTS`` says), one buffer for every worker of the iteration;
    ``tasks`` maps comm rank to its task ids. ``half``: θ as float32, two values a slot (a job
    whose θ is a float32 model's parameters loses nothing); ``out(slots)``: the buffer;
    ``relay``: (rank, its parent) pairs of the ranks that forward it; ``board``: θ is not in
    it but on rank 0's board, in this (slot, stamp)."""
    offsets, lists = _task_lists(tuple(sorted((rank, tuple(ids)) for rank, ids in tasks.items())))
    n = theta.size
    half = half and n > 1  # one value in one slot either way: float64 says it
    slots = len(board) if board is not None else (n + 1) // 2 if half else n
    buf = out(HEADER + slots + lists.size + 2 * len(relay))
    buf[:HEADER] = (job, iteration, epoch, offsets, n, ON_BOARD if board is not None else slots)
    if board is not None:
        buf[HEADER : HEADER + slots] = board
    else:
        put_values(buf[HEADER : HEADER + slots], np.ravel(theta), half)  # θ may be a column
    buf[HEADER + slots : HEADER + slots + lists.size] = lists
    buf[HEADER + slots + lists.size :] = [x for pair in relay for x in pair]
    return buf


def put_values(region: np.ndarray, value: np.ndarray, half: bool) -> None:
    """``value`` into a message's slots: as float64, or as float32 two a slot (``half``, the
    last slot padded with a zero)."""
    if half:
        packed = region.view(np.float32)
        packed[: value.size] = value
        packed[value.size :] = 0.0
    else:
        region[:] = value


@functools.lru_cache(maxsize=16)
def _task_lists(tasks: tuple[tuple[int, tuple[int, ...]], ...]) -> tuple[int, np.ndarray]:
    """How many offsets an ITERATE has, and the offsets then the task lists (the same every
    iteration until the schedule changes: built once, read-only)."""
    slots = tasks[-1][0] + 1 if tasks else 0
    lengths = np.zeros(slots, dtype=np.float64)
    for rank, ids in tasks:
        lengths[rank] = len(ids)
    flat = [t for _, ids in tasks for t in ids]
    out = np.concatenate([[0.0], np.cumsum(lengths), np.asarray(flat, dtype=np.float64)])
    out.flags.writeable = False
    return slots + 1, out


def iterate_fields(msg: Message, rank: int) -> tuple[tuple[int, ...], np.ndarray]:
    """The task list of comm rank ``rank``, and theta (float32 where it travels so: a view of
    the message's buffer either way; where θ is on rank 0's board, its (slot, stamp)), from an
    ITERATE message."""
    slots = theta_slots(msg)
    theta = msg.payload[:slots]
    if slots < msg.worker and msg.count != ON_BOARD:  # float32, two a slot
        theta = theta.view(np.float32)[: msg.worker]
    offsets = msg.payload[slots : slots + msg.task]
    flat = msg.payload[slots + msg.task :]
    if rank + 1 >= len(offsets):
        return (), theta
    start, stop = int(offsets[rank]), int(offsets[rank + 1])
    return tuple(flat[start:stop].astype(np.int64).tolist()), theta


def theta_slots(msg: Message) -> int:
    """The slots of an ITERATE's θ section (its board slot and stamp: 2)."""
    return 2 if msg.count == ON_BOARD else msg.count


def on_board(msg: Message) -> tuple[int, int] | None:
    """Where an ITERATE's θ is on rank 0's board, (slot, stamp); None if it carries θ."""
    if msg.count != ON_BOARD:
        return None
    return int(msg.payload[0]), int(msg.payload[1])


NO_TRACE: tuple[TraceEntry, ...] = ()
_NO_ENTRIES = np.empty((0, len(TRACE_FIELDS)))  # what a message without trace entries has
_NO_ENTRIES.flags.writeable = False


def pack_result(job: int, iteration: int, worker: int, tasks: list[int],
                values: list[np.ndarray], epoch: int = 0,
                trace: Sequence[TraceEntry] = NO_TRACE, half: bool = False,
                out: Callable[[int], np.ndarray] = np.empty) -> np.ndarray:
    """RESULT (laid out as ``LAYOUTS`` says): one task's values or many, and ``trace``, this
    worker's entries since its last message. ``half``: the values as float32, two to a slot,
    for a job whose results may travel so (half the bytes); ``out(slots)``: the buffer."""
    n = len(tasks)
    size = sum(np.size(v) for v in values)
    slots = (size + 1) // 2 if half else size
    buf = out(HEADER + n + slots + len(trace) * len(TRACE_FIELDS))
    buf[:HEADER] = (job, iteration, epoch, len(trace), worker, n)
    buf[HEADER : HEADER + n] = tasks
    at = HEADER + n
    region = buf[at : at + slots].view(np.float32) if half else buf
    start = 0 if half else at
    for value in values:  # filled in place: this is every worker's per-task send
        region[start : start + value.size] = value
        start += value.size
    if half and size % 2:
        region[size] = 0.0
    at += slots
    width = len(TRACE_FIELDS)
    for entry in trace:  # a tuple or two, most often: cheaper than building an array of them
        buf[at : at + width] = entry
        at += width
    return buf


def run_ids(runs: Sequence[Sequence[int]]) -> list[int]:
    """The task ids of a RESULT with one value a run (pieces computed as one sum): each run's
    pieces after its first as -(id + 1)."""
    return [t if i == 0 else -t - 1 for run in runs for i, t in enumerate(run)]


def split_ids(ids: np.ndarray) -> tuple[list[int], tuple[int, ...] | None]:
    """A RESULT's task ids and, if it has runs (``run_ids``), their lengths; None: a value a
    task."""
    tasks: list[int] = ids.astype(np.int64).tolist()
    if min(tasks, default=0) >= 0:
        return tasks, None
    runs: list[int] = []
    for i, t in enumerate(tasks):
        if t >= 0:
            runs.append(1)
        else:
            runs[-1] += 1
            tasks[i] = -t - 1
    return tasks, tuple(runs)


def result_fields(msg: Message, half_width: int = 0) -> tuple[
        list[int], np.ndarray, np.ndarray, tuple[int, ...] | None]:
    """Task ids, values (one row a task or, with runs, a run: views of the message's buffer,
    float32 where they travel so), trace entries (one row each) and the runs' lengths
    (``split_ids``) of a RESULT; ``half_width``: its values are float32
    (``pack_result(half=True)``), this many a value."""
    tasks, runs = split_ids(msg.payload[: msg.count])
    rows = len(tasks) if runs is None else len(runs)
    values, trace = _split_trace(msg, msg.payload[msg.count :])
    if half_width:
        values = values.view(np.float32)[: rows * half_width]
    return tasks, values.reshape(rows, -1), trace, runs


def result_trace(msg: Message) -> np.ndarray:
    """The trace entries of a RESULT alone (whatever its values' width and type)."""
    return _split_trace(msg, msg.payload[msg.count :])[1]


def _split_trace(msg: Message, rest: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``rest`` of a RESULT, STOP_ACK or TRACE payload, and the ``task`` trace entries at its
    end."""
    size = msg.task * len(TRACE_FIELDS)
    if size <= 0:
        return rest, _NO_ENTRIES
    return rest[:-size], rest[-size:].reshape(-1, len(TRACE_FIELDS))


def pack_assign(job: int, iteration: int, tasks: Sequence[int], epoch: int = 0) -> np.ndarray:
    """ASSIGN (laid out as ``LAYOUTS`` says): ``tasks``, the worker's piece list from now on."""
    return pack(job, iteration, epoch, -1, -1, np.asarray(tasks, dtype=np.float64))


def assign_fields(msg: Message) -> tuple[int, ...]:
    """The piece ids of an ASSIGN message."""
    return tuple(msg.payload[: msg.count].astype(np.int64).tolist())


def pack_control(job: int = -1, iteration: int = -1, worker: int = -1,
                 counters: tuple[int, ...] = (), epoch: int = 0,
                 trace: Sequence[TraceEntry] = NO_TRACE) -> np.ndarray:
    """PURGE, STOP, RELEASE, the master's PING, and STOP_ACK with the worker's ``counters`` and
    ``trace`` entries not sent yet (laid out as ``LAYOUTS`` says)."""
    return pack(job, iteration, epoch, len(trace), worker, np.asarray(counters, dtype=np.float64),
                np.ravel(trace) if trace else np.empty(0))


def pack_trace(worker: int, trace: Sequence[TraceEntry]) -> np.ndarray:
    """TRACE (laid out as ``LAYOUTS`` says): trace entries, nothing else."""
    return pack(-1, -1, 0, len(trace), worker, np.ravel(trace))


def trace_fields(msg: Message) -> np.ndarray:
    """The trace entries of a TRACE message."""
    return _split_trace(msg, msg.payload)[1]


def ack_fields(msg: Message) -> tuple[tuple[int, int, int, int], np.ndarray]:
    """A STOP_ACK's counters (tasks computed, results sent, tasks dropped, rows computed) and
    trace entries."""
    counters, trace = _split_trace(msg, msg.payload)
    computed, sent, dropped, rows = (int(v) for v in counters[:4])
    return (computed, sent, dropped, rows), trace


def pack_progress(job: int, iteration: int, worker: int, task: int, done: float,
                  seconds: float, epoch: int = 0) -> np.ndarray:
    """PROGRESS (laid out as ``LAYOUTS`` says): when a purge cut ``task`` off, the tasks a
    worker had ``done`` since its last result and the ``seconds`` they took."""
    return pack(job, iteration, epoch, task, worker, np.array([done, seconds]))


def progress_fields(msg: Message) -> tuple[float, float]:
    """The tasks done and the seconds they took, of a PROGRESS message."""
    return float(msg.payload[0]), float(msg.payload[1])


def pack_clock(worker: int, seconds: float) -> np.ndarray:
    """A worker's answer to PING: its clock, ``seconds`` (laid out as ``LAYOUTS`` says)."""
    return pack(-1, -1, 0, -1, worker, np.array([seconds]))
