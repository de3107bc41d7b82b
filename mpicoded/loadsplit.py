"""A run under a load split, planned (no MPI): the code it gets where none is given, its
Splitter, and the combinations that cannot do well, refused with the flags that would.

An adaptive split of a job that partial work can cut (a gradient job coded on its results, a
sum over rows) is partial work over every worker's copy of the data, as the split places it:
spread with s = n_workers - 1, one partition whose pieces start in equal shares, and a worker
done with its share takes over the far half of a slower one's, within the iteration. Moving
whole tasks between iterations cannot follow a straggler that moves: the iteration after a move
waits for the new straggler's whole share (docs/guides/heterogeneous-and-streams.md measures it).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .balance.split import Moments
from .balance.splitter import Splitter
from .codes import Code
from .jobs.kinds import GradientJob
from .options import RunOptions, UsageError

CODE_FLAGS = ("stragglers", "load", "partitions", "redundancy", "degree", "target")
SPLIT_TASKS = 4  # tasks a worker that a load split gets to move, where it picks the code


def cut_within(opts: RunOptions, user_job: object, n_workers: int) -> bool:
    """Whether the run's adaptive split is partial work over every worker's copy of the data:
    no code nor code flag given (or spread over every worker), partial work not refused nor
    whole tasks asked for (--chunk-rows 0), a job it can cut."""
    if opts.split != "adaptive" or opts.partial == "off" or opts.chunk_rows == 0 or n_workers < 2:
        return False
    if opts.code is None:
        if any(getattr(opts, flag) is not None for flag in CODE_FLAGS):
            return False
    elif opts.code != "spread" or opts.stragglers != n_workers - 1:
        return False
    return (isinstance(user_job, GradientJob) and bool(user_job.additive)
            and not user_job.linear)


def named_code(opts: RunOptions, default: str, n_workers: int, within: bool) -> RunOptions:
    """``opts`` with its code named: the user's; under an adaptive split cut ``within`` the
    iteration, spread over every worker with partial work on; under another load split (which
    moves tasks from worker to worker, whole, by their speed) uncoded with SPLIT_TASKS
    partitions a worker unless --partitions is given; else the job kind's measured default."""
    if within:
        return replace(opts, code="spread", stragglers=n_workers - 1, partial="on")
    if opts.code:
        return opts
    if opts.split != "uniform":
        return replace(opts, code="uncoded", partitions=opts.partitions
                       or SPLIT_TASKS * n_workers)
    return replace(opts, code=default)


def make_splitter(opts: RunOptions, code: Code,
                  profile: tuple[tuple[float, float], ...] | None,
                  complexity: float, within: bool) -> Splitter | None:
    """The load split, or None to run the code's own schedule (``within``: partial work's)."""
    if not opts.gamma >= 0:
        raise UsageError(f"--gamma {opts.gamma} is out of range: allowed >= 0")
    if within and opts.gamma != 1.0:
        raise UsageError(f"--gamma {opts.gamma} weighs a split of whole tasks, and --split "
                         "adaptive without --code moves pieces within the iteration instead; "
                         f"give --code uncoded --partitions {SPLIT_TASKS * code.n_workers} to "
                         "split whole tasks")
    if opts.split == "uniform" or within:
        return None
    declared = None
    if profile:
        m = complexity / np.array([mu for mu, _ in profile])
        declared = Moments(m, m**2, np.array([c for _, c in profile]))
    if opts.split == "optimal" and declared is None:
        raise UsageError("--split optimal needs declared speeds: give --profile")
    return Splitter(opts.split, code.n_tasks, code.n_workers, declared, opts.gamma)


def check_split(opts: RunOptions, code: Code, warning: str | None) -> None:
    """UsageError, with the flags that would work, for a load split that cannot do well: one
    task a worker (a move doubles a worker's load, so none is made), or tasks that each
    compute several partitions (``warning``, the cost warning: partial work, which would cut
    them, runs no split of whole tasks)."""
    fix = (f"leave --code out (under a split: uncoded, {SPLIT_TASKS} partitions a worker) or "
           f"give --code uncoded --partitions {SPLIT_TASKS * code.n_workers}")
    if code.n_tasks <= code.n_workers:
        raise UsageError(f"--split {opts.split} moves whole tasks between workers, and --code "
                         f"{code.name} has {code.n_tasks} for {code.n_workers} workers: with "
                         f"one a worker there is nothing to move; {fix}")
    if warning:
        raise UsageError(f"--split {opts.split}: {warning.split(':')[0]}, and a split runs "
                         f"without partial work, which would cut them; {fix}")
