"""``mpirun -n P+1 python -m mpicoded.train [flags]``: a coded job on P workers.

A thin client of ``mpicoded.run``: every rank parses the flags and builds the job (a built-in or
``--job MODULE:NAME``) before MPI is up, then calls ``run``. A usage error prints one line on
rank 0 and every rank exits with status 2; an error during the run ends every rank (MPI Abort),
the failing rank named.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import io
import os
import signal
import sys
from typing import NoReturn

from . import __version__
from .host import launched_rank
from .jobs import BUILTINS, AnyJob, JobSpecError, build_job
from .log import log_to_stderr, set_rank
from .options import UsageError, add_flags, given_options, positive_int
from .plan import NothingToDo
from .record import summary_table

USAGE_ERROR = 2

EXAMPLES = """\
examples:
  mpirun -n 21 python -m mpicoded.train                 # defaults: logreg, spread s=2, seed001
  mpirun -n 7 python -m mpicoded.train --code cyclic --stragglers 1 \\
      --delay persistent --slow-workers 3 --slow-factor 10 --task-time 0.02
  mpirun -n 21 python -m mpicoded.train --job linreg --dataset data.npz --metrics run.jsonl
  mpirun -n 21 python -m mpicoded.train --job pagerank --graph web.txt --code sparse
  mpirun -n 7 python -m mpicoded.train --job my_jobs.py:Ridge --code gfrc --stragglers 2
"""

# the data flags each built-in job takes (--seed, a run option, seeds their data too)
JOB_FLAGS = {"logreg": ("samples", "features", "dataset", "lr"),
             "linreg": ("samples", "features", "dataset", "lr"),
             "pagerank": ("graph", "damping", "nodes"),
             "power": ("dataset", "features")}
DATA_FLAGS = ("samples", "features", "dataset", "lr", "graph", "damping", "nodes")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse would print usage and exit 2 on this rank alone
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m mpicoded.train", description=__doc__.split("\n\n")[0],
                epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"mpicoded {__version__}")
    g = p.add_argument_group("job")
    g.add_argument("--job", default="logreg", metavar="JOB",
                   help=f"a built-in job ({', '.join(BUILTINS)}), or your own: MODULE:NAME or "
                   "path/to/file.py:NAME, NAME a job class or a function returning a job; "
                   "default logreg")
    g.add_argument("--lr", type=float, default=None, help="logreg, linreg: step size; default "
                   "1/smoothness")
    g.add_argument("--samples", type=positive_int, default=None,
                   help="logreg, linreg: synthetic data rows; default 20000")
    g.add_argument("--features", type=positive_int, default=None,
                   help="logreg, linreg: synthetic data columns; power: matrix size; default 50")
    g.add_argument("--dataset", default=None,
                   help="logreg, linreg: .npz with arrays X, y; .csv or .npy (float64) whose "
                   "last column is the target, a .npy memory-mapped and read by each worker for "
                   "its own partitions; or a LIBSVM file (.svm, .svmlight, .libsvm; kept sparse, "
                   "-1/+1 labels taken as 0/1; needs scikit-learn). power: a symmetric matrix "
                   "in a .npy")
    g.add_argument("--graph", default=None, help="pagerank: an edge list as SNAP writes it "
                   "('#' comments, 'FROM TO' a line); default a synthetic power-law graph")
    g.add_argument("--damping", type=float, default=None, help="pagerank: default 0.85")
    g.add_argument("--nodes", type=positive_int, default=None,
                   help="pagerank: nodes of the synthetic graph (about 10 edges each); "
                   "default 20000")
    add_flags(p)
    return p


def make_job(args: argparse.Namespace) -> AnyJob:
    """The job the flags name, built here (on every rank); UsageError if they do not fit."""
    given = [f for f in DATA_FLAGS if getattr(args, f) is not None]
    if args.job not in BUILTINS:
        if given:
            raise UsageError(f"--{given[0]} is for the built-in jobs; --job {args.job} brings "
                             "its own data")
        try:
            return build_job(args.job)
        except JobSpecError as exc:
            raise UsageError(str(exc)) from None
    takes = JOB_FLAGS[args.job]
    stray = [f for f in given if f not in takes]
    if stray:
        raise UsageError(f"--{stray[0]} does not apply to --job {args.job}; it takes "
                         f"{', '.join('--' + f for f in takes)}")
    try:
        return BUILTINS[args.job](seed=args.seed, **{f: getattr(args, f) for f in given})
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def parse(argv: list[str], rank: int) -> argparse.Namespace:
    """The flags; --help and --version print on rank 0 only (SystemExit on every rank)."""
    if rank == 0:
        return build_parser().parse_args(argv)
    with contextlib.redirect_stdout(io.StringIO()):
        return build_parser().parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Entry point on every rank."""
    from .runtime.api import MasterDied, MasterFailed, NoMPI, mpi_settings, run, where, world

    mpi_settings()
    rank = launched_rank()
    log_to_stderr()
    set_rank(rank)
    argv = sys.argv[1:] if argv is None else argv
    try:  # before MPI is up: a job's module (torch, say) may take seconds to import, and under
        args = parse(argv, rank)  # ULFM a rank out of MPI that long was reported dead
        job = make_job(args)
    except UsageError as exc:
        if rank == 0:
            print(f"mpicoded.train: error: {exc}", file=sys.stderr, flush=True)
        with contextlib.suppress(NoMPI):  # MPI_Init waits for rank 0, which has said it: no
            world()  # rank's exit 2 ends the job before then
        return USAGE_ERROR
    except SystemExit as exc:  # --help, --version
        return int(exc.code or 0)
    try:
        rank = world().Get_rank()
    except NoMPI as exc:
        print(f"mpicoded.train: error: {exc}", file=sys.stderr, flush=True)
        return 1
    set_rank(rank)

    def say_where(signum: int, frame: object) -> None:
        try:
            line = where()
        except Exception as exc:  # never let a diagnostic end the run
            line = f"cannot tell ({type(exc).__name__}: {exc})"
        os.write(2, f"[mpicoded] rank {rank} (pid {os.getpid()}): {line}\n".encode())

    # a rank that seems stuck tells, on `kill -USR1 PID`, its stack at once (even from inside
    # MPI) and then, back in Python, what it waits for
    signal.signal(signal.SIGUSR1, say_where)
    faulthandler.register(signal.SIGUSR1, all_threads=True, chain=True)
    try:
        result = run(job, **given_options(args))
    except UsageError as exc:
        if rank == 0:
            print(f"mpicoded.train: error: {exc}", file=sys.stderr, flush=True)
        return USAGE_ERROR
    except NothingToDo as exc:
        print(f"mpicoded.train: {exc}", file=sys.stderr, flush=True)  # raised on rank 0 only
        return 0
    except MasterFailed:  # rank 0 prints the traceback
        return 1
    except MasterDied as exc:
        print(f"mpicoded: {exc}; exiting", file=sys.stderr, flush=True)
        return 1
    if result is None:
        return 0
    print(summary_table(result.record))
    summary = job.summary(result.theta)
    if summary:
        print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
