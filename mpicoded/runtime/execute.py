"""Rank 0's run: plan to Session, the executor and its observers, then the run record, the
metrics file and --output."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..jobs import job_name
from ..loadsplit import CODE_FLAGS
from ..log import logger
from ..plan import Plan, cost_warning
from ..record import Progress, run_record, save_output

if TYPE_CHECKING:
    from mpi4py import MPI

    from ..checkpoint import Checkpoint
    from ..core.result import RunResult
    from ..core.settings import Settings

Adopt = tuple[dict[int, int], int, bool]  # survivors' comm ranks by world rank, epoch, re-code


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


def _banner(plan: Plan, n_workers: int) -> list[str]:
    """The run's two opening lines: job, code and workers; what a task computes."""
    opts, code = plan.options, plan.code
    shown = {k: v for k, v in code.params.items() if k in CODE_FLAGS}
    settings = " ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                        for k, v in shown.items())
    title = getattr(plan.job.job, "title", job_name(plan.job.job))
    facts = plan.job.describe()
    what = "non-zeros" if "task_nonzeros" in facts else "matrix entries"
    batches = plan.job.batches
    steps = "" if batches is None else (
        f"; mini-batches of {batches.size} of its {batches.rows} rows, {batches.steps_per_pass} "
        f"steps a pass (seed {batches.seed}): a step computes their share")
    return [f"{title}: code {code.name} {settings} ({code.n_tasks} tasks), {n_workers} "
            f"workers, tolerance {plan.tolerance} partitions, delay {opts.delay}",
            f"coded on its {facts['coded_on']}: a task multiplies {facts['task_entries']:.0f} "
            f"{what} (mean; at most {facts['task_cost_ratio']:.2g}x a plain partition's "
            f"{facts['partition_entries']:.0f}){steps}"]


def _each_iteration(calls: list[Callable[..., Any]], record: Any, loss: float | None,
                    theta: Any) -> None:
    for call in calls:
        call(record, loss, theta)


def _settings(plan: Plan, resume: Checkpoint | None, adopt: Adopt | None) -> Settings:
    """The Session's settings from the plan: partial work's pieces cut (from the job's default
    chunks unless --chunk-rows is given), the resume point, a failover's survivors."""
    from ..core.piecelist import run_rows
    from ..core.settings import Settings
    from ..plan import ft_enabled

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
        trace=bool(opts.trace), adopt=adopt,
        run_rows=run_rows(chunk_rows, plan.delay.sleeps, job.result_size)
        if opts.partial == "on" else 0, value_size=job.result_size,
        linger=not ft_enabled() and opts.iteration_timeout is None, reduce=opts.reduce == "on",
        relay=opts.relay == "on", nodes=plan.nodes,
        eval_every=opts.eval_every if opts.eval_every is not None else
        0 if job.evaluates else None)


def execute(comm: MPI.Intracomm, plan: Plan, serving: Callable[[Any], None],
            resume: Checkpoint | None = None, adopt: Adopt | None = None,
            failovers: int = 0) -> RunResult:
    """Rank 0: place, run, report. After a failover (``adopt``: the survivors' comm ranks by
    world rank, their set-ups' epoch, whether to re-code), the workers already hold their data
    and the run goes on from ``resume``. ``serving`` is told the executor (SIGUSR1 asks it where
    the run is)."""
    from ..core.eventlog import EventLog
    from ..core.observers import Metrics, Observers, Reports, Tracing, log_lines
    from ..core.result import RunResult
    from ..core.session import Session
    from ..core.trace import TaskTrace
    from ..speeds import StragglerWatch
    from .linger import Lingering, linger
    from .master import Master
    from .waits import end_waits, waiting

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
    if resume is not None and resume.state is not None:  # the optimizer's, say, as it was
        plan.job.restore(resume.state)
    trace = TaskTrace() if opts.trace else None
    watch = None if trace is None else StragglerWatch(
        None if opts.quiet else partial(logger.info, "%s"))
    master = Master(comm, session, Observers(), plan.delay, plan.arrivals_s,
                    plan.kill_at, (opts.checkpoint, plan.fingerprint) if opts.checkpoint else None,
                    trace)
    write = None if plan.metrics is None else plan.metrics.write
    # line-buffered, appended to after a failover: each session's lines follow its settings
    events = None if opts.events is None else open(  # noqa: SIM115
        opts.events, "a" if failovers else "w", buffering=1)
    calls = progress if not plan.callbacks else partial(_each_iteration,
                                                        [progress, *plan.callbacks])
    progress.traffic = lambda: (master.received_bytes, master.sent_bytes)
    master.observers = Observers(
        None if events is None else EventLog(events.write, session.settings, plan.job.shape()),
        Reports(calls, progress.job_done), log_lines,
        None if write is None else Metrics(write, master.clock),
        None if trace is None else Tracing(trace, lambda rank: session.ranks.world(rank),
                                           session.is_live, write, watch))
    serving(master)
    if plan.resume is not None and not opts.quiet:
        logger.info("resuming job %d at iteration %d from %s", plan.resume.job,
                    plan.resume.iteration, opts.checkpoint)
    start_loss = plan.job.loss(session.stream.theta)
    try:
        outcome = master.run()
    finally:
        if events is not None:
            events.close()
    result = RunResult(outcome.theta, outcome.records, outcome.losses, master.makespan_s,
                       outcome.totals, outcome.counters, outcome.jobs, outcome.recodes,
                       outcome.job_thetas, final_loads=outcome.loads)
    result.record = run_record(plan, result, n_workers, start_loss, master.max_pending,
                               session.chunk_rows, master.placed_bytes,
                               (master.result_cpu_s, master.results_handled),
                               (master.received_bytes, master.sent_bytes))
    result.record["failovers"] = failovers
    result.record["board_workers"] = len(master.boarded)
    result.record["wait"] = waiting()
    result.record["timed_out_workers"] = outcome.timed_out
    result.record["master_withheld_tasks"] = outcome.withheld_tasks
    if session.piecework is not None:  # partial work: rank -> pieces given to others
        result.record["handed"] = {str(r): n for r, n in outcome.handed.items()}
    result.record["lingering_workers"] = sorted(master.lingering)
    if watch is not None:  # rank: speed against the median worker's, over the run
        result.record["stragglers"] = {str(r): x for r, x in watch.stragglers().items()}
    result.record["software"] = software()
    if plan.metrics is not None:
        plan.metrics.write(json.dumps(result.record) + "\n")
        plan.metrics.close()
    if opts.output is not None:
        save_output(opts.output, result, stream=opts.jobs > 1)
    if master.lingering:  # released once the caller is done with the result
        linger(Lingering(comm, master.outbox, set(master.lingering)))
    if outcome.unstopped:  # hung: only ending the job ends them (results are written)
        logger.error("worker rank(s) %s timed out and never acknowledged STOP; ending the job",
                     outcome.unstopped)
        end_waits()
        comm.Abort(1)
    return result
