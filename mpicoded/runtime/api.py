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
import subprocess
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .. import __version__, limit_blas_threads
from ..host import mark_started
from ..jobs import AnyJob, job_kind, job_name
from ..log import logger, set_rank
from ..options import RunOptions, UsageError
from ..plan import CODE_FLAGS, NothingToDo, Plan, cost_warning, ft_enabled, plan_run
from ..record import Progress, recorded_iterations, run_record, save_output

if TYPE_CHECKING:
    from mpi4py import MPI

    from ..checkpoint import Checkpoint
    from ..core.result import RunResult
    from ..core.session import Settings
    from ..dashboard import Dashboard
    from .failover import Failover

T = TypeVar("T")
Adopt = tuple[dict[int, int], int, bool]  # survivors' comm ranks by world rank, epoch, re-code
Callbacks = Sequence[Callable[..., Any]]

_serving: Any = None  # the Master or Worker this rank runs now: where() asks it


def software() -> dict[str, str | None]:
    """What ran: mpicoded's version, the MPI library's own first line and, from a git checkout
    of mpicoded itself, the revision (None otherwise: an installed copy inside another
    project's repository is not that project's commit), so that a metrics file says which
    code made it. Never fails: it runs after the whole run, before the metrics are written."""
    import mpi4py
    from mpi4py import MPI

    out: dict[str, str | None] = {"mpicoded": __version__, "mpi_library": None,
                                  "mpi4py": mpi4py.__version__, "git_revision": None}
    try:
        library = MPI.Get_library_version().split("\0")[0].strip()  # Open MPI's ends in a NUL
        out["mpi_library"] = library.splitlines()[0] if library else None
    except MPI.Exception:
        pass
    package = Path(__file__).resolve().parents[1]  # mpicoded/
    try:
        found = subprocess.run(["git", "rev-parse", "--show-toplevel", "HEAD"],
                               capture_output=True, text=True, timeout=10, cwd=package)
        lines = found.stdout.split()
        if found.returncode == 0 and len(lines) == 2 and Path(lines[0]) == package.parent:
            out["git_revision"] = lines[1]
    except (OSError, subprocess.TimeoutExpired):
        pass
    return out


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
            return UsageError(self.message)
        return MasterFailed(f"rank 0 failed before the run started: {self.message}")


class MasterDied(RuntimeError):
    """Rank 0 died during the run (seen by a worker under ULFM)."""


class MasterFailed(RuntimeError):
    """Rank 0 failed before the run started (its traceback is on rank 0)."""


def run(job: AnyJob, comm: MPI.Intracomm | None = None,
        callbacks: Sequence[Callable[..., Any]] = (), **given: Any) -> RunResult | None:
    """Run ``job`` coded over the ranks of ``comm`` (MPI.COMM_WORLD if None; a communicator
    given is duplicated, so the run's messages never meet the program's); its rank 0 returns the
    RunResult, the other ranks return None. Options are the ``python -m mpicoded.train``
    flags' names, but ``delay`` defaults to ``"none"`` (the CLI's demo injects seed001). Each
    of ``callbacks`` is called on rank 0 after every iteration as ``callback(record, loss,
    theta)``: the IterationRecord, the loss of the theta it produced (None when not computed)
    and that theta (a copy may be kept; it must not be changed)."""
    job_kind(job)  # TypeError if it is none
    bad = [c for c in callbacks if not callable(c)]
    if bad:
        raise UsageError(f"callbacks: {bad[0]!r} is not callable")
    opts = RunOptions.from_keywords(**given)  # the same check on every rank: nobody waits
    duplicated, comm = comm is not None, communicator(comm)
    set_rank(world().Get_rank())
    if opts.threads:
        limit_blas_threads(opts.threads)
    from .transport import end_waits, set_wait

    set_wait(opts.wait, comm)
    result: RunResult | None
    try:
        if comm.Get_rank() == 0:
            result = _master(comm, job, opts, callbacks)
        else:
            result = _worker(comm, job, opts, callbacks)
    finally:
        end_waits()
    if duplicated and not ft_enabled():  # under ULFM one with dead ranks is left alone
        comm.Free()
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


def world() -> MPI.Intracomm:
    """MPI.COMM_WORLD, MPI loaded on first use."""
    import mpi4py

    if ft_enabled():
        # Under ULFM, MPI_Finalize after a worker died can wait for ever (seen here about once
        # in six runs with five deaths); every rank has finished its work by then, so skip it.
        mpi4py.rc.finalize = False
    from mpi4py import MPI

    mark_started(MPI.COMM_WORLD.Get_rank())  # past MPI_Init: the launcher's start-up watch
    return MPI.COMM_WORLD


def _tell_workers(comm: MPI.Intracomm, message: object) -> None:
    from ..core.protocol import Tag
    from .transport import send_object

    for rank in range(1, comm.Get_size()):
        send_object(comm, message, rank, Tag.SETUP)


def _master(comm: MPI.Intracomm, job: AnyJob, opts: RunOptions,
            callbacks: Callbacks) -> RunResult:
    dashboard = None
    try:
        plan = plan_run(job, opts, comm.Get_size() - 1, callbacks=callbacks)
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
        return _abort_on_error(comm, lambda: _execute(comm, plan))
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
            callbacks: Callbacks) -> RunResult | None:
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
            return _take_over(outcome, job, opts, callbacks, failovers)
        if worker is not None:
            worker.rebind(comm)


def _take_over(outcome: Failover, job: AnyJob, opts: RunOptions, callbacks: Callbacks,
               failovers: int) -> RunResult:
    """The new master: plan again (the same options, the metrics appended to), adopt the
    survivors and go on from the newest iteration someone holds theta for."""
    from .. import checkpoint as ckpt

    comm = outcome.comm
    plan = plan_run(job, opts, outcome.world_size - 1, append=True,  # the first code
                    callbacks=callbacks)
    survivors = {h.world_rank: rank for rank, h in enumerate(outcome.held) if rank > 0}
    epochs = {h.epoch for h in outcome.held[1:]}
    point = outcome.resume_point()
    resume = None
    if point is not None:
        (_, job_index, iteration), theta = point
        resume = ckpt.Checkpoint(job_index, iteration, theta, plan.fingerprint)
    # workers without a set-up, or holding a re-code's (epoch > 0) data, get new set-ups
    recode = epochs != {0}
    where = f"job {resume.job} iteration {resume.iteration}" if resume else "the start"
    logger.warning("the master died; rank %d took over (%d workers) and goes on from %s",
                   outcome.held[0].world_rank, len(survivors), where)
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
    return _abort_on_error(comm, lambda: _execute(comm, plan, resume, adopt, failovers))


def _abort_on_error(comm: MPI.Intracomm, body: Callable[[], T]) -> T:
    """``body()``; any exception but a dead master's ends every rank (MPI Abort), named."""
    from .master import AllWorkersFailed
    from .transport import ProcessesFailed, WorkerError, end_waits

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


def _banner(plan: Plan, n_workers: int) -> list[str]:
    """The run's two opening lines: job, code and workers; what a task computes."""
    opts, code = plan.options, plan.code
    shown = {k: v for k, v in code.params.items() if k in CODE_FLAGS}
    settings = " ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                        for k, v in shown.items())
    title = getattr(plan.job.job, "title", job_name(plan.job.job))
    facts = plan.job.describe()
    what = "non-zeros" if "task_nonzeros" in facts else "matrix entries"
    return [f"{title}: code {code.name} {settings} ({code.n_tasks} tasks), {n_workers} "
            f"workers, tolerance {plan.tolerance} partitions, delay {opts.delay}",
            f"coded on its {facts['coded_on']}: a task multiplies {facts['task_entries']:.0f} "
            f"{what} (mean; at most {facts['task_cost_ratio']:.2g}x a plain partition's "
            f"{facts['partition_entries']:.0f})"]


def _each_iteration(calls: list[Callable[..., Any]], record: Any, loss: float | None,
                    theta: Any) -> None:
    for call in calls:
        call(record, loss, theta)


def _settings(plan: Plan, resume: Checkpoint | None, adopt: Adopt | None) -> Settings:
    """The Session's settings from the plan: partial work's pieces cut (from the job's default
    chunks unless --chunk-rows is given), the resume point, a failover's survivors."""
    from ..core.session import Settings

    opts, job = plan.options, plan.job
    chunk_rows = job.default_chunk_rows() if opts.chunk_rows is None else opts.chunk_rows
    fit = opts.chunk_rows is None
    return Settings(
        plan.code, job, job.pieces(chunk_rows, fit=fit) if opts.partial == "on" else None,
        chunk_rows, fit, plan.tolerance, purge=not opts.no_purge, iterations=opts.iterations,
        jobs=len(plan.arrivals_s),
        resume=None if resume is None else (resume.job, resume.iteration, resume.theta),
        loss_every=opts.loss_every, checkpoint_every=opts.checkpoint_every if opts.checkpoint
        else 0, iteration_timeout=opts.iteration_timeout, splitter=plan.splitter,
        trace=bool(opts.trace), adopt=adopt)


def _execute(comm: MPI.Intracomm, plan: Plan, resume: Checkpoint | None = None,
             adopt: Adopt | None = None, failovers: int = 0) -> RunResult:
    """Rank 0: place, run, report. After a failover (``adopt``: the survivors' comm ranks by
    world rank, their set-ups' epoch, whether to re-code), the workers already hold their data
    and the run goes on from ``resume``."""
    from ..core.eventlog import EventLog
    from ..core.observers import Metrics, Observers, Reports, Tracing, log_lines
    from ..core.session import Session
    from ..core.trace import TaskTrace
    from .master import Master
    from .transport import end_waits, waiting

    opts = plan.options
    n_workers = plan.code.n_workers
    progress = Progress(opts.iterations, opts.quiet, plan.metrics, opts.jobs)
    if not opts.quiet:
        for line in _banner(plan, n_workers):
            logger.info("%s", line)
    warning = None if opts.partial == "on" else cost_warning(plan.job, plan.code)
    if warning:  # partial work computes pieces of a partition, whatever the code
        logger.warning("%s", warning)
    if adopt is None:
        resume = plan.resume
    session = Session(_settings(plan, resume, adopt))
    trace = TaskTrace() if opts.trace else None
    master = Master(comm, session, Observers(), plan.delay, not opts.no_purge, plan.arrivals_s,
                    plan.kill_at, (opts.checkpoint, plan.fingerprint) if opts.checkpoint else None,
                    trace)
    write = None if plan.metrics is None else plan.metrics.write
    # line-buffered, appended to after a failover: each session's lines follow its settings
    events = None if opts.events is None else open(  # noqa: SIM115
        opts.events, "a" if failovers else "w", buffering=1)
    calls = progress if not plan.callbacks else partial(_each_iteration,
                                                        [progress, *plan.callbacks])
    master.observers = Observers(
        None if events is None else EventLog(events.write, session.settings, plan.job.shape()),
        Reports(calls, progress.job_done), log_lines,
        None if write is None else Metrics(write, master.clock),
        None if trace is None else Tracing(trace, lambda rank: session.ranks.world(rank),
                                           session.is_live, write))
    global _serving
    _serving = master
    if plan.resume is not None and not opts.quiet:
        logger.info("resuming job %d at iteration %d from %s", plan.resume.job,
                    plan.resume.iteration, opts.checkpoint)
    start_loss = plan.job.loss(session.stream.theta)
    try:
        result = master.run()
    finally:
        if events is not None:
            events.close()
    outcome = master.outcome
    assert outcome is not None
    result.record = run_record(plan, result, n_workers, start_loss, master.max_pending,
                               session.chunk_rows, master.placed_bytes,
                               (master.result_cpu_s, master.results_handled))
    result.record["failovers"] = failovers
    result.record["wait"] = waiting()
    result.record["timed_out_workers"] = outcome.timed_out
    result.record["master_withheld_tasks"] = outcome.withheld_tasks
    result.record["software"] = software()
    if plan.metrics is not None:
        plan.metrics.write(json.dumps(result.record) + "\n")
        plan.metrics.close()
    if opts.output is not None:
        save_output(opts.output, result, stream=opts.jobs > 1)
    if outcome.unstopped:  # hung: only ending the job ends them (results are written)
        logger.error("worker rank(s) %s timed out and never acknowledged STOP; ending the job",
                     outcome.unstopped)
        end_waits()
        comm.Abort(1)
    return result
