"""``mpirun -n P+1 python -m mpicoded.train [flags]``: coded gradient descent on P workers.

Rank 0 parses and checks everything (flags, dataset, code) before any work starts; a usage error
prints one line on rank 0 and every rank exits with status 2. Any other exception ends the whole
run (MPI Abort) with the failing rank named, never a hang.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import numpy as np

from . import __version__
from . import checkpoint as ckpt
from .balance import SPLITS, Moments, Splitter
from .codes import Code, available_codes, code_parameters, make_code
from .delays import DELAY_MODELS, DelayModel, load_profile
from .jobs import JOBS, DatasetError, Job, load, make_job, synthetic
from .stream import genie_iteration_time, poisson_arrivals, serve_in_order

USAGE_ERROR = 2

EXAMPLES = """\
examples:
  mpirun -n 21 python -m mpicoded.train                      # defaults: logreg, frc s=3, seed001
  mpirun -n 7 python -m mpicoded.train --code cyclic --stragglers 1 \\
      --delay persistent --slow-workers 3 --slow-factor 10 --task-time 0.02
  mpirun -n 21 python -m mpicoded.train --job linreg --dataset data.npz --metrics run.jsonl
"""


class UsageError(Exception):
    """A user error: reported as one line on rank 0, exit status 2, no traceback."""


class NothingToDo(Exception):
    """The run asked for is already complete (a resume of a finished run): one line, exit 0."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print usage and exit 2 on this rank alone
        raise UsageError(message)


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is out of range: allowed >= 1")
    return value


def rank_list(text: str) -> list[int]:
    try:
        return [int(r) for r in text.split(",") if r.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of ranks") from None


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m mpicoded.train", description=__doc__.split("\n\n")[0],
                epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"mpicoded {__version__}")
    g = p.add_argument_group("job")
    g.add_argument("--job", choices=sorted(JOBS), default="logreg",
                   help="logreg (coded partial gradients) or linreg (W·θ products); default logreg")
    g.add_argument("--iterations", type=positive_int, default=50, help="default 50")
    g.add_argument("--lr", type=float, default=None, help="step size; default 1/smoothness")
    g.add_argument("--samples", type=positive_int, default=20000, help="synthetic data rows")
    g.add_argument("--features", type=positive_int, default=50, help="synthetic data columns")
    g.add_argument("--dataset", default=None,
                   help=".npz with arrays X, y, or .csv whose last column is the target")
    g = p.add_argument_group("code (each flag applies to the codes that take it; see README)")
    g.add_argument("--code", choices=available_codes(), default="frc", help="default frc")
    g.add_argument("--stragglers", type=int, default=None,
                   help="frc, gfrc, cyclic, mds: stragglers s tolerated; default 3, or the largest "
                   "smaller value the code allows on this many workers")
    g.add_argument("--load", type=int, default=None,
                   help="cpgc, ucmmc, mcc: computations r a worker; default 3, or the largest "
                   "smaller value the code allows")
    g.add_argument("--partitions", type=int, default=None,
                   help="gfrc: data partitions k (default n_workers); mds, sparse: K, any K of the "
                   "round(K·Ω) tasks decode")
    g.add_argument("--redundancy", type=float, default=None,
                   help="mds, sparse: Ω, tasks = round(K·Ω); default 1 (mds), 1.25 (sparse)")
    g.add_argument("--degree", type=int, default=None,
                   help="sparse: non-zeros d a row of B; default 3")
    g.add_argument("--target", choices=("sum", "each"), default=None,
                   help="uncoded: decode the gradient sum (default) or every partition's value")
    g.add_argument("--tolerance", type=float, default=0.0, metavar="FRACTION",
                   help="fraction of partitions an iteration may miss (partial recovery); the "
                   "update leaves the missed ones out; default 0 (exact)")
    g = p.add_argument_group("injected delays")
    g.add_argument("--delay", choices=DELAY_MODELS, default="seed001", help="default seed001")
    g.add_argument("--seed", type=int, default=0, help="seeds data and delays; default 0")
    g.add_argument("--mu", type=float, default=10.0, help="seed001 rate μ; default 10")
    g.add_argument("--alpha", type=float, default=0.01, help="seed001 shift α; default 0.01")
    g.add_argument("--task-time", type=float, default=0.01,
                   help="persistent: model time of one unit of work; default 0.01")
    g.add_argument("--slow-workers", type=rank_list, default=[],
                   help="persistent, compute: comma-separated MPI ranks (1..P) that are slow")
    g.add_argument("--slow-factor", type=float, default=10.0,
                   help="persistent: how much longer their tasks sleep; compute: how many times "
                   "over they really compute every task (burning CPU, no sleep); default 10")
    g.add_argument("--slow-from", type=int, default=0, metavar="IT",
                   help="persistent, compute: the slow workers are slow from iteration IT of each "
                   "job on; default 0")
    g.add_argument("--chunk-rows", type=int, default=None, metavar="N",
                   help="rows computed between checks for a purge (a purge interrupts real "
                   "compute within one chunk); default: about 1 ms of compute, from the data's "
                   "shape; 0: whole tasks")
    g.add_argument("--no-purge", action="store_true",
                   help="never purge: workers finish every task, however stale (how public peers "
                   "behave; for comparison only)")
    g.add_argument("--profile", default=None,
                   help="seed000 and --split optimal: worker speeds and communication delays, "
                   "'paper000' (20 workers: mu = 1, 2, 4, 8 and c = 2, 1, 0.5, 0.25, five each) "
                   "or a .json/.toml file of (mu, c) per worker")
    g.add_argument("--work", type=float, default=100.0, metavar="Z",
                   help="seed000: work Z of an iteration; task complexity C = Z / K; default 100")
    g.add_argument("--time-scale", type=float, default=1.0,
                   help="seconds per model time unit; default 1")
    g = p.add_argument_group("load split and job stream (paper 000)")
    g.add_argument("--split", choices=SPLITS, default="uniform",
                   help="which worker runs which task: uniform (the code's own schedule), "
                   "optimal (from the declared --profile), adaptive (estimated online, starting "
                   "uniform); default uniform")
    g.add_argument("--gamma", type=float, default=1.0,
                   help="the split equalises mean + gamma * std of each worker's time; default 1")
    g.add_argument("--jobs", type=positive_int, default=1,
                   help="jobs in the stream, each --iterations long, served in order; default 1")
    g.add_argument("--arrival-rate", type=float, default=0.01, metavar="LAMBDA",
                   help="Poisson job arrivals per model time unit (the first job at 0); "
                   "default 0.01")
    g = p.add_argument_group("faults and checkpoints")
    g.add_argument("--kill-worker", action="append", default=[], metavar="RANK@IT",
                   help="fault injection: the worker on RANK SIGKILLs itself when it starts "
                   "iteration IT (of the first job; RANK@JOB:IT for another) or, having skipped "
                   "it as superseded, a later one; repeatable; needs ULFM (launch/local.sh --ft, "
                   "or mpirun --with-ft ulfm)")
    g.add_argument("--checkpoint", default=None, metavar="DIR",
                   help="write theta and the resume point to DIR atomically")
    g.add_argument("--checkpoint-every", type=positive_int, default=10, metavar="N",
                   help="checkpoint every N iterations; default 10")
    g.add_argument("--resume", action="store_true",
                   help="continue from the checkpoint in --checkpoint DIR (same flags)")
    g = p.add_argument_group("output")
    g.add_argument("--metrics", default=None, help="write JSON lines here (one per iteration, "
                   "then one run record)")
    g.add_argument("--loss-every", type=int, default=1, metavar="K",
                   help="evaluate the training loss every K iterations and at the end (a pass "
                   "over all the data on rank 0); 0: at the end only; default 1")
    g.add_argument("--output", default=None, metavar="PATH.npy",
                   help="save the trained theta here (numpy .npy, written atomically): shape "
                   "(dim,), or (jobs, dim) for a stream (the jobs this run served)")
    g.add_argument("--quiet", action="store_true", help="no progress lines")
    return p


@dataclass
class Plan:
    """Everything rank 0 built from the flags before the run starts."""

    args: argparse.Namespace
    code: Code
    job: Job
    delay: DelayModel
    tolerance: int
    splitter: Splitter | None
    arrivals_s: np.ndarray
    kill_at: dict[int, tuple[int, int]]
    resume: ckpt.Checkpoint | None
    metrics: TextIO | None


CODE_FLAGS = ("stragglers", "load", "partitions", "redundancy", "degree", "target")


def build_code(args: argparse.Namespace, n_workers: int) -> Code:
    """The code the flags name; --stragglers and --load default to 3, or the largest smaller
    value the code allows on ``n_workers`` workers."""
    accepted = code_parameters(args.code)
    given = {name: getattr(args, name) for name in CODE_FLAGS if getattr(args, name) is not None}
    stray = [name for name in given if name not in accepted]
    if stray:
        takes = [f"--{n}" for n in CODE_FLAGS if n in accepted] or ["none of the code flags"]
        raise UsageError(f"--{stray[0]} does not apply to --code {args.code}; it takes "
                         f"{', '.join(takes)}")
    defaults = {"stragglers": range(3, -1, -1), "load": range(3, 0, -1)}
    for name, values in defaults.items():
        if name in accepted and name not in given and not (name == "stragglers" and "partitions"
                                                            in given):
            for value in values:
                try:
                    return make_code(args.code, n_workers=n_workers, **given, **{name: value})
                except ValueError:
                    continue
    return make_code(args.code, n_workers=n_workers, **given)


def parse_kills(specs: list[str], n_workers: int) -> dict[int, tuple[int, int]]:
    """--kill-worker RANK@IT or RANK@JOB:IT -> {rank: (job, iteration)}."""
    kills = {}
    for spec in specs:
        try:
            rank, _, when = spec.partition("@")
            job, _, it = when.rpartition(":")
            kills[int(rank)] = (int(job or 0), int(it))
        except ValueError:
            raise UsageError(f"--kill-worker {spec!r}: expected RANK@IT or RANK@JOB:IT") from None
    bad = [r for r in kills if not 1 <= r <= n_workers]
    if bad:
        raise UsageError(f"--kill-worker {bad}: allowed ranks 1..{n_workers}")
    if kills and os.environ.get("OMPI_MCA_mpi_ft_enable") != "1":
        raise UsageError("--kill-worker needs Open MPI's fault tolerance: run launch/local.sh "
                         "--ft, or mpirun --with-ft ulfm (without it one dead rank ends the job)")
    return kills


def run_fingerprint(args: argparse.Namespace, n_workers: int) -> str:
    """The settings a checkpoint belongs to (output and fault-injection flags may differ)."""
    free = {"metrics", "quiet", "loss_every", "checkpoint", "checkpoint_every", "resume",
            "kill_worker", "iterations", "output"}
    return ckpt.fingerprint({"n_workers": n_workers,
                             **{k: v for k, v in vars(args).items() if k not in free}})


def make_splitter(args: argparse.Namespace, code: Code, profile, complexity: float):
    """The load split, or None to run the code's own schedule."""
    if args.split == "uniform":
        return None
    declared = None
    if profile:
        m = complexity / np.array([mu for mu, _ in profile])
        declared = Moments(m, m**2, np.array([c for _, c in profile]))
    if args.split == "optimal" and declared is None:
        raise UsageError("--split optimal needs declared speeds: give --profile")
    if not args.gamma >= 0:
        raise UsageError(f"--gamma {args.gamma} is out of range: allowed >= 0")
    return Splitter(args.split, code.n_tasks, code.n_workers, declared, args.gamma)


def tolerance_partitions(fraction: float, code: Code) -> int:
    """--tolerance FRACTION as a count of partitions, checked against the code's decoder."""
    if not 0.0 <= fraction < 1.0:
        raise UsageError(f"--tolerance {fraction} is out of range: allowed [0, 1)")
    m = int(np.floor(fraction * code.n_partitions + 1e-9))
    code.decoder(m)  # raises ValueError if the code's decoder cannot leave partitions out
    return m


def plan_run(argv: list[str], n_workers: int) -> Plan:
    """Parse and check the flags for ``n_workers`` workers; raises UsageError on user errors."""
    args = build_parser().parse_args(argv)
    if n_workers < 1:
        raise UsageError("mpicoded.train needs at least 2 MPI ranks (a master and a worker), "
                         "e.g. mpirun -n 21 python -m mpicoded.train")
    if args.loss_every < 0:
        raise UsageError(f"--loss-every {args.loss_every} is out of range: allowed >= 0")
    if args.chunk_rows is not None and args.chunk_rows < 0:
        raise UsageError(f"--chunk-rows {args.chunk_rows} is out of range: allowed >= 0")
    bad = [r for r in args.slow_workers if not 1 <= r <= n_workers]
    if bad:
        raise UsageError(f"--slow-workers {bad}: allowed ranks 1..{n_workers}")
    try:
        code = build_code(args, n_workers)
        tolerance = tolerance_partitions(args.tolerance, code)
        profile = load_profile(args.profile, n_workers) if args.profile else ()
        complexity = args.work / code.n_partitions
        delay = DelayModel(kind=args.delay, seed=args.seed, mu=args.mu, alpha=args.alpha,
                           task_time=args.task_time, slow_factor=args.slow_factor,
                           slow=frozenset(r - 1 for r in args.slow_workers),
                           time_scale=args.time_scale, profile=profile, complexity=complexity,
                           slow_from=args.slow_from)
        splitter = make_splitter(args, code, profile, complexity)
        arrivals_s = (poisson_arrivals(args.jobs, args.arrival_rate, args.seed)
                      * args.time_scale)
        data = (load(args.dataset) if args.dataset
                else synthetic(args.job, args.samples, args.features, args.seed))
        job = make_job(args.job, data, code, args.lr)
    except (ValueError, DatasetError) as exc:
        raise UsageError(str(exc)) from None
    if args.output is not None:
        check_output(args.output)
    if args.checkpoint:
        check_writable_dir(args.checkpoint, "--checkpoint")
    kill_at = parse_kills(args.kill_worker, n_workers)
    resume = None
    if args.resume:
        if not args.checkpoint:
            raise UsageError("--resume needs --checkpoint DIR")
        try:
            resume = ckpt.load(args.checkpoint, run_fingerprint(args, n_workers))
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        if (resume.job, resume.iteration) >= (args.jobs - 1, args.iterations):
            raise NothingToDo(f"the checkpoint in {args.checkpoint} is of a finished run (job "
                              f"{resume.job + 1} of {args.jobs}, {resume.iteration} iterations "
                              "done): nothing to resume")
        # a kill planned before the resume point happened in the first run: not again
        kill_at = {rank: at for rank, at in kill_at.items()
                   if at >= (resume.job, resume.iteration)}
    metrics = None  # opened last: a refused run leaves an old metrics file as it was
    if args.metrics:
        try:
            Path(args.metrics).parent.mkdir(parents=True, exist_ok=True)
            metrics = open(args.metrics, "w")  # noqa: SIM115 - closed at the end of main
        except OSError as exc:
            raise UsageError(f"--metrics {args.metrics}: cannot be written: {exc.strerror}") from None
    return Plan(args, code, job, delay, tolerance, splitter, arrivals_s, kill_at, resume, metrics)


def check_output(path: str) -> None:
    """--output must name a .npy file in a directory that can be written (found before the run,
    not after it)."""
    if not path.endswith(".npy"):
        raise UsageError(f"--output {path}: expected a path ending in .npy")
    check_writable_dir(Path(path).parent, "--output", path)


def check_writable_dir(folder: str | Path, flag: str, shown: str | None = None) -> None:
    """Create ``folder`` if needed and write a file in it, so that a run cannot fail at its first
    save, mid-run."""
    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise UsageError(f"{flag} {shown or folder}: cannot be written: {exc.strerror}") from None


def save_output(path: str, result, stream: bool) -> None:
    """The final theta, or for a stream one row a job this run served."""
    array = np.stack(result.job_thetas) if stream else result.theta
    ckpt.write_atomically(path, lambda f: np.save(f, array))


class Progress:
    """Rank 0's progress on stderr: a bar redrawn in place on a terminal, else about ten lines
    a job."""

    def __init__(self, total: int, quiet: bool, metrics: TextIO | None, jobs: int = 1) -> None:
        self.total, self.quiet, self.metrics, self.jobs = total, quiet, metrics, jobs
        self.every = max(1, total // 10)
        self.tty = sys.stderr.isatty()
        self.wall = 0.0
        self.seen = 0
        self.purged = 0
        self.loss: float | None = None

    def job_done(self, job) -> None:
        if self.metrics is not None:
            self.metrics.write(json.dumps({"record": "job", **job.__dict__}) + "\n")
        if not self.quiet and self.jobs > 1:
            print(f"[mpicoded] job {job.job + 1}/{self.jobs} done: in-order delay "
                  f"{job.in_order_delay_s:.3f} s, loss {job.final_loss:.6f}",
                  file=sys.stderr, flush=True)

    def __call__(self, record, loss: float | None) -> None:
        self.wall += record.wall_s
        self.seen += 1
        self.purged += record.purged_tasks
        self.loss = loss if loss is not None else self.loss
        if self.metrics is not None:
            row = {"record": "iteration", **record.__dict__, "loss": loss}
            self.metrics.write(json.dumps(row) + "\n")
        done = record.iteration + 1
        if self.quiet or not (self.tty or done % self.every == 0 or done == self.total):
            return
        shown = "-" if self.loss is None else f"{self.loss:.6f}"
        where = f"job {record.job + 1}/{self.jobs} " if self.jobs > 1 else ""
        text = (f"{where}iteration {done}/{self.total}  loss {shown}  "
                f"mean {self.wall / self.seen * 1e3:.1f} ms/it  purged {self.purged}")
        if self.tty:
            filled = int(30 * done / self.total)
            end = "\n" if done == self.total else ""
            print(f"\r[mpicoded] [{'#' * filled}{'.' * (30 - filled)}] {text}", end=end,
                  file=sys.stderr, flush=True)
        else:
            print(f"[mpicoded] {text}", file=sys.stderr, flush=True)


def run_record(plan: Plan, result, n_workers: int, initial_loss: float,
               master_max_pending: int = 0, chunk_rows: int = 0) -> dict:
    """The final metrics line: config, code, totals and the makespan."""
    records = result.records
    wall = [r.wall_s for r in records]
    return {
        "record": "run",
        "config": {k: v for k, v in vars(plan.args).items() if k != "metrics"},
        "code": plan.code.describe(),
        "delay": plan.delay.describe(),
        "n_workers": n_workers,
        "tolerance_partitions": plan.tolerance,
        "iterations": len(records),
        "mean_iteration_s": sum(wall) / len(wall),
        "makespan_s": result.makespan_s,
        "job_done_s": result.jobs[-1].done_s if result.jobs else 0.0,
        "chunk_rows": chunk_rows,
        "initial_loss": initial_loss,
        "final_loss": result.losses[-1],
        **{f"total_{k}": v for k, v in result.totals.items()},
        "worker_dropped_tasks": sum(c[2] for c in result.worker_counters.values()),
        "worker_computed_tasks": sum(c[0] for c in result.worker_counters.values()),
        "workers": [{"rank": w + 1, "computed_tasks": c[0], "sent_results": c[1],
                     "dropped_tasks": c[2]} for w, c in sorted(result.worker_counters.items())],
        **stream_summary(plan, result),
        "failed_workers": int(result.totals.get("failed_workers", 0)),
        "recodes": result.recodes,
        "master_max_pending_sends": master_max_pending,
        "master_maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "final_theta": [float(v) for v in result.theta] if len(result.theta) <= 1000 else None,
    }


def placement(plan: Plan) -> tuple[tuple[int, ...], ...]:
    """Which tasks' data each worker holds: its schedule, or every task for an adaptive split."""
    if plan.splitter is None:
        return plan.code.schedule
    if plan.splitter.kind == "adaptive":
        return tuple(tuple(range(plan.code.n_tasks)) for _ in range(plan.code.n_workers))
    return plan.splitter.schedule()


def stream_summary(plan: Plan, result) -> dict:
    """Jobs, mean in-order delay, and the genie's lower bound for the same realized delays."""
    delay, code = plan.delay, plan.code
    genie = [sum(delay.seconds(genie_iteration_time(delay, code.n_workers, j, it,
                                                    code.n_partitions))
                 for it in range(plan.args.iterations)) for j in range(len(result.jobs))]
    bound = serve_in_order(plan.arrivals_s, genie)
    out = {"jobs": len(result.jobs),
           "mean_in_order_delay_s": float(np.mean([j.in_order_delay_s for j in result.jobs])),
           "genie_mean_in_order_delay_s": float(np.mean(bound.delay))}
    if plan.splitter is not None:
        out["split"] = plan.splitter.kind
        out["final_loads"] = [int(k) for k in plan.splitter.loads]
    return out


def main_master(comm, argv: list[str]) -> int:
    """Rank 0: plan, place data, run, report."""
    from .runtime.master import Master
    from .runtime.protocol import Tag

    n_workers = comm.Get_size() - 1
    try:
        plan = plan_run(argv, n_workers)
    except UsageError as exc:
        print(f"mpicoded.train: error: {exc}", file=sys.stderr, flush=True)
        status = USAGE_ERROR
    except NothingToDo as exc:
        print(f"mpicoded.train: {exc}", file=sys.stderr, flush=True)
        status = 0
    except SystemExit as exc:  # --help, --version
        status = int(exc.code or 0)
    else:
        status = None
    if status is not None:
        for rank in range(1, comm.Get_size()):
            comm.send(status, dest=rank, tag=int(Tag.SETUP))
        return status
    args = plan.args
    progress = Progress(args.iterations, args.quiet, plan.metrics, args.jobs)
    if not args.quiet:
        shown = {k: v for k, v in plan.code.params.items() if k in CODE_FLAGS}
        settings = " ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                            for k, v in shown.items())
        print(f"[mpicoded] {args.job} on {plan.job.data.source}: code {plan.code.name} "
              f"{settings} ({plan.code.n_tasks} tasks), {n_workers} workers, "
              f"tolerance {plan.tolerance} partitions, delay {args.delay}",
              file=sys.stderr, flush=True)
    checkpoint = None
    if args.checkpoint:
        checkpoint = (args.checkpoint, args.checkpoint_every, run_fingerprint(args, n_workers))
    master = Master(comm, plan.code, plan.job, plan.delay, tolerance=plan.tolerance,
                    purge=not args.no_purge, loss_every=args.loss_every, splitter=plan.splitter,
                    chunk_rows=args.chunk_rows,
                    kill_at=plan.kill_at, checkpoint=checkpoint, on_iteration=progress,
                    on_job=progress.job_done)
    master.place(placement(plan))
    if plan.resume is not None and not args.quiet:
        print(f"[mpicoded] resuming job {plan.resume.job} at iteration {plan.resume.iteration} "
              f"from {args.checkpoint}", file=sys.stderr, flush=True)
    start_loss = plan.job.loss(master.theta)
    result = master.run(args.iterations, plan.arrivals_s, plan.resume)
    record = run_record(plan, result, n_workers, start_loss, master.max_pending,
                        master.chunk_rows)
    if plan.metrics is not None:
        plan.metrics.write(json.dumps(record) + "\n")
        plan.metrics.close()
    if args.output is not None:
        save_output(args.output, result, stream=args.jobs > 1)
    print(summary_table(record))
    return 0


def summary_table(record: dict) -> str:
    rows = [
        ("iterations", f"{record['iterations']}"),
        ("mean iteration", f"{record['mean_iteration_s'] * 1e3:.1f} ms"),
        ("job done", f"{record['job_done_s']:.3f} s"),
        ("makespan", f"{record['makespan_s']:.3f} s"),
        ("results received", f"{record['total_results_received']:.0f}"),
        ("stale results dropped", f"{record['total_stale_results']:.0f}"),
        ("tasks purged", f"{record['total_purged_tasks']:.0f}"),
        ("loss", f"{record['initial_loss']:.6f} -> {record['final_loss']:.6f}"),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def main(argv: list[str] | None = None) -> int:
    """Entry point on every rank."""
    import mpi4py

    if os.environ.get("OMPI_MCA_mpi_ft_enable") == "1":
        # Under ULFM, MPI_Finalize after a worker died can wait for ever (seen here about once
        # in six runs with five deaths); every rank has finished its work by then, so skip it.
        mpi4py.rc.finalize = False
    from mpi4py import MPI

    from . import limit_blas_threads
    from .runtime.master import AllWorkersFailed
    from .runtime.transport import WorkerError
    from .runtime.worker import run_worker

    limit_blas_threads()
    comm = MPI.COMM_WORLD
    argv = sys.argv[1:] if argv is None else argv
    try:
        if comm.Get_rank() == 0:
            return main_master(comm, argv)
        return run_worker(comm)
    except (WorkerError, AllWorkersFailed) as exc:  # name it, then end every rank
        print(f"mpicoded: {exc}", file=sys.stderr, flush=True)
    except Exception:  # an error anywhere else ends the whole run too, never a hang
        print(f"mpicoded: rank {comm.Get_rank()} failed:\n{traceback.format_exc()}",
              file=sys.stderr, flush=True)
    comm.Abort(1)
    return 1


if __name__ == "__main__":
    sys.exit(main())
