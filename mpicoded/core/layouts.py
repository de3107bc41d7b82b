"""What each tag's messages hold, slot by slot: descriptive, for the tests and the docs (the hot
paths in ``protocol`` and ``tree_messages`` read the slots directly)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType
from typing import Literal, NamedTuple

from .protocol import TRACE_FIELDS, Tag


class Size(Enum):
    """How long a payload section is, in float64 slots, as the header tells it."""

    COUNT = "count"
    TASK = "task"
    ENTRIES = f"task × {len(TRACE_FIELDS)}"  # ``task`` trace entries
    ONE = "1"
    LAST = "the offsets' last"  # where the last of the offsets before it says the lists end
    REST = "rest"  # what the other sections leave


class Section(NamedTuple):
    """One part of a payload: what it holds and how long it is."""

    name: str
    size: Size


Body = Literal["float64", "pickle", "bytes"]  # one float64 buffer, a pickled object, raw bytes


@dataclass(frozen=True)
class Layout:
    """What one tag's messages look like: who sends them, what for, which header slots hold
    what (``key``: job, iteration and epoch name the iteration; ``worker``, ``task``,
    ``count``: their meaning, None if unused) and the payload's sections in order.
    Descriptive: the hot paths read the slots directly, tests and the docs read this."""

    direction: str
    carries: str
    body: Body = "float64"
    key: bool = False
    worker: str | None = None
    task: str | None = None
    count: str | None = None
    payload: tuple[Section, ...] = ()


_TO_WORKER, _TO_MASTER = "master → worker", "worker → master"
_SENDER = "the sender's"
_ENTRIES = Section("trace entries", Size.ENTRIES)

LAYOUTS: Mapping[Tag, Layout] = MappingProxyType({
    Tag.SETUP: Layout(
        _TO_WORKER, "once at start-up (and again after a re-split or re-code): the worker's data "
        "and settings; or, when planning failed, the refusal every rank raises", body="pickle",
        payload=(Section("its WorkerSetup (pickle protocol 5, each contiguous array's bytes left "
                         "out to follow as SETUP_DATA), or the refusal", Size.REST),)),
    Tag.ITERATE: Layout(
        _TO_WORKER, "θ and the ordered task list of one iteration, one buffer for every worker "
        "(θ packed once)", key=True, worker="θ's length", task="offsets (ranks + 1)",
        count="θ's slots: as many (float64), or half as many, rounded up (float32, two a slot, "
        "the last padded: a job whose θ travels so); -2: θ is on rank 0's board (a worker on "
        "its node), the section holds its slot and stamp",
        payload=(Section("θ", Size.COUNT),
                 Section("offsets: where each comm rank's list starts", Size.TASK),
                 Section("task lists, back to back", Size.LAST),
                 Section("the relay: (rank, its parent) pairs; each rank forwards θ to those "
                         "whose parent it is (0: rank 0 sends it to those); none: rank 0 sends "
                         "it to each", Size.REST))),
    Tag.RESULT: Layout(
        _TO_MASTER, "one or more finished tasks of one iteration, with the trace entries since "
        "the worker's last message", key=True, worker=_SENDER, task="trace entries",
        count="task ids",
        payload=(Section("task ids; -(id + 1): a piece computed in one sum with the one "
                         "before (a run: one value for all)", Size.COUNT),
                 Section("values (one a task, or a run), back to back: float64, or float32 "
                         "two a slot (the last padded) for a job whose results travel so; "
                         "none where the workers keep them to add up (REDUCE)", Size.REST),
                 _ENTRIES)),
    Tag.PURGE: Layout(_TO_WORKER, "drop what is left of (job, iteration)", key=True),
    Tag.STOP: Layout(_TO_WORKER, "finish; the worker answers STOP_ACK and leaves its loop"),
    Tag.STOP_ACK: Layout(
        _TO_MASTER, "its last word: its counters and the trace entries not sent yet",
        worker=_SENDER, task="trace entries", count="counters",
        payload=(Section("counters: tasks computed, results sent, tasks dropped, rows computed",
                         Size.COUNT), _ENTRIES)),
    Tag.ERROR: Layout(_TO_MASTER, "an exception in a task, as text", body="pickle",
                      payload=(Section("the traceback's text (comm.send)", Size.REST),)),
    Tag.PROGRESS: Layout(
        _TO_MASTER, "when a purge cut a task off: how much was done since the last result, in "
        "how long (the adaptive split's sample)", key=True, worker=_SENDER,
        task="the task cut off", count="2",
        payload=(Section("tasks done: finished unsent ones plus the cut task's share", Size.ONE),
                 Section("the seconds they took", Size.ONE))),
    Tag.PING: Layout(
        "master → worker, and back", "at set-up with the trace on; the worker answers with its "
        "clock (aligning the trace's clocks)", worker=_SENDER, count="1 in the answer, 0 in the ping",
        payload=(Section("the worker's clock (time.perf_counter), in the answer", Size.COUNT),)),
    Tag.TRACE: Layout(
        _TO_MASTER, "trace entries alone, from a worker that sends no results", worker=_SENDER,
        task="trace entries", count=f"their values (task × {len(TRACE_FIELDS)})",
        payload=(_ENTRIES,)),
    Tag.ASSIGN: Layout(
        _TO_WORKER, "partial work: the worker's new piece list for the open iteration (θ is the "
        "ITERATE's)", key=True, count="piece ids", payload=(Section("piece ids", Size.COUNT),)),
    Tag.SETUP_DATA: Layout(
        _TO_WORKER, "right after a SETUP: its arrays' bytes, one a message", body="bytes",
        payload=(Section("one array's bytes, received into the buffer the array keeps",
                         Size.REST),)),
    Tag.RELEASE: Layout(_TO_WORKER, "once every STOP is acknowledged: the worker may leave now"),
    Tag.REDUCE: Layout(
        _TO_WORKER, "results summed by the workers (large ones): the iteration is decoded; add "
        "these of your values, times these coefficients, to the PARTs of these children and "
        "send the sum to the parent", key=True, worker="the parent's rank (0: the master)",
        task="the attempt (a death re-plans the sum)", count="terms",
        payload=(Section("the first task id of each value summed (as its RESULT named it)",
                         Size.COUNT),
                 Section("their coefficients", Size.COUNT),
                 Section("the children's ranks, whose PARTs it waits for", Size.REST))),
    Tag.PART: Layout(
        "worker → its parent in a REDUCE", "a partial sum of the decoded result", key=True,
        worker=_SENDER, task="the attempt",
        count="values: as many slots (float64), or half as many, rounded up (float32 where the "
              "job's results travel so)",
        payload=(Section("the sum", Size.REST),)),
})
