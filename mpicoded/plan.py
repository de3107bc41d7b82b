"""A run's plan: every option checked, the code built and the job coded, on rank 0 before any
work starts (no MPI here). The options themselves are ``mpicoded.options.RunOptions``; planning
never changes them, it returns a ``Plan`` holding them settled. A user error raises
``UsageError`` (a ValueError) naming the option.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from . import checkpoint as ckpt
from .balance.splitter import Splitter
from .codes import Code, code_parameters, make_code
from .dashboard import missing_extra
from .delays import DelayModel, load_profile
from .jobs import Coded, JobKind, coded, job_kind
from .jobs.defaults import default_scheme, table_for
from .loadsplit import CODE_FLAGS, check_split, cut_within, make_splitter, named_code
from .options import RunOptions, UsageError
from .stream import poisson_arrivals
from .unused import check_unused


class NothingToDo(Exception):
    """The run asked for is already complete (a resume of a finished run): one line, exit 0."""


@dataclass
class Plan:
    """Everything rank 0 built from the options before the run starts. ``options`` are the
    ones given, settled: the code named, partial work on or off, the trace on or off and the
    metrics file named where a dashboard needs one."""

    options: RunOptions
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
    callbacks: Sequence[Callable[..., Any]] = ()
    nodes: tuple[int, ...] = ()  # each comm rank's node (``runtime.waits.nodes``); (): unknown




def build_code(opts: RunOptions, n_workers: int, kind: JobKind, most: int = 3) -> Code:
    """The code the options name; --stragglers and --load default to ``most`` (3; the default
    scheme's where the code is the default), or the largest smaller value the code allows on
    ``n_workers`` workers; other parameters the code takes to the kind's defaults (--target
    each for a matrix-vector job)."""
    name = opts.code
    assert name is not None  # plan_run names the default scheme's
    accepted = code_parameters(name)
    given = {k: getattr(opts, k) for k in CODE_FLAGS if getattr(opts, k) is not None}
    stray = [k for k in given if k not in accepted]
    given |= {k: v for k, v in kind.code_defaults.items() if k in accepted and k not in given}
    if stray:
        takes = [f"--{n}" for n in CODE_FLAGS if n in accepted] or ["none of the code flags"]
        raise UsageError(f"--{stray[0]} does not apply to --code {name}; it takes "
                         f"{', '.join(takes)}")
    defaults = {"stragglers": range(most, -1, -1), "load": range(3, 0, -1)}
    for flag, values in defaults.items():
        if flag in accepted and flag not in given and not (flag == "stragglers" and "partitions"
                                                            in given):
            for value in values:
                try:
                    return make_code(name, n_workers=n_workers, **given, **{flag: value})
                except ValueError:
                    continue
    return make_code(name, n_workers=n_workers, **given)


def launch_hint(ranks: int = 7) -> str:
    """How to start this program on ``ranks`` ranks: its own command line under mpirun, and
    through ``mpicoded launch`` (which adds what root and few cores need)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    program = f"-m {spec.name}" if spec is not None and spec.name else sys.argv[0] or "SCRIPT.py"
    command = " ".join([program, *sys.argv[1:]])
    return f"mpirun -n {ranks} python {command}, or mpicoded launch -n {ranks} -- {command}"


def ft_enabled() -> bool:
    """Whether Open MPI's fault tolerance (ULFM) is on: ranks survive others' deaths."""
    return os.environ.get("OMPI_MCA_mpi_ft_enable") == "1"


def parse_kills(specs: Sequence[str], n_workers: int) -> dict[int, tuple[int, int]]:
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


def run_fingerprint(opts: RunOptions, n_workers: int, job: object) -> str:
    """The settings a checkpoint belongs to (output and fault-injection options may differ,
    and ``partial``: the same sums, computed in pieces or whole, with no state between
    iterations)."""
    free = {"metrics", "quiet", "loss_every", "checkpoint", "checkpoint_every", "resume",
            "kill_worker", "iterations", "output", "iteration_timeout", "wait", "threads", "trace",
            "events", "dashboard", "partial", "eval_every"}
    return ckpt.fingerprint({"n_workers": n_workers, "job": job_settings(job),
                             **{k: v for k, v in asdict(opts).items() if k not in free}})


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
    # coded on its results, a task computes each partition it sums: those are counted (rows
    # split unevenly make two partitions' entries 2.001 times a mean partition's, say)
    partitions = max(len(support) for support in code.supports)
    if (partitions if facts["coded_on"] == "results" else ratio) <= COST_WARNING_RATIO:
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


def plan_run(user_job: object, given: RunOptions, n_workers: int, append: bool = False,
             callbacks: Sequence[Callable[..., Any]] = (), nodes: tuple[int, ...] = ()) -> Plan:
    """Check the options for ``n_workers`` workers, build the code and code ``user_job`` (its
    data is read here); UsageError on user errors. ``append``: a new master after a failover
    goes on writing the metrics file. ``callbacks`` ride along in the plan. ``nodes``: each
    comm rank's node (some on another than rank 0's: ``--relay``, ``--reduce`` auto)."""
    apart = any(n != nodes[0] for n in nodes)
    if n_workers < 1:
        raise UsageError("mpicoded needs at least 2 MPI ranks (a master and a worker): "
                         f"{launch_hint()}")
    if given.loss_every < 0:
        raise UsageError(f"--loss-every {given.loss_every} is out of range: allowed >= 0")
    if given.iteration_timeout is not None and not given.iteration_timeout > 0:
        raise UsageError(f"--iteration-timeout {given.iteration_timeout} is out of range: "
                         "allowed > 0")
    if given.chunk_rows is not None and given.chunk_rows < 0:
        raise UsageError(f"--chunk-rows {given.chunk_rows} is out of range: allowed >= 0")
    bad = [r for r in given.slow_workers if not 1 <= r <= n_workers]
    if bad:
        raise UsageError(f"--slow-workers {bad}: allowed ranks 1..{n_workers}")
    check_unused(given)
    kind = job_kind(user_job)  # TypeError if none: mpicoded.run refuses it first
    scheme = default_scheme(table_for(user_job))
    # the code named: build_code gets its name, and the run record and fingerprint show it
    within = cut_within(given, user_job, n_workers)  # an adaptive split as partial work
    opts = named_code(settle_output(given, append), scheme.code, n_workers, within)
    most = 3 if given.code else scheme.stragglers or 0
    try:
        code = build_code(opts, n_workers, kind, most)
        tolerance = tolerance_partitions(opts.tolerance, code)
        profile = load_profile(opts.profile, n_workers) if opts.profile else ()
        complexity = opts.work / code.n_partitions
        delay = DelayModel(kind=opts.delay, seed=opts.seed, mu=opts.mu, alpha=opts.alpha,
                           task_time=opts.task_time, slow_factor=opts.slow_factor,
                           slow=frozenset(r - 1 for r in opts.slow_workers),
                           time_scale=opts.time_scale, profile=profile, complexity=complexity,
                           slow_from=opts.slow_from, slow_every=opts.slow_every,
                           n_workers=n_workers)
        splitter = make_splitter(opts, code, profile, complexity, within)
        arrivals_s = (poisson_arrivals(opts.jobs, opts.arrival_rate, opts.seed)
                      * opts.time_scale)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if opts.output is not None:
        check_output(opts.output)
    if opts.checkpoint:
        check_writable_dir(opts.checkpoint, "--checkpoint")
    if opts.events:
        check_writable_dir(Path(opts.events).parent, "--events", opts.events)
    kill_at = parse_kills(opts.kill_worker, n_workers)
    fingerprint = run_fingerprint(opts, n_workers, user_job)
    resume = None
    if opts.resume and not append:
        if not opts.checkpoint:
            raise UsageError("--resume needs --checkpoint DIR")
        try:
            resume = ckpt.load(opts.checkpoint, fingerprint)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        if (resume.job, resume.iteration) >= (opts.jobs - 1, opts.iterations):
            raise NothingToDo(f"the checkpoint in {opts.checkpoint} is of a finished run (job "
                              f"{resume.job + 1} of {opts.jobs}, {resume.iteration} iterations "
                              "done): nothing to resume")
        # a kill planned before the resume point happened in the first run: not again
        kill_at = {rank: at for rank, at in kill_at.items()
                   if at >= (resume.job, resume.iteration)}
    if opts.partial == "on" and splitter is not None:
        raise UsageError("--partial on runs the code's own placement: it takes no --split of "
                         "whole tasks (--split adaptive without --code is partial work over "
                         "every worker's copy of the data)")
    try:
        job = coded(user_job, code, opts.batch_size, opts.batch_seed)  # reads the data: last
        opts = replace(opts, partial=partial_work(opts, job, code, tolerance, splitter))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    opts = replace(opts, reduce=reduce_path(opts, job, code, apart),
                   relay=relay_path(opts, job, apart))
    if opts.eval_every is not None and not job.evaluates:
        raise UsageError(f"--eval-every: {job.name} has no evaluation on held-out data (a "
                         "GradientJob's evaluate(theta); TorchJob's eval_data=): drop it")
    if splitter is not None:
        check_split(opts, code, cost_warning(job, code))
    metrics = None  # opened last: a refused run leaves an old metrics file as it was
    if opts.metrics:
        try:
            Path(opts.metrics).parent.mkdir(parents=True, exist_ok=True)
            # line-buffered: a reader following the file sees each record when it is written
            metrics = open(opts.metrics, "a" if append else "w", buffering=1)  # noqa: SIM115
            if append and not ends_a_line(opts.metrics):  # a line torn by the master's death
                metrics.write("\n")
        except OSError as exc:
            raise UsageError(f"--metrics {opts.metrics}: cannot be written: {exc.strerror}") from None
    return Plan(opts, code, job, delay, tolerance, splitter, arrivals_s, kill_at, resume, metrics,
                fingerprint, tuple(callbacks), tuple(nodes))


def partial_work(opts: RunOptions, job: Coded, code: Code, tolerance: int,
                 splitter: Splitter | None) -> str:
    """--partial settled, "on" or "off": auto is on where the bench finds it never loses, if
    the job allows it; ValueError if "on" and the job cannot be cut into pieces."""
    def cut() -> None:
        rows = job.default_chunk_rows() if opts.chunk_rows is None else opts.chunk_rows
        job.pieces(rows, fit=opts.chunk_rows is None).decoder(tolerance)

    if opts.partial == "auto":
        if partial_by_default(code) and splitter is None:
            with contextlib.suppress(ValueError):
                cut()
                return "on"
        return "off"
    if opts.partial == "on":
        cut()
    return opts.partial


# --reduce / --relay auto: where a result, or θ, is this large and a worker is on another
# node, the workers carry the bytes; on one node (rank 0's "link" is memory, copied by the
# receivers in parallel) neither pays (measured on 7
# ranks and across network namespaces: docs/benchmarks.md)
NETWORK_BYTES = 4 << 20


def reduce_path(opts: RunOptions, job: Coded, code: Code, apart: bool = False) -> str:
    """--reduce settled, "on" or "off": auto is on where a result is ``NETWORK_BYTES`` or more,
    a worker is on another node and the run allows it; "on" where it cannot work is refused
    with the fix."""
    why = ("the job is coded on its data (its results are blocks of the target, not "
           "terms of a sum)" if job.data_coded else
           f"--code {code.name} decodes each partition (--target each), not a sum"
           if code.target != "sum" else
           "--no-purge runs every list to its end, and a sum waits for none"
           if opts.no_purge else None)
    if opts.reduce == "on" and why is not None:
        raise UsageError(f"--reduce on: {why}; drop --reduce (or give --reduce off)")
    if opts.reduce != "auto":
        return opts.reduce
    size = job.result_size * (4 if job.half else 8)
    return "on" if why is None and apart and size >= NETWORK_BYTES else "off"


def relay_path(opts: RunOptions, job: Coded, apart: bool = False) -> str:
    """--relay settled, "on" or "off": auto is on where θ is ``NETWORK_BYTES`` or more and a
    worker is on another node; "on" under --no-purge (a worker reads nothing while it
    computes, so relays nothing) is refused with the fix."""
    if opts.relay == "on" and opts.no_purge:
        raise UsageError("--relay on: under --no-purge a worker reads nothing until its list is "
                         "done, so it would forward θ late; drop --relay (or give --relay off)")
    if opts.relay != "auto":
        return opts.relay
    size = job.dim * (4 if job.half_theta else 8)
    return "on" if apart and not opts.no_purge and size >= NETWORK_BYTES else "off"


def settle_output(opts: RunOptions, append: bool) -> RunOptions:
    """--trace and --dashboard settled: the trace goes into the metrics file, which a dashboard
    follows (a temporary one if none is named); the trace is on with --metrics unless refused."""
    metrics = opts.metrics
    if opts.dashboard is not None:
        if not append:  # a master after a failover serves none, but writes the same file
            if not 0 < opts.dashboard < 65536:
                raise UsageError(f"--dashboard {opts.dashboard} is out of range: allowed "
                                 "1..65535")
            missing = missing_extra()
            if missing:
                raise UsageError(f"--dashboard: {missing}")
        metrics = metrics or run_metrics_path()
    if opts.trace and not metrics:
        raise UsageError("--trace writes a record per task into the metrics file: give "
                         "--metrics FILE")
    return replace(opts, metrics=metrics, trace=bool(metrics) if opts.trace is None else opts.trace)


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
