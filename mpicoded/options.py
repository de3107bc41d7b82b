"""A run's options, one frozen table: ``RunOptions``. Its fields are ``mpicoded.run``'s keywords;
the ``python -m mpicoded.train`` flags, their help and defaults, the keywords' checks and the
docs' reference are all generated from it (no MPI here).

Each field carries a ``Flag`` in its metadata: how the flag is spelt on the command line, its
group in ``--help``, how its text is parsed and what it may be. A keyword is checked as the flag
would check its text, so ``run(job, iterations=0)`` and ``--iterations 0`` fail alike.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal

import numpy as np

from .balance.splitter import SPLITS
from .codes import available_codes
from .delays import DELAY_MODELS


class UsageError(ValueError):
    """A user error: reported as one line on rank 0, exit status 2, no traceback. ``echoed``:
    raised on a worker because rank 0 refused the run (rank 0's own says why)."""

    def __init__(self, message: str, *, echoed: bool = False) -> None:
        super().__init__(message)
        self.echoed = echoed


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


def rank_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(r) for r in text.split(",") if r.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of ranks") from None


Form = Literal["value", "switch", "either", "repeat", "optional"]
INTEGERS = (int, positive_int, nonnegative_int)
KEYWORD = "the keyword's default"  # a flag's default when it declares none of its own


@dataclass(frozen=True)
class Flag:
    """How an option is given on the command line. ``form``: value (``--x V``), switch
    (``--x``, on), either (``--x`` / ``--no-x``), repeat (``--x V`` again and again) or optional
    (``--x`` alone means ``const``). ``cli_default``: the flag's default where it differs from
    the keyword's (the CLI's demo delays)."""

    help: str
    group: str
    parse: Callable[[str], Any] = str
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    form: Form = "value"
    const: Any = None
    cli_default: Any = KEYWORD

    def spelling(self, name: str) -> str:
        return "--" + name.replace("_", "-")


def option(default: Any, help: str, group: str, **flag: Any) -> Any:
    """A RunOptions field: its keyword default and its flag."""
    return field(default=default, metadata={"flag": Flag(help, group, **flag)})


RUN = "run"
CODE = "code (each flag applies to the codes that take it; see the codes reference)"
DELAYS = "injected delays"
SPLIT = "load split and job stream (paper 000)"
FAULTS = "faults and checkpoints"
RUNTIME = "runtime"
OUTPUT = "output"


@dataclass(frozen=True)
class RunOptions:
    """Every option of a run, as ``mpicoded.run`` takes them by keyword (``slow_workers=(2,)``
    is ``--slow-workers 2``). Frozen: planning settles what ``None`` and ``auto`` mean into a
    new one (``Plan.options``), never into this. Built checked by ``from_keywords`` (as
    ``mpicoded.run`` builds it); the plain constructor checks nothing."""

    iterations: int = option(50, "default 50", RUN, parse=positive_int)
    batch_size: int = option(
        0, "mini-batch SGD (a gradient job): each iteration's gradient is the exact mean over B "
        "rows, the next B of a seeded shuffle of the data each pass over it (the last short "
        "batch dropped); the same rows on every rank, whatever the code; 0: full batches; "
        "default 0", RUN, parse=nonnegative_int, metavar="B")
    batch_seed: int = option(
        0, "seeds the mini-batches' shuffle (mpicoded.ShardSampler's seed gives DDP the same "
        "batches); default 0", RUN, parse=int, metavar="S")
    code: str | None = option(
        None, "default: the scheme measured best for the job's kind (README, \"The default "
        "scheme\"), with its --stragglers and partial work", CODE,
        choices=tuple(available_codes()))
    stragglers: int | None = option(
        None, "frc, gfrc, spread, cyclic, mds: stragglers s tolerated; default 3, or the largest "
        "smaller value the code allows on this many workers", CODE, parse=int)
    load: int | None = option(
        None, "cpgc, ucmmc, mcc: computations r a worker; default 3, or the largest smaller "
        "value the code allows", CODE, parse=int)
    partitions: int | None = option(
        None, "gfrc: data partitions k (default n_workers); mds, sparse: K, any K of the "
        "round(K·Ω) tasks decode", CODE, parse=int)
    redundancy: float | None = option(
        None, "mds, sparse: Ω, tasks = round(K·Ω); default 1 (mds), 1.25 (sparse)", CODE,
        parse=float)
    degree: int | None = option(None, "sparse: non-zeros d a row of B; default 3", CODE, parse=int)
    target: str | None = option(
        None, "uncoded, sparse: decode the sum of the partitions' values or each of them; "
        "default sum for a gradient job, each for a matrix-vector job", CODE,
        choices=("sum", "each"))
    tolerance: float = option(
        0.0, "fraction of partitions an iteration may miss (partial recovery); the update leaves "
        "the missed ones out; default 0 (exact)", CODE, parse=float, metavar="FRACTION")
    delay: str = option(
        "none", "default seed001 (a demo of paper 001's delays; mpicoded.run defaults to none)",
        DELAYS, choices=tuple(DELAY_MODELS), cli_default="seed001")
    seed: int = option(0, "seeds delays, arrivals and the built-in jobs' data; default 0", DELAYS,
                       parse=int)
    mu: float = option(10.0, "seed001 rate μ; default 10", DELAYS, parse=float)
    alpha: float = option(0.01, "seed001 shift α; default 0.01", DELAYS, parse=float)
    task_time: float = option(0.01, "persistent: model time of one unit of work; default 0.01",
                              DELAYS, parse=float)
    slow_workers: tuple[int, ...] = option(
        (), "persistent, compute: comma-separated MPI ranks (1..P) that are slow", DELAYS,
        parse=rank_list)
    slow_factor: float = option(
        10.0, "persistent: how much longer their tasks sleep; compute: how many times over they "
        "really compute every task (burning CPU, no sleep); default 10", DELAYS, parse=float)
    slow_from: int = option(
        0, "persistent, compute: the slow workers are slow from iteration IT of each job on; "
        "default 0", DELAYS, parse=int, metavar="IT")
    slow_every: int = option(
        0, "persistent, compute: a moving slow worker instead of --slow-workers: every K "
        "iterations a different seeded random worker is slow (a noisy neighbour that comes and "
        "goes); default 0 (fixed)", DELAYS, parse=int, metavar="K")
    chunk_rows: int | None = option(
        None, "rows computed between checks for a purge (a purge interrupts real compute within "
        "one chunk); default: about 2 MB of dense data (a quarter to one millisecond of "
        "compute), from the data's shape; 0: whole tasks. Under --batch-size, N counts the "
        "data's rows a chunk spans, of which a step computes its batch's share", DELAYS,
        parse=int, metavar="N")
    partial: str = option(
        "auto", "partial work (a gradient job coded on its results, under a code that sums "
        "partitions: uncoded, frc, gfrc, spread, ucmmc, cpgc): workers compute row ranges of "
        "the partitions they hold, each holder its own share first, and send them as they are "
        "done, so a straggler's finished rows count and its replicas cover the rest; every row "
        "is counted once. A matrix-vector job: row ranges of the coded blocks, each range "
        "decoded on its own, idle workers standing in for a straggler's ranges with their own "
        "blocks (mds) or taking over its ranges of the blocks they share (spread: plain row "
        "blocks on s+1 workers). Default auto: on for spread, and frc or gfrc with --stragglers "
        "2 or more (measured faster than static there), where the job allows it; off for the "
        "others", DELAYS, choices=("auto", "on", "off"))
    no_purge: bool = option(
        False, "never purge: workers finish every task, however stale (how public peers behave; "
        "for comparison only)", DELAYS, form="switch")
    profile: str | None = option(
        None, "seed000 and --split optimal: worker speeds and communication delays, 'paper000' "
        "(20 workers: mu = 1, 2, 4, 8 and c = 2, 1, 0.5, 0.25, five each) or a .json/.toml file "
        "of (mu, c) per worker", DELAYS)
    work: float = option(100.0, "seed000: work Z of an iteration; task complexity C = Z / K; "
                         "default 100", DELAYS, parse=float, metavar="Z")
    time_scale: float = option(1.0, "seconds per model time unit; default 1", DELAYS,
                               parse=float)
    split: str = option(
        "uniform", "which worker runs which task: uniform (the code's own schedule), optimal "
        "(from the declared --profile), adaptive (estimated online, starting uniform); a split "
        "moves whole tasks: without --code it runs uncoded, 4 partitions a worker, and it "
        "refuses one task a worker; but adaptive without --code on a gradient job coded on its "
        "results is partial work over every worker's copy of the data (spread, s = workers - "
        "1), which follows a straggler that moves; default uniform", SPLIT,
        choices=tuple(SPLITS))
    gamma: float = option(1.0, "the split equalises mean + gamma * std of each worker's time; "
                          "default 1", SPLIT, parse=float)
    jobs: int = option(1, "jobs in the stream, each --iterations long, served in order; "
                       "default 1", SPLIT, parse=positive_int)
    arrival_rate: float = option(
        0.01, "Poisson job arrivals per model time unit (the first job at 0); default 0.01",
        SPLIT, parse=float, metavar="LAMBDA")
    kill_worker: tuple[str, ...] = option(
        (), "fault injection: the worker on RANK SIGKILLs itself when it starts iteration IT (of "
        "the first job; RANK@JOB:IT for another) or, having skipped it as superseded, a later "
        "one; repeatable; needs ULFM (launch/local.sh --ft, or mpirun --with-ft ulfm)", FAULTS,
        form="repeat", metavar="RANK@IT")
    iteration_timeout: float | None = option(
        None, "treat a worker that owes an iteration results and has sent none in SECONDS as "
        "failed (no ULFM needed): the straggler detector of last resort; default none", FAULTS,
        parse=float, metavar="SECONDS")
    checkpoint: str | None = option(None, "write theta and the resume point to DIR atomically",
                                    FAULTS, metavar="DIR")
    checkpoint_every: int = option(10, "checkpoint every N iterations; default 10", FAULTS,
                                   parse=positive_int, metavar="N")
    resume: bool = option(False, "continue from the checkpoint in --checkpoint DIR (same flags)",
                          FAULTS, form="switch")
    wait: str = option(
        "auto", "how an idle rank waits for messages: spin (a core each, fastest when ranks do "
        "not outnumber cores), yield (the core given away between polls, then sleeping once idle "
        "for 50 ms), or sleep with a backoff; auto: sleep if a rank of this node is held to a "
        "CPU quota, else spin if this node's ranks fit its cores, else yield; default auto",
        RUNTIME, choices=("auto", "spin", "yield", "sleep"))
    reduce: str = option(
        "auto", "where a gradient job's results are added up (a job coded on its results, a sum "
        "target): on, the workers keep their values and sum the decoded combination along a "
        "tree, rank 0 naming the coefficients and taking in two sums; off, every result goes "
        "to rank 0. Default auto: on where a result is 4 MB or more and a worker is on another "
        "node than rank 0", RUNTIME,
        choices=("auto", "on", "off"))
    relay: str = option(
        "auto", "how θ reaches the workers: on, rank 0 sends each ITERATE to two workers and "
        "each forwards it to two more before it computes (the workers that finished the last "
        "round first nearest rank 0; θ crosses into each other node once, to its first rank); "
        "off, rank 0 sends it to each. Default auto: on where θ is 4 MB or more and a worker is "
        "on another node than rank 0", RUNTIME,
        choices=("auto", "on", "off"))
    threads: int = option(
        1, "BLAS/OpenMP threads a rank (numpy's matrix products): default 1, right when ranks "
        "outnumber cores (21 ranks on 2 cores ran a plain gradient loop 35x slower with a pool "
        "of threads each); 0 leaves the pools as they are (import mpicoded sets "
        "OPENBLAS_NUM_THREADS, OMP_NUM_THREADS and MKL_NUM_THREADS to 1 where they are unset)",
        RUNTIME, parse=nonnegative_int, metavar="N")
    metrics: str | None = option(
        None, "write JSON lines here (one per iteration, one per task with the trace, then one "
        "run record)", OUTPUT)
    trace: bool | None = option(
        None, "write a record per task to the metrics file: worker, start and end on rank 0's "
        "clock, chunks, outcome (used, received, purged, dropped, stale); default on whenever "
        "--metrics is given", OUTPUT, form="either")
    events: str | None = option(
        None, "write every event rank 0's session handled here, one JSON line each with the "
        "instructions it gave (python -m mpicoded.replay checks a log against the code)",
        OUTPUT, metavar="PATH.jsonl")
    dashboard: int | None = option(
        None, "serve the live dashboard (python -m mpicoded.dashboard) of this run's metrics on "
        "127.0.0.1:PORT while it runs (default port 8787); without --metrics the records go to a "
        "temporary file", OUTPUT, parse=int, form="optional", const=8787, metavar="PORT")
    loss_every: int = option(
        1, "evaluate the training loss every K iterations and at the end (a pass over all the "
        "data on rank 0; a job whose workers return their loss reports every iteration's, "
        "under --batch-size over the next step's batch); 0: at the end only; default 1", OUTPUT,
        parse=int, metavar="K")
    eval_every: int | None = option(
        None, "evaluate the job on held-out data (its evaluate(theta): TorchJob's eval_data) "
        "every K iterations and at the end, on rank 0 once the next iteration is out; 0: at the "
        "end only; default: at the end, for a job that has an evaluation", OUTPUT,
        parse=nonnegative_int, metavar="K")
    output: str | None = option(
        None, "save the trained theta here (numpy .npy, written atomically): shape (dim,), or "
        "(jobs, dim) for a stream (the jobs this run served)", OUTPUT, metavar="PATH.npy")
    quiet: bool = option(False, "no progress lines or straggler notices", OUTPUT, form="switch")

    @classmethod
    def from_keywords(cls, **given: Any) -> RunOptions:
        """The defaults overridden by ``given``; UsageError for a name that is not an option or
        a value its flag would refuse."""
        unknown = sorted(set(given) - set(OPTIONS))
        if unknown:
            raise UsageError(f"{unknown[0]!r} is not an option of mpicoded.run; allowed: "
                             f"{', '.join(OPTIONS)}")
        return cls(**{name: _coerce(name, FLAGS[name], value) for name, value in given.items()})


OPTIONS = tuple(f.name for f in fields(RunOptions))
FLAGS: Mapping[str, Flag] = {f.name: f.metadata["flag"] for f in fields(RunOptions)}
DEFAULTS: Mapping[str, Any] = {f.name: f.default for f in fields(RunOptions)}


def cli_default(name: str) -> Any:
    """The flag's default: the keyword's, unless the flag declares its own."""
    flag = FLAGS[name]
    return DEFAULTS[name] if flag.cli_default is KEYWORD else flag.cli_default


def _coerce(name: str, flag: Flag, value: Any) -> Any:
    """A keyword's value as its flag would have parsed it; UsageError naming it if wrong."""
    if value is None and DEFAULTS[name] is None:
        return None
    if flag.form in ("switch", "either"):
        if not isinstance(value, bool):
            raise UsageError(f"{name}={value!r}: expected True or False")
        return value
    if flag.form == "repeat":
        if isinstance(value, str):
            return (value,)
        try:
            return tuple(str(v) for v in value)
        except TypeError:
            raise UsageError(f"{name}={value!r}: expected a string or a list of them") from None
    parse = flag.parse
    try:
        if parse is rank_list:
            value = rank_list(value) if isinstance(value, str) else tuple(int(v) for v in value)
        elif parse in INTEGERS:
            if isinstance(value, bool) or not isinstance(value, (int, np.integer, str)):
                raise TypeError
            value = parse(value) if isinstance(value, str) else parse(str(int(value)))
        elif parse is float:
            if isinstance(value, bool):
                raise TypeError
            value = float(value)
        else:
            value = os.fspath(value)
    except (TypeError, ValueError, argparse.ArgumentTypeError) as exc:
        detail = f": {exc}" if str(exc) else ""
        raise UsageError(f"{name}={value!r} is not a valid value{detail}") from None
    if flag.choices is not None and value not in flag.choices:
        raise UsageError(f"{name}={value!r} is not one of {sorted(flag.choices)}")
    return value


_FLAG = re.compile(r"--(no-)?([a-z][a-z0-9-]*)(?: (?!--)([^\s;,:)]+))?")


def as_keywords(message: str) -> str:
    """``message`` with the run options' flags spelt as ``mpicoded.run`` keywords, for a caller
    of the API: ``--code cpgc`` is ``code='cpgc'``, ``--no-purge`` is ``no_purge=True``."""

    def keyword(match: re.Match[str]) -> str:
        negated, name, word = match.group(1), match.group(2).replace("-", "_"), match.group(3)
        after = "" if word is None else " " + word
        if negated and FLAGS.get(name) is not None and FLAGS[name].form == "either":
            return f"{name}=False{after}"
        name = f"no_{name}" if negated else name
        flag = FLAGS.get(name)
        if flag is None:
            return match.group(0)
        if flag.form in ("switch", "either"):
            return f"{name}=True{after}"
        if word is not None and (flag.choices is not None or flag.parse is not str):
            try:
                return f"{name}={_coerce(name, flag, word.rstrip('.'))!r}" + word[
                    len(word.rstrip(".")):]
            except UsageError:
                pass
        return f"{name}{after}"

    return _FLAG.sub(keyword, message)


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The run's options as flags, a ``--help`` group each, in the table's order."""
    groups: dict[str, Any] = {}
    for name, flag in FLAGS.items():
        if flag.group not in groups:
            groups[flag.group] = parser.add_argument_group(flag.group)
        spec: dict[str, Any] = {"dest": name, "default": cli_default(name), "help": flag.help}
        if flag.form == "switch":
            spec["action"] = "store_true"
        elif flag.form == "either":
            spec["action"] = argparse.BooleanOptionalAction
        else:
            spec.update(metavar=flag.metavar, choices=flag.choices)
            if flag.parse is not str:
                spec["type"] = flag.parse
            if flag.form == "repeat":  # argparse appends to a copy of a list default
                spec.update(action="append", default=list(spec["default"]))
            elif flag.form == "optional":
                spec.update(nargs="?", const=flag.const)
        groups[flag.group].add_argument(flag.spelling(name), **spec)


def given_options(namespace: argparse.Namespace) -> dict[str, Any]:
    """The parsed flags that are options, as ``mpicoded.run`` keywords."""
    return {name: getattr(namespace, name) for name in OPTIONS}
