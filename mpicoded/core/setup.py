"""What the master places on each worker (pure: no MPI): its set-up, and what every set-up of
one placement shares."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..codes import Code
from ..codes.partial import piece_cost
from ..delays import DelayModel
from ..jobs import Coded
from ..jobs.batches import Batches
from ..jobs.task import Block, Terms
from .piecelist import Runs
from .piecetable import PieceTable

PIECE_FLUSH_S = 0.01  # partial work: pieces done are sent at least this often (a straggler's)


@dataclass
class WorkerSetup:
    """What the master places on a worker: settings, the blocks of data its tasks use (each
    once; none when ``remote``: the worker loads them with the job's ``load_block``), and every
    task's (block, coefficient) terms. A later set-up of the same ``epoch`` (a re-split) adds to
    what the worker holds; one of a new epoch (a re-code) replaces it."""

    worker: int
    blocks: dict[int, Block]
    terms: dict[int, Terms]
    task_cost: dict[int, float]
    result_size: int
    delay: DelayModel
    single_message: bool
    chunk_rows: int = 0  # rows computed between checks for a purge; 0: whole tasks
    purge: bool = True
    kill_at: tuple[int, int] | None = None  # (job, iteration) at which to SIGKILL itself
    report_progress: bool = False  # tell the master how much of a purged task was done
    epoch: int = 0
    remote: bool = False
    n_partitions: int = 0
    trace: bool = False  # send the master a trace entry for every task (--trace)
    data_coded: bool = False  # blocks are coded (A, b, c) of a linear gradient job
    half: bool = False  # results travel as float32 (the job's result_dtype)
    # partial work: piece id -> (block key, first row, end row) of every piece it may be sent;
    # finished pieces go out together at the end of its list, and at least every PIECE_FLUSH_S
    pieces: dict[int, tuple[int, int, int]] | None = None
    # how its own share's pieces join into runs (one call, one value): None, one at a time
    runs: Runs | None = None
    # mini-batches: which rows of its blocks each iteration computes, and where each partition
    # begins in the rows they number (the data's end last)
    batches: Batches | None = None
    bounds: tuple[int, ...] = ()
    keep: bool = False  # results' values kept, their ids alone sent: the workers add them up
    # rank 0's board (a worker on its node): its path, θ's dtype and length; None: θ travels
    # in the ITERATEs
    board: tuple[str, str, int] | None = None


@dataclass(frozen=True)
class SetupShared:
    """What every worker's set-up of one placement shares: the code (and under partial work
    its ``pieces``), the job, the delays and the run's settings. A re-code makes a new one."""

    code: Code
    job: Coded
    delay: DelayModel
    pieces: Code | None = None
    epoch: int = 0
    purge: bool = True
    chunk_rows: int = 0
    report_progress: bool = False  # an adaptive split learns from purged tasks' progress
    trace: bool = False
    run_rows: int = 0  # partial work: its own share's pieces in runs of at most these rows
    keep: bool = False  # the workers keep their values and add up the sum (REDUCE)
    runs_within: bool = False  # a run keeps to one partition (a tolerance may leave some out)

    def for_worker(self, world_rank: int, index: int, tasks: Sequence[int],
                   kill_at: tuple[int, int] | None = None) -> WorkerSetup:
        """The set-up of code worker ``index``, of world rank ``world_rank`` (its identity:
        delays are keyed by it): the blocks and terms of ``tasks`` (only the ids of blocks a
        job's workers load themselves); under partial work the row range of every piece of
        the partitions it holds (it may be sent any)."""
        job = self.job
        cost = job.task_cost()
        blocks, terms = job.placement(tasks)
        setup = WorkerSetup(worker=world_rank - 1, blocks=blocks, terms=terms, remote=job.remote,
                            n_partitions=self.code.n_partitions,
                            task_cost={t: float(cost[t]) for t in tasks},
                            result_size=job.result_size, delay=self.delay,
                            single_message=self.code.messages == "single",
                            chunk_rows=self.chunk_rows, purge=self.purge, kill_at=kill_at,
                            report_progress=self.report_progress, epoch=self.epoch,
                            trace=self.trace, data_coded=job.data_coded, half=job.half,
                            batches=job.batches, bounds=job.bounds, keep=self.keep)
        table = None if self.pieces is None else PieceTable.of(self.pieces)
        if self.pieces is not None and table is not None:
            holds = table.holds[index]
            mine = [t for t, p in enumerate(table.pieces) if p.key in holds]
            setup.pieces = {t: (table.pieces[t].key, table.pieces[t].start, table.pieces[t].stop)
                            for t in mine}
            setup.task_cost = dict(zip(mine, piece_cost(self.pieces)[mine].tolist(),
                                       strict=True))
            setup.result_size = table.value_size or setup.result_size
            if table.ranges is None and self.run_rows > 0:
                setup.runs = Runs(setup.pieces, frozenset(self.pieces.schedule[index]),
                                  self.run_rows, not self.runs_within)
        return setup
