"""What happens to a run (events, in) and what the master does about it (instructions, out).

An executor (the MPI master, or the simulator) turns what it sees into events, feeds each to
``Session.handle`` and carries out the instructions it gets back, in order. Workers are named by
their rank in the run's communicator, as the executor sees them; the Session maps ranks to the
code's workers. Events on rank 0's hot path (one a result) are plain slotted classes: a frozen
dataclass's constructor costs several times as much.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ..codes import Code
from .result import IterationRecord, JobRecord

if TYPE_CHECKING:
    from .settings import Workload


# ---- events ----------------------------------------------------------------------------------

@dataclass(slots=True)
class Begin:
    """The run is planned: place the data (the first event of every session)."""


@dataclass(slots=True)
class Started:
    """The set-ups are out (and the clocks compared): the run's clock starts at ``now``."""

    now: float


@dataclass(slots=True)
class JobArrived:
    """Job ``job`` of the stream arrived at ``now``."""

    job: int
    now: float


@dataclass(slots=True)
class ResultArrived:
    """A RESULT from ``rank``: ``tasks`` of (job, iteration, epoch) done, their ``values`` (a row
    a task, or a run of ``runs``; None where only timing matters: the simulator, a replay), at
    ``now``; ``entries``: the trace entries it carried (``--trace``); ``runs``: the lengths of
    the runs of pieces ``tasks`` are cut in, each computed as one sum (None: a value a task)."""

    rank: int
    job: int
    iteration: int
    epoch: int
    tasks: list[int]
    values: np.ndarray | None
    now: float
    entries: np.ndarray | None = None
    runs: tuple[int, ...] | None = None


@dataclass(slots=True)
class PartArrived:
    """A PART from ``rank``: its subtree's share of (job, iteration, epoch)'s decoded sum, of
    the reduce's ``attempt`` (``value`` None where only timing matters), at ``now``."""

    rank: int
    job: int
    iteration: int
    epoch: int
    attempt: int
    value: np.ndarray | None
    now: float


@dataclass(slots=True)
class ProgressReported:
    """A worker cut off by a purge says how far it got (``fraction`` of a task in ``seconds``):
    the adaptive split's sample of its speed."""

    rank: int
    job: int
    iteration: int
    epoch: int
    fraction: float
    seconds: float


@dataclass(slots=True)
class TraceArrived:
    """Trace entries a worker sent on their own (it had no result to carry them)."""

    rank: int
    entries: np.ndarray | None = None


@dataclass(slots=True)
class Withheld:
    """The transport dropped, unsent, an ITERATE to ``rank`` that a newer one made stale: its
    ``tasks`` were never started."""

    rank: int
    job: int
    iteration: int
    epoch: int
    tasks: tuple[int, ...]
    now: float


@dataclass(slots=True)
class WorkerLost:
    """``rank`` is dead (ULFM named it, or a send to it failed), found at ``now``."""

    rank: int
    now: float = 0.0


@dataclass(slots=True)
class WorkerFailed:
    """An exception on ``rank`` (its traceback ``text``)."""

    rank: int
    text: str


@dataclass(slots=True)
class Tick:
    """The clock reads ``now`` (an executor feeds one once a ``WakeAt`` is due)."""

    now: float


@dataclass(slots=True)
class StopAcknowledged:
    """``rank`` answered STOP, with its counters (computed, sent, dropped, rows) and the trace
    entries it still held."""

    rank: int
    counters: tuple[int, int, int, int] = (0, 0, 0, 0)
    entries: np.ndarray | None = None


@dataclass(slots=True)
class LossComputed:
    """The loss ``ComputeLoss`` asked for (None: the job defines none, or it was not asked) and
    the evaluation (None: not asked), ready at ``now``."""

    job: int
    iteration: int
    loss: float | None
    now: float = 0.0
    evaluation: dict[str, float] | None = None


Event = (Begin | Started | JobArrived | ResultArrived | PartArrived | ProgressReported
         | TraceArrived | Withheld | WorkerLost | WorkerFailed | Tick | StopAcknowledged
         | LossComputed)


# ---- instructions ----------------------------------------------------------------------------

class Target(NamedTuple):
    """Where a set-up goes: the worker's rank, its world rank (identity), its index in the code
    and the tasks whose data it holds."""

    rank: int
    world: int
    worker: int
    tasks: tuple[int, ...]


@dataclass(frozen=True)
class Place:
    """Send each target its set-up of ``epoch``: ``code`` (cut into ``pieces`` under partial
    work) over ``work``, the job as coded for it."""

    epoch: int
    targets: tuple[Target, ...]
    code: Code = field(compare=False, repr=False)
    pieces: Code | None = field(compare=False, repr=False)
    work: Workload = field(compare=False, repr=False)
    chunk_rows: int
    report_progress: bool = False
    run_rows: int = 0  # its own share's pieces in runs of at most these rows (``Runs``)
    keep: bool = False  # results' values kept by the workers, who add up the sum (``Reduce``)
    runs_within: bool = False  # runs keep to one partition (a tolerance may leave some out)


@dataclass(frozen=True)
class Settle:
    """Wait until every set-up has left (then, ``sync_clocks``, learn each worker's clock),
    and feed ``Started``."""

    sync_clocks: bool = False


@dataclass(frozen=True)
class Iterate:
    """Send (job, iteration) of ``epoch`` with ``theta`` to every rank of ``lists``, each its
    ordered task list; ``relay``: (rank, its parent) pairs, each rank forwarding it to those
    whose parent it is (``trees.py``; 0: rank 0's), or none: rank 0 sends it to each."""

    job: int
    iteration: int
    epoch: int
    lists: tuple[tuple[int, tuple[int, ...]], ...]
    theta: np.ndarray = field(compare=False, repr=False)
    relay: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class Assign:
    """Partial work: ``rank``'s list for the open iteration is now ``tasks``."""

    rank: int
    job: int
    iteration: int
    epoch: int
    tasks: tuple[int, ...]


@dataclass(frozen=True)
class Reduce:
    """The workers that hold the decoded sum's values add it up (issue 63): ``rank`` sums its
    ``terms`` (the first task id of each value it sent, a coefficient each) and the PARTs of
    its ``children``, and sends that to ``parent`` (0: the master), for ``attempt`` of the
    reduce of (job, iteration, epoch)."""

    rank: int
    job: int
    iteration: int
    epoch: int
    attempt: int
    parent: int
    children: tuple[int, ...]
    terms: tuple[tuple[int, float], ...]


@dataclass(frozen=True)
class Purge:
    """Tell ``rank`` to drop what is left of (job, iteration, epoch)."""

    rank: int
    job: int
    iteration: int
    epoch: int


@dataclass(frozen=True)
class Stop:
    """Tell ``rank`` to finish."""

    rank: int


@dataclass(frozen=True)
class Release:
    """Every worker has acknowledged STOP: ``rank`` may leave."""

    rank: int


@dataclass(frozen=True)
class Linger:
    """``rank`` was sent STOP and is known slow (no live result in the last round): the run
    ends without its acknowledgement, which is taken, and the rank released, after the run has
    returned."""

    rank: int


@dataclass(frozen=True)
class Forget:
    """``rank`` is lost (dead, or silent past --iteration-timeout): drop what is pending to it."""

    rank: int


@dataclass(frozen=True)
class WakeAt:
    """Feed a ``Tick`` once the clock reads ``at`` (the latest WakeAt replaces earlier ones)."""

    at: float


@dataclass(frozen=True)
class Decoded:
    """(job, iteration, epoch) decoded from the results of the tasks ``used`` (observers: the
    task trace)."""

    job: int
    iteration: int
    epoch: int
    used: frozenset[int]


@dataclass(frozen=True)
class ComputeLoss:
    """Compute the job's loss at ``theta`` (a pass over the data on rank 0), if ``with_loss``,
    and its evaluation on held-out data, if ``evaluate``, and feed ``LossComputed``."""

    job: int
    iteration: int
    theta: np.ndarray = field(compare=False, repr=False)
    with_loss: bool = True
    evaluate: bool = False


@dataclass(frozen=True)
class Report:
    """An iteration is done: its record, the loss of the theta it produced (None: not computed)
    and that theta (observers: progress lines, callbacks, the metrics file)."""

    record: IterationRecord
    loss: float | None
    theta: np.ndarray | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class JobDone:
    """A job of the stream is done (observers: the stream's progress line)."""

    record: JobRecord


@dataclass(frozen=True)
class SaveCheckpoint:
    """Write theta and the resume point (job, iteration) atomically."""

    job: int
    iteration: int
    theta: np.ndarray = field(compare=False, repr=False)


@dataclass(frozen=True)
class Record:
    """A line of the metrics file for a run event (start, failure, re-code)."""

    row: Mapping[str, Any]


@dataclass(frozen=True)
class Log:
    """A line for the user (``level``: a logging level's name)."""

    level: str
    text: str


@dataclass(frozen=True)
class Abort:
    """End the run: a worker (``rank``) failed while the run needed it, or (``rank`` None)
    every worker has failed."""

    rank: int | None
    text: str


@dataclass
class Outcome:
    """What a finished session leaves (the executor adds the makespan and the run record)."""

    theta: np.ndarray
    records: list[IterationRecord]
    losses: list[float | None]
    totals: dict[str, float]
    counters: dict[int, tuple[int, int, int, int]]
    jobs: list[JobRecord]
    recodes: int
    job_thetas: list[np.ndarray]
    loads: list[int] | None
    timed_out: list[int]  # ranks declared failed for silence (alive, maybe)
    unstopped: list[int]  # ranks that never acknowledged STOP: hung
    withheld_tasks: int
    handed: dict[int, int]  # partial work: rank -> pieces of its share given to others


@dataclass(frozen=True)
class Finish:
    """The run is over: every send out, then ``outcome``."""

    outcome: Outcome = field(compare=False, repr=False)


Instruction = (Place | Settle | Iterate | Assign | Reduce | Purge | Stop | Release | Linger
               | Forget | WakeAt | Decoded | ComputeLoss | Report | JobDone | SaveCheckpoint
               | Record | Log | Abort | Finish)
