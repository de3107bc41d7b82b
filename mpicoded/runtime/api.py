"""``mpicoded.run(job, **options)``: one coded run over MPI.COMM_WORLD, called on every rank.

Rank 0 checks the options, codes the job (reading its data), places it, runs and returns the
RunResult; every other rank serves and returns None. A user error raises UsageError (a
ValueError) on every rank: on rank 0 it is found while planning and sent to the workers instead
of their set-up, so nobody waits. Once the run has started, an exception on any rank ends the
whole job (MPI Abort) with the failing rank named: never a hang.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from .. import limit_blas_threads
from ..jobs import AnyJob, GradientJob, MatVecJob, job_name
from ..plan import CODE_FLAGS, NothingToDo, Plan, UsageError, options, plan_run
from ..record import Progress, run_record, save_output

T = TypeVar("T")


@dataclass(frozen=True)
class Refusal:
    """Sent to the workers instead of a set-up when rank 0 refuses the run."""

    message: str
    usage: bool  # a user error (UsageError on every rank), else rank 0 failed while planning

    def error(self) -> Exception:
        if self.usage:
            return UsageError(self.message)
        return MasterFailed(f"rank 0 failed before the run started: {self.message}")


class MasterDied(RuntimeError):
    """Rank 0 died during the run (seen by a worker under ULFM)."""


class MasterFailed(RuntimeError):
    """Rank 0 failed before the run started (its traceback is on rank 0)."""


def run(job: AnyJob, **given: Any):
    """Run ``job`` coded over the ranks of MPI.COMM_WORLD; rank 0 returns the RunResult, the
    other ranks return None. Options are the ``python -m mpicoded.train`` flags' names."""
    if not isinstance(job, (GradientJob, MatVecJob)):
        raise TypeError(f"{type(job).__name__} is not a job: subclass mpicoded.GradientJob or "
                        "mpicoded.MatVecJob")
    args = options(**given)  # the same check on every rank: nobody waits for a refused name
    comm = world()
    if comm.Get_rank() == 0:
        return _master(comm, job, args)
    _worker(comm, job)
    return None


def world():
    """MPI.COMM_WORLD, MPI loaded on first use, one BLAS thread a rank."""
    import mpi4py

    if os.environ.get("OMPI_MCA_mpi_ft_enable") == "1":
        # Under ULFM, MPI_Finalize after a worker died can wait for ever (seen here about once
        # in six runs with five deaths); every rank has finished its work by then, so skip it.
        mpi4py.rc.finalize = False
    from mpi4py import MPI

    limit_blas_threads()
    return MPI.COMM_WORLD


def _tell_workers(comm, message: object) -> None:
    from .protocol import Tag
    from .transport import send_object

    for rank in range(1, comm.Get_size()):
        send_object(comm, message, rank, Tag.SETUP)


def _master(comm, job: AnyJob, args):
    try:
        plan = plan_run(job, args, comm.Get_size() - 1)
    except NothingToDo:
        _tell_workers(comm, None)
        raise
    except UsageError as exc:
        _tell_workers(comm, Refusal(str(exc), usage=True))
        raise
    except Exception as exc:  # the job's own code failed (reading data, say): nobody waits
        _tell_workers(comm, Refusal(f"{type(exc).__name__}: {exc}", usage=False))
        raise
    return _abort_on_error(comm, lambda: _execute(comm, plan))


def _worker(comm, job: AnyJob) -> None:
    from .transport import ProcessesFailed
    from .worker import serve

    try:
        refused = _abort_on_error(comm, lambda: serve(comm, job))
    except ProcessesFailed:  # only the master talks to a worker: nothing left to do
        raise MasterDied(f"rank {comm.Get_rank()}: the master (rank 0) died") from None
    if isinstance(refused, Refusal):
        raise refused.error()


def _abort_on_error(comm, body: Callable[[], T]) -> T:
    """``body()``; any exception but a dead master's ends every rank (MPI Abort), named."""
    from .master import AllWorkersFailed
    from .transport import ProcessesFailed, WorkerError

    try:
        return body()
    except ProcessesFailed:
        raise
    except (WorkerError, AllWorkersFailed) as exc:
        print(f"mpicoded: {exc}", file=sys.stderr, flush=True)
    except Exception:
        print(f"mpicoded: rank {comm.Get_rank()} failed:\n{traceback.format_exc()}",
              file=sys.stderr, flush=True)
    comm.Abort(1)
    raise SystemExit(1)  # not reached: Abort ends the process


def _banner(plan: Plan, n_workers: int) -> str:
    args, code = plan.args, plan.code
    shown = {k: v for k, v in code.params.items() if k in CODE_FLAGS}
    settings = " ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                        for k, v in shown.items())
    title = getattr(plan.job.job, "title", job_name(plan.job.job))
    line = (f"[mpicoded] {title}: code {code.name} {settings} ({code.n_tasks} tasks), "
            f"{n_workers} workers, tolerance {plan.tolerance} partitions, delay {args.delay}")
    facts = plan.job.describe()
    if "task_nonzeros" in facts:
        line += (f"\n[mpicoded] non-zeros a coded task's block {facts['task_nonzeros']:.0f}, a "
                 f"plain partition's {facts['partition_nonzeros']:.0f}")
    return line


def _execute(comm, plan: Plan):
    """Rank 0: place, run, report."""
    from .master import Master

    args = plan.args
    n_workers = comm.Get_size() - 1
    progress = Progress(args.iterations, args.quiet, plan.metrics, args.jobs)
    if not args.quiet:
        print(_banner(plan, n_workers), file=sys.stderr, flush=True)
    checkpoint = None
    if args.checkpoint:
        checkpoint = (args.checkpoint, args.checkpoint_every, plan.fingerprint)
    master = Master(comm, plan.code, plan.job, plan.delay, tolerance=plan.tolerance,
                    purge=not args.no_purge, loss_every=args.loss_every, splitter=plan.splitter,
                    chunk_rows=args.chunk_rows, kill_at=plan.kill_at, checkpoint=checkpoint,
                    on_iteration=progress, on_job=progress.job_done)
    master.place()
    if plan.resume is not None and not args.quiet:
        print(f"[mpicoded] resuming job {plan.resume.job} at iteration {plan.resume.iteration} "
              f"from {args.checkpoint}", file=sys.stderr, flush=True)
    start_loss = plan.job.loss(master.theta)
    result = master.run(args.iterations, plan.arrivals_s, plan.resume)
    result.record = run_record(plan, result, n_workers, start_loss, master.max_pending,
                               master.chunk_rows, master.placed_bytes)
    if plan.metrics is not None:
        plan.metrics.write(json.dumps(result.record) + "\n")
        plan.metrics.close()
    if args.output is not None:
        save_output(args.output, result, stream=args.jobs > 1)
    return result
