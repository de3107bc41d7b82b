"""Options that would do nothing beside the others, refused with why (pure): a flag a user
types either changes the run or is an error, never silently ignored."""

from __future__ import annotations

from collections.abc import Callable

from .options import DEFAULTS, RunOptions, UsageError

SLOWING = ("persistent", "compute")  # the delay models with slow workers

# option -> (when it counts, what it needs, said as the fix)
COUNTS: dict[str, tuple[Callable[[RunOptions], bool], str]] = {
    "mu": (lambda o: o.delay == "seed001", "--delay seed001"),
    "alpha": (lambda o: o.delay == "seed001", "--delay seed001"),
    "task_time": (lambda o: o.delay == "persistent", "--delay persistent"),
    "slow_workers": (lambda o: o.delay in SLOWING and not o.slow_every,
                     "--delay persistent or compute, without --slow-every (which moves the "
                     "slow worker itself)"),
    "slow_every": (lambda o: o.delay in SLOWING, "--delay persistent or compute"),
    "slow_factor": (lambda o: o.delay in SLOWING and bool(o.slow_workers or o.slow_every),
                    "--delay persistent or compute, with --slow-workers or --slow-every"),
    "slow_from": (lambda o: o.delay in SLOWING and bool(o.slow_workers or o.slow_every),
                  "--delay persistent or compute, with --slow-workers or --slow-every"),
    "profile": (lambda o: o.delay == "seed000" or o.split == "optimal",
                "--delay seed000 or --split optimal"),
    "work": (lambda o: o.delay == "seed000" or o.split == "optimal",
             "--delay seed000 or --split optimal"),
    "time_scale": (lambda o: o.delay not in ("none", "compute") or o.jobs > 1,
                   "a --delay that sleeps (seed001, seed000 or persistent), or --jobs above 1"),
    "gamma": (lambda o: o.split != "uniform", "--split optimal or adaptive"),
    "arrival_rate": (lambda o: o.jobs > 1, "--jobs above 1"),
    "checkpoint_every": (lambda o: bool(o.checkpoint), "--checkpoint DIR"),
}


def check_unused(opts: RunOptions) -> None:
    """UsageError for the first option given a value of its own that this run would not use,
    naming what it needs."""
    for name, (counts, needs) in COUNTS.items():
        if getattr(opts, name) != DEFAULTS[name] and not counts(opts):
            flag = "--" + name.replace("_", "-")
            raise UsageError(f"{flag} does nothing here: it needs {needs}")
