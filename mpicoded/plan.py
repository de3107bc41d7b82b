"""A run's options and its plan: every option checked, the code built and the job coded, on rank 0
before any work starts (no MPI here).

Options are the ``python -m mpicoded.train`` flags that are not about the built-in jobs' data;
``mpicoded.run`` takes them as keywords of the same names (``--slow-workers 2`` is
``slow_workers=[2]``). A user error raises ``UsageError`` (a ValueError) naming the option.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from . import checkpoint as ckpt
from .balance import SPLITS, Moments, Splitter
from .codes import Code, available_codes, code_parameters, make_code
from .dashboard import missing_extra
from .delays import DELAY_MODELS, DelayModel, load_profile
from .jobs import Coded, MatVecJob, coded
from .stream import poisson_arrivals


class UsageError(ValueError):
    """A user error: reported as one line on rank 0, exit status 2, no traceback."""


class NothingToDo(Exception):
    """The run asked for is already complete (a resume of a finished run): one line, exit 0."""


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is out of range: allowed >= 1")
    return value


def nonnegative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is out of range: allowed >= 0")
    return value


def rank_list(text: str) -> list[int]:
    try:
        return [int(r) for r in text.split(",") if r.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of ranks") from None


def add_run_options(p: argparse.ArgumentParser) -> None:
    """The run's options as flags (the CLI's, and the API's names and defaults)."""
    g = p.add_argument_group("run")
    g.add_argument("--iterations", type=positive_int, default=50, help="default 50")
    g = p.add_argument_group("code (each flag applies to the codes that take it; see the codes reference)")
    g.add_argument("--code", choices=available_codes(), default=None,
                   help="default frc for a gradient job, mds for a matrix-vector job")
    g.add_argument("--stragglers", type=int, default=None,
                   help="frc, gfrc, spread, cyclic, mds: stragglers s tolerated; default 3, or the largest "
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
                   help="uncoded, sparse: decode the sum of the partitions' values or each "
                   "of them; default sum for a gradient job, each for a matrix-vector job")
    g.add_argument("--tolerance", type=float, default=0.0, metavar="FRACTION",
                   help="fraction of partitions an iteration may miss (partial recovery); the "
                   "update leaves the missed ones out; default 0 (exact)")
    g = p.add_argument_group("injected delays")
    g.add_argument("--delay", choices=DELAY_MODELS, default="seed001",
                   help="default seed001 (a demo of paper 001's delays; mpicoded.run defaults "
                   "to none)")
    g.add_argument("--seed", type=int, default=0,
                   help="seeds delays, arrivals and the built-in jobs' data; default 0")
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
    g.add_argument("--slow-every", type=int, default=0, metavar="K",
                   help="persistent, compute: a moving slow worker instead of --slow-workers: "
                   "every K iterations a different seeded random worker is slow (a noisy "
                   "neighbour that comes and goes); default 0 (fixed)")
    g.add_argument("--chunk-rows", type=int, default=None, metavar="N",
                   help="rows computed between checks for a purge (a purge interrupts real "
                   "compute within one chunk); default: about 2 MB of dense data (a quarter to "
                   "one millisecond of compute), from the data's shape; 0: whole tasks")
    g.add_argument("--partial", choices=("auto", "on", "off"), default="auto",
                   help="partial work (a gradient job coded on its results, under a code that "
                   "sums partitions: uncoded, frc, gfrc, spread, ucmmc, cpgc): workers compute "
                   "row ranges of the partitions they hold, each holder its own share first, and "
                   "send them as they are done, so a straggler's finished rows count and its "
                   "replicas cover the rest; every row is counted once. A matrix-vector job: "
                   "row ranges of the coded blocks, each range decoded on its own, idle workers "
                   "standing in for a straggler's ranges with their own blocks (mds) or taking "
                   "over its ranges of the blocks they share (spread: plain row blocks on s+1 "
                   "workers). Default auto: on for spread, and frc or gfrc with --stragglers 2 "
                   "or more (measured faster than static there), where the job allows it; off "
                   "for the others")
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
    g.add_argument("--iteration-timeout", type=float, default=None, metavar="SECONDS",
                   help="treat a worker that owes an iteration results and has sent none in "
                   "SECONDS as failed (no ULFM needed): the straggler detector of last resort; "
                   "default none")
    g.add_argument("--checkpoint", default=None, metavar="DIR",
                   help="write theta and the resume point to DIR atomically")
    g.add_argument("--checkpoint-every", type=positive_int, default=10, metavar="N",
                   help="checkpoint every N iterations; default 10")
    g.add_argument("--resume", action="store_true",
                   help="continue from the checkpoint in --checkpoint DIR (same flags)")
    g = p.add_argument_group("runtime")
    g.add_argument("--wait", choices=("auto", "spin", "yield", "sleep"), default="auto",
                   help="how an idle rank waits for messages: spin (a core each, fastest when "
                   "ranks do not outnumber cores), yield (the core given away between polls, "
                   "then sleeping once idle for 50 ms), or sleep with a backoff; auto: spin if "
                   "this node's ranks fit its cores, else yield; default auto")
    g.add_argument("--threads", type=nonnegative_int, default=1, metavar="N",
                   help="BLAS/OpenMP threads a rank (numpy's matrix products): default 1, "
                   "right when ranks outnumber cores (21 ranks on 2 cores ran a plain "
                   "gradient loop 35x slower with a pool of threads each); 0 leaves the pools "
                   "as they are (import mpicoded sets OPENBLAS_NUM_THREADS, OMP_NUM_THREADS "
                   "and MKL_NUM_THREADS to 1 where they are unset)")
    g = p.add_argument_group("output")
    g.add_argument("--metrics", default=None, help="write JSON lines here (one per iteration, "
                   "one per task with the trace, then one run record)")
    g.add_argument("--trace", action=argparse.BooleanOptionalAction, default=None,
                   help="write a record per task to the metrics file: worker, start and end on "
                   "rank 0's clock, chunks, outcome (used, received, purged, dropped, stale); "
                   "default on whenever --metrics is given")
    g.add_argument("--dashboard", type=int, nargs="?", const=8787, default=None, metavar="PORT",
                   help="serve the live dashboard (python -m mpicoded.dashboard) of this run's "
                   "metrics on 127.0.0.1:PORT while it runs (default port 8787); without "
                   "--metrics the records go to a temporary file")
    g.add_argument("--loss-every", type=int, default=1, metavar="K",
                   help="evaluate the training loss every K iterations and at the end (a pass "
                   "over all the data on rank 0); 0: at the end only; default 1")
    g.add_argument("--output", default=None, metavar="PATH.npy",
                   help="save the trained theta here (numpy .npy, written atomically): shape "
                   "(dim,), or (jobs, dim) for a stream (the jobs this run served)")
    g.add_argument("--quiet", action="store_true", help="no progress lines")


def _option_actions() -> dict[str, argparse.Action]:
    p = argparse.ArgumentParser(add_help=False)
    add_run_options(p)
    return {a.dest: a for a in p._actions}


ACTIONS = _option_actions()
OPTIONS = tuple(ACTIONS)


def _coerce(name: str, action: argparse.Action, value: Any) -> Any:
    """An API keyword's value as the flag would have parsed it; UsageError naming it if wrong."""
    if value is None and action.default is None:
        return None
    if isinstance(action, (argparse._StoreTrueAction, argparse.BooleanOptionalAction)):
        if not isinstance(value, bool):
            raise UsageError(f"{name}={value!r}: expected True or False")
        return value
    if isinstance(action, argparse._AppendAction):
        items = [value] if isinstance(value, str) else list(value)
        return [str(v) for v in items]
    kind = action.type
    try:
        if kind is rank_list:
            return rank_list(value) if isinstance(value, str) else [int(v) for v in value]
        if kind in (int, positive_int, nonnegative_int):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer, str)):
                raise TypeError
            value = kind(value) if isinstance(value, str) else kind(str(int(value)))
        elif kind is float:
            if isinstance(value, bool):
                raise TypeError
            value = float(value)
        else:
            value = os.fspath(value)
    except (TypeError, ValueError, argparse.ArgumentTypeError) as exc:
        detail = f": {exc}" if str(exc) else ""
        raise UsageError(f"{name}={value!r} is not a valid value{detail}") from None
    if action.choices is not None and value not in action.choices:
        raise UsageError(f"{name}={value!r} is not one of {sorted(action.choices)}")
    return value


def options(**given: Any) -> argparse.Namespace:
    """The run's options: the defaults, overridden by ``given``; UsageError for a name that is
    not an option or a value the flag would refuse."""
    unknown = sorted(set(given) - set(OPTIONS))
    if unknown:
        raise UsageError(f"{unknown[0]!r} is not an option of mpicoded.run; allowed: "
                         f"{', '.join(OPTIONS)}")
    args = argparse.Namespace(**{name: a.default for name, a in ACTIONS.items()})
    for name, value in given.items():
        setattr(args, name, _coerce(name, ACTIONS[name], value))
    args.slow_workers = list(args.slow_workers)
    args.kill_worker = list(args.kill_worker)
    return args


@dataclass
class Plan:
    """Everything rank 0 built from the options before the run starts."""

    args: argparse.Namespace
    code: Code
    job: Coded
    delay: DelayModel
    tolerance: int
    splitter: Splitter | None
    arrivals_s: np.ndarray
    kill_at: dict[int, tuple[int, int]]
    resume: ckpt.Checkpoint | None
    metrics: TextIO | None
    fingerprint: str


CODE_FLAGS = ("stragglers", "load", "partitions", "redundancy", "degree", "target")


def build_code(args: argparse.Namespace, n_workers: int, matvec: bool = False) -> Code:
    """The code the flags name; --stragglers and --load default to 3, or the largest smaller
    value the code allows on ``n_workers`` workers; --target to what the job decodes (each
    block's product for a matrix-vector job)."""
    if args.code is None:
        args.code = "mds" if matvec else "frc"
    accepted = code_parameters(args.code)
    given = {name: getattr(args, name) for name in CODE_FLAGS if getattr(args, name) is not None}
    stray = [name for name in given if name not in accepted]
    if matvec and "target" in accepted and "target" not in given:
        given["target"] = "each"
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


def ft_enabled() -> bool:
    """Whether Open MPI's fault tolerance (ULFM) is on: ranks survive others' deaths."""
    return os.environ.get("OMPI_MCA_mpi_ft_enable") == "1"


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
    if kills and not ft_enabled():
        raise UsageError("--kill-worker needs Open MPI's fault tolerance: run launch/local.sh "
                         "--ft, or mpirun --with-ft ulfm (without it one dead rank ends the job)")
    return kills


def job_settings(job: object) -> dict[str, Any]:
    """A job's identity for checkpoints: its class and its plain settings (numbers, strings)."""
    plain = {k: v for k, v in vars(job).items()
             if isinstance(v, (int, float, str, bool, type(None))) and not k.startswith("_")}
    return {"class": f"{type(job).__module__}.{type(job).__qualname__}", **plain}


def run_fingerprint(args: argparse.Namespace, n_workers: int, job: object) -> str:
    """The settings a checkpoint belongs to (output and fault-injection options may differ,
    and ``partial``: the same sums, computed in pieces or whole, with no state between
    iterations)."""
    free = {"metrics", "quiet", "loss_every", "checkpoint", "checkpoint_every", "resume",
            "kill_worker", "iterations", "output", "iteration_timeout", "wait", "threads", "trace",
            "dashboard", "partial", "callbacks"}
    return ckpt.fingerprint({"n_workers": n_workers, "job": job_settings(job),
                             **{k: v for k, v in vars(args).items() if k not in free}})


def make_splitter(args: argparse.Namespace, code: Code,
                  profile: tuple[tuple[float, float], ...] | None,
                  complexity: float) -> Splitter | None:
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


def partial_by_default(code: Code) -> bool:
    """Whether ``--partial auto`` turns partial work on: spread (made for it, on a gradient
    or a matrix-vector job), and frc or gfrc with s >= 2, where ``bench straggler-tax`` found
    it faster than the static code with no straggler, one fixed, one moving and two fixed, in
    each of three runs. Not for s = 1 (no faster under a moving straggler or two fixed) nor
    codes that do not win in every pattern (mds ranges against static mds on PageRank)."""
    if code.name == "spread":
        return True
    return code.name in ("frc", "gfrc") and int(code.params.get("stragglers", 0)) >= 2


COST_WARNING_RATIO = 2.0  # a task costing more than this many partitions' work is flagged


def cost_warning(job: Coded, code: Code) -> str | None:
    """Why a run's tasks cost more than ``COST_WARNING_RATIO`` plain partitions, or None: a
    job coded on its results computes every partition of a task's support, so a dense code
    (mds over K partitions) makes every task compute K of them."""
    facts = job.describe()
    ratio = facts["task_cost_ratio"]
    if ratio <= COST_WARNING_RATIO:
        return None
    return (f"under --code {code.name} a task of {job.name} costs {ratio:.3g}x a plain "
            f"partition's compute ({facts['task_entries_max']:.0f} against "
            f"{facts['partition_entries']:.0f} matrix entries): coded on its results, a task "
            "computes every partition it sums. Codes whose tasks touch few partitions suit a "
            "nonlinear job: uncoded --partitions K with --split adaptive, frc or gfrc with "
            "--stragglers 1, ucmmc, cpgc, sparse --degree 2; a job linear in theta (linear = "
            "True) is coded on its data instead")


def tolerance_partitions(fraction: float, code: Code) -> int:
    """--tolerance FRACTION as a count of partitions, checked against the code's decoder."""
    if not 0.0 <= fraction < 1.0:
        raise UsageError(f"--tolerance {fraction} is out of range: allowed [0, 1)")
    m = int(np.floor(fraction * code.n_partitions + 1e-9))
    code.decoder(m)  # raises ValueError if the code's decoder cannot leave partitions out
    return m


def plan_run(user_job: object, args: argparse.Namespace, n_workers: int,
             append: bool = False) -> Plan:
    """Check the options for ``n_workers`` workers, build the code and code ``user_job`` (its
    data is read here); UsageError on user errors. ``append``: a new master after a failover
    goes on writing the metrics file."""
    if n_workers < 1:
        raise UsageError("mpicoded needs at least 2 MPI ranks (a master and a worker), e.g. "
                         "mpirun -n 21 python -m mpicoded.train")
    if args.loss_every < 0:
        raise UsageError(f"--loss-every {args.loss_every} is out of range: allowed >= 0")
    if args.iteration_timeout is not None and not args.iteration_timeout > 0:
        raise UsageError(f"--iteration-timeout {args.iteration_timeout} is out of range: "
                         "allowed > 0")
    if args.chunk_rows is not None and args.chunk_rows < 0:
        raise UsageError(f"--chunk-rows {args.chunk_rows} is out of range: allowed >= 0")
    bad = [r for r in args.slow_workers if not 1 <= r <= n_workers]
    if bad:
        raise UsageError(f"--slow-workers {bad}: allowed ranks 1..{n_workers}")
    check_trace(args, append)
    try:
        code = build_code(args, n_workers, isinstance(user_job, MatVecJob))
        tolerance = tolerance_partitions(args.tolerance, code)
        profile = load_profile(args.profile, n_workers) if args.profile else ()
        complexity = args.work / code.n_partitions
        delay = DelayModel(kind=args.delay, seed=args.seed, mu=args.mu, alpha=args.alpha,
                           task_time=args.task_time, slow_factor=args.slow_factor,
                           slow=frozenset(r - 1 for r in args.slow_workers),
                           time_scale=args.time_scale, profile=profile, complexity=complexity,
                           slow_from=args.slow_from, slow_every=args.slow_every,
                           n_workers=n_workers)
        splitter = make_splitter(args, code, profile, complexity)
        arrivals_s = (poisson_arrivals(args.jobs, args.arrival_rate, args.seed)
                      * args.time_scale)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.output is not None:
        check_output(args.output)
    if args.checkpoint:
        check_writable_dir(args.checkpoint, "--checkpoint")
    kill_at = parse_kills(args.kill_worker, n_workers)
    fingerprint = run_fingerprint(args, n_workers, user_job)
    resume = None
    if args.resume and not append:
        if not args.checkpoint:
            raise UsageError("--resume needs --checkpoint DIR")
        try:
            resume = ckpt.load(args.checkpoint, fingerprint)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        if (resume.job, resume.iteration) >= (args.jobs - 1, args.iterations):
            raise NothingToDo(f"the checkpoint in {args.checkpoint} is of a finished run (job "
                              f"{resume.job + 1} of {args.jobs}, {resume.iteration} iterations "
                              "done): nothing to resume")
        # a kill planned before the resume point happened in the first run: not again
        kill_at = {rank: at for rank, at in kill_at.items()
                   if at >= (resume.job, resume.iteration)}
    if args.partial == "on" and splitter is not None:
        raise UsageError("--partial on runs the code's own placement: it takes no --split")
    try:
        job = coded(user_job, code)  # reads the data: after every cheap check

        def cut(coded_job: Coded) -> None:
            rows = coded_job.default_chunk_rows() if args.chunk_rows is None else args.chunk_rows
            coded_job.pieces(rows, fit=args.chunk_rows is None).decoder(tolerance)

        if args.partial == "auto":  # on where the bench finds it never loses, if the job
            args.partial = "off"  # allows it
            if partial_by_default(code) and splitter is None:
                with contextlib.suppress(ValueError):
                    cut(job)
                    args.partial = "on"
        elif args.partial == "on":
            cut(job)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    metrics = None  # opened last: a refused run leaves an old metrics file as it was
    if args.metrics:
        try:
            Path(args.metrics).parent.mkdir(parents=True, exist_ok=True)
            # line-buffered: a reader following the file sees each record when it is written
            metrics = open(args.metrics, "a" if append else "w", buffering=1)  # noqa: SIM115
            if append and not ends_a_line(args.metrics):  # a line torn by the master's death
                metrics.write("\n")
        except OSError as exc:
            raise UsageError(f"--metrics {args.metrics}: cannot be written: {exc.strerror}") from None
    return Plan(args, code, job, delay, tolerance, splitter, arrivals_s, kill_at, resume, metrics,
                fingerprint)


def check_trace(args: argparse.Namespace, append: bool) -> None:
    """--trace and --dashboard: the trace goes into the metrics file, which a dashboard follows
    (a temporary one if none is named); ``args.trace`` is settled here (on with --metrics)."""
    if args.dashboard is not None:
        if not append:  # a master after a failover serves none, but writes the same file
            if not 0 < args.dashboard < 65536:
                raise UsageError(f"--dashboard {args.dashboard} is out of range: allowed "
                                 "1..65535")
            missing = missing_extra()
            if missing:
                raise UsageError(f"--dashboard: {missing}")
        if not args.metrics:
            args.metrics = run_metrics_path()
    if args.trace and not args.metrics:
        raise UsageError("--trace writes a record per task into the metrics file: give "
                         "--metrics FILE")
    if args.trace is None:
        args.trace = bool(args.metrics)


def run_metrics_path() -> str:
    """A metrics file for this run in the temporary folder, named after the MPI job where the
    launcher names it (every rank finds the same one: a new master after a failover goes on
    writing it), else after the time and this process."""
    job = os.environ.get("PMIX_NAMESPACE") or f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in job)
    return os.path.join(tempfile.gettempdir(), f"mpicoded-{safe}.jsonl")


def ends_a_line(path: str) -> bool:
    """Whether a file is empty or ends with a newline."""
    with open(path, "rb") as f:
        f.seek(0, 2)
        if f.tell() == 0:
            return True
        f.seek(-1, 2)
        return f.read(1) == b"\n"


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
