"""The model of the cluster (``model.py``) played over many seeded interleavings, each checked:
``python -m mpicoded.sim.checks --runs 5000`` (the unit tests play 60).

A seed picks 8, 12 or 21 workers, a code (gfrc, frc, spread with partial work, or whole tasks;
cyclic whole tasks), stragglers (none, one or two fixed, a moving one, 20 or 200 times slow, or
short random stalls), the latency, a 30- or 8-iteration run, the master's hold-back of a large
theta, up to two deaths or a frozen worker at random moments (timed out, or frozen to the end),
whether the workers add up the decoded sum (``--reduce``) or send every value to rank 0, and
whether they relay θ to each other (``--relay``), and whether the ranks share three nodes.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from ..codes import make_code
from .model import Model
from .model_workers import Speeds


def fixed(slow: tuple[int, ...], factor: float = 20.0) -> Speeds:
    return lambda rank, now: 1.0 / factor if rank in slow else 1.0


def moving(n: int, period: float, factor: float = 20.0) -> Speeds:
    return lambda rank, now: 1.0 / factor if rank == 1 + int(now // period) * 7 % n else 1.0


def stalls(seed: int, p: float = 0.05, factor: float = 30.0) -> Speeds:
    """Each rank, each unit of time, slow ``factor`` times with probability ``p``."""
    def speed(rank: int, now: float) -> float:
        u = np.random.default_rng((seed, rank, int(now))).random()
        return 1.0 / factor if u < p else 1.0 + u * 0.5
    return speed


CODES = {"gfrc s=2": ("gfrc", {"stragglers": 2}), "gfrc s=3": ("gfrc", {"stragglers": 3}),
         "frc": ("frc", {}),
         "spread s=2": ("spread", {"stragglers": 2}), "cyclic s=1": ("cyclic", {"stragglers": 1})}


def scenario(seed: int) -> Model:
    """Seed ``seed``'s interleaving: 8, 12 or 21 workers, a code, pieces (one at a time or in
    runs) or whole tasks, a straggler pattern (20 or 200 times slow), the latency, and up to
    two deaths or a freeze at random moments."""
    rng = np.random.default_rng(seed)
    name = sorted(CODES)[seed % len(CODES)]
    family, params = CODES[name]
    n = int(rng.choice([8, 12, 21]))
    if family == "frc":  # s + 1 must divide n
        params = {"stragglers": 2 if n % 3 == 0 else 1}
    code = make_code(family, n, **params)
    factor = float(rng.choice([20.0, 200.0]))
    pattern = rng.integers(4)
    speeds = [fixed(()), fixed((2,), factor), fixed((2, 5), factor),
              moving(n, 6.0, factor)][pattern]
    if rng.random() < 0.25:
        speeds = stalls(seed)
    faults = rng.integers(4)  # none, one death, two deaths, a freeze
    at = tuple(float(t) for t in rng.uniform(0, 40, 2))
    ranks = tuple(int(r) for r in rng.choice(np.arange(1, n + 1), 2, replace=False))
    deaths = tuple(zip(at[:faults], ranks[:faults], strict=False)) if faults in (1, 2) else ()
    freezes = ((at[0], ranks[0]),) if faults == 3 else ()
    pieces = family != "cyclic" and rng.random() < 0.8
    iterations, latency = int(rng.choice([8, 30])), float(rng.choice([0.05, 0.3, 1.0]))
    flush, hold_back = float(rng.choice([0.0, 2.0])), bool(rng.random() < 0.5)
    run_rows = int(rng.choice([0, 6, 12]))
    # a frozen rank is timed out, or (no timeout, as the linger tests run) frozen to the end
    timeout = 5000.0 if freezes and rng.random() < 0.5 else None
    reduce = bool(rng.random() < 0.5)  # the workers add up the sum
    relay = bool(rng.random() < 0.5)  # and forward θ to each other
    # ranks dealt round three nodes: the trees go through each node's first rank
    nodes = tuple(r % 3 for r in range(n + 1)) if rng.random() < 0.5 else ()
    return Model(code, seed, speeds, pieces=pieces, iterations=iterations, latency=latency,
                 deaths=deaths, freezes=freezes, timeout=timeout, flush=flush,
                 hold_back=hold_back, run_rows=run_rows, reduce=reduce, relay=relay,
                 nodes=nodes)


def check(seed: int) -> Model:
    """Play seed ``seed`` to the end and check what the run must hold; the model, played."""
    model = scenario(seed)
    outcome = model.run()
    assert len(outcome.records) == model.iterations, outcome.records
    assert [r.iteration for r in outcome.records] == list(range(model.iterations))
    np.testing.assert_allclose(outcome.theta, model.work.serial(model.iterations), rtol=1e-9,
                               err_msg=f"seed {seed}: theta is not serial descent's")
    # every rank that could answer STOP did; the shutdown's grace (a timeout on) gives up on
    # the frozen, and on a straggler still in the middle of a piece
    unanswered = {r for r, w in model.workers.items() if not (w.dead or w.acked)}
    given_up = {r for r in unanswered if model.workers[r].frozen or model.workers[r].busy}
    assert unanswered == given_up == set(outcome.unstopped), \
        f"seed {seed}: ranks {sorted(unanswered)} never acknowledged STOP"
    return model


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mpicoded.sim.checks", description=__doc__)
    p.add_argument("--runs", type=int, default=1000, help="seeds to play (default 1000)")
    p.add_argument("--first", type=int, default=0, help="the first seed (default 0)")
    args = p.parse_args(argv)
    began, failed = time.perf_counter(), []
    for seed in range(args.first, args.first + args.runs):
        try:
            check(seed)
        except AssertionError as exc:
            failed.append(seed)
            print(f"seed {seed}: {exc}", file=sys.stderr)
    print(f"{args.runs} interleavings (seeds {args.first}-{args.first + args.runs - 1}) in "
          f"{time.perf_counter() - began:.0f} s: {len(failed)} failed {failed[:20]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
