"""``python -m mpicoded.bench SCENARIO``: side-by-side comparisons measured in one run.

- ``purge``: one persistent 10x straggler among 6 workers, 50 iterations; uncoded vs frc vs cyclic
  under the same seed, plus frc without purging (how public peers run). Mean iteration time,
  makespan, purged tasks, and each speedup over uncoded.
- ``overhead``: no injected delay, 20 workers (``--ranks``): mpicoded's uncoded iteration time
  vs a minimal plain-mpi4py gradient loop on the same data, as a ratio taken within alternated
  rounds (``--repeats``, ``--sizes``).
- ``decode``: per-iteration decode time against n_workers, for the structured decoders (gfrc,
  cpgc up to 1000 workers) and the generic one (cyclic, sparse up to 200). No MPI.
- ``paper001``: paper 001's Fig. 1 on the simulator and on 21 MPI ranks side by side, with PNG
  plots when matplotlib is installed; exits 1 when an MPI mean is more than 15% off the
  simulator's over the same iterations (as ``paper000`` does for its in-order delays).
- ``sim-scale``: the simulator on 10,000 gfrc workers for 100 iterations; events per second.
- ``cdc``: paper 002's coded MapReduce shuffle against the uncoded one, over MPI, for several
  K and storage profiles.
- ``paper000``: paper 000's stream of jobs on uneven workers: in-order delay for the uniform,
  optimal and adaptive splits and the genie bound; simulator grid and MPI for K = 100.
- ``real-stragglers``: nothing injected, ranks under CPU quotas (cgroups, root): 7 ranks with
  one at 5% of a core (uncoded, frc, gfrc, cpgc, whole-task frc, frc without purging), 21
  ranks with four throttled (sparse tasks of two partitions, uniform vs adaptive split), and 7
  ranks with uncoded K = 12 partitions, no spare task (uniform vs adaptive).
- ``dispatch``: tasks a second the master sustains with zero-work tasks (ucmmc r = 3, 20
  workers) against mpi4py.futures.MPIPoolExecutor running as many no-op tasks on the same ranks.
- ``straggler-tax``: real slow ranks (cgroups, root), 7 ranks, logreg: every scheme's time
  under no, one fixed, one moving and two fixed stragglers over uncoded's with none, capped
  (every worker at ``--cap`` of a core, as machines of one size) and uncapped; rows computed,
  messages, rank 0's CPU a result; PNGs of the taxes and of loss against wall time.
- ``ddp``: a PyTorch MLP (or ``--model cnn``: the digits example's CNN) trained by PyTorch DDP
  (gloo) and by mpicoded on as many workers, full-batch or in mini-batches (``--batch-size``),
  all capped at ``--cap`` of a core, with no straggler and with one at ``--small-fraction`` of
  that: time a step, makespan, time to a target loss (mini-batches: held-out accuracy),
  straggler tax. Needs the torch extra and root.
- ``pagerank``: PageRank of a power-law graph of >= 1M edges on 21 ranks with seed001 delays:
  uncoded vs mds vs sparse (target each); time per iteration, end to end, non-zeros a task, and
  messages.
- ``faults``: 21 ranks under ULFM, a worker SIGKILLed from outside at each phase (start-up,
  placement, first iteration, mid-run, a re-code, a failover, the shutdown), timed from the
  run's own events, for gfrc, mds on PageRank and the adaptive split: exit status, theta against
  the fault-free run, time lost; exits 1 unless every cell exits 0 with theta equal (1e-9).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .cdc import bench_cdc
from .common import float_list
from .ddp import bench_ddp
from .decode import bench_decode
from .dispatch import bench_dispatch
from .faults import bench_faults
from .pagerank import bench_pagerank
from .paper000 import bench_paper000
from .paper001 import bench_paper001
from .real import bench_real_stragglers
from .runtime import OVERHEAD_SIZES, bench_overhead, bench_purge, parse_sizes
from .simscale import bench_sim_scale
from .tax import PAGERANK_NODES, ROWS_A_WORKER, bench_straggler_tax

SCENARIOS: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {
    "purge": bench_purge,
    "overhead": bench_overhead,
    "decode": bench_decode,
    "paper001": bench_paper001,
    "sim-scale": bench_sim_scale,
    "paper000": bench_paper000,
    "cdc": bench_cdc,
    "real-stragglers": bench_real_stragglers,
    "pagerank": bench_pagerank,
    "dispatch": bench_dispatch,
    "straggler-tax": bench_straggler_tax,
    "ddp": bench_ddp,
    "faults": bench_faults,
}
DEFAULT_SAMPLES = {"real-stragglers": 600000}  # straggler-tax: by ranks; ddp: by its model
DEFAULT_ITERATIONS = {"purge": 50, "overhead": 200, "decode": 20, "paper001": 100,
                      "sim-scale": 100, "real-stragglers": 30, "pagerank": 30,
                      "dispatch": 200, "straggler-tax": 30, "ddp": 40, "faults": 30}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mpicoded.bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scenario", choices=list(SCENARIOS))
    p.add_argument("--iterations", type=int, default=None,
                   help="iterations a run: " + ", ".join(f"{k} {v}"
                                                        for k, v in DEFAULT_ITERATIONS.items())
                   + " (paper000 runs I = 10 a job, as the paper)")
    p.add_argument("--tolerances", type=float_list, default=None,
                   help="paper001: tolerance rates, comma-separated; default 0,0.05,0.1,0.15,0.2")
    p.add_argument("--redundancies", type=float_list, default=None,
                   help="paper000: redundancies Ω run on MPI, comma-separated; default "
                   "1,1.1,1.25,1.5")
    p.add_argument("--sim-iterations", type=int, default=2000,
                   help="paper001: simulated iterations a point; default 2000")
    p.add_argument("--jobs", type=int, default=20, help="paper000: jobs an MPI run; default 20")
    p.add_argument("--sim-jobs", type=int, default=100,
                   help="paper000: jobs a simulated stream; default 100")
    p.add_argument("--mpi-partitions", type=int, default=100,
                   help="paper000: the K run on MPI (0: none); default 100")
    p.add_argument("--time-scale", type=float, default=0.1,
                   help="paper000: seconds per model time unit on MPI (smaller runs faster, "
                   "but the runtime's own overhead then weighs more); default 0.1")
    p.add_argument("--task-time", type=float, default=0.02,
                   help="purge: seconds per unit of work; default 0.02")
    p.add_argument("--samples", type=int, default=None,
                   help="real-stragglers: logreg rows on 7 ranks (a quarter on 21), default "
                   "600000; straggler-tax: logreg rows (x 100 features), default "
                   f"{ROWS_A_WORKER} a worker (240000 on 7 ranks, 800000 on 21); "
                   "ddp: the MLP's rows, default 60000")
    p.add_argument("--features", type=int, default=None,
                   help="ddp: the MLP's input features; default 100")
    p.add_argument("--hidden", type=int, default=None, help="ddp: the MLP's hidden units; "
                   "default 64")
    p.add_argument("--model", choices=("mlp", "cnn"), default="mlp",
                   help="ddp: mlp (seeded synthetic rows, SGD with momentum) or cnn (the digits "
                   "example's CNN on scikit-learn's digits, Adam; the examples extra); "
                   "default mlp")
    p.add_argument("--params-sweep", nargs="?", const="4,5,6,7", default=None,
                   metavar="EXPONENTS",
                   help="ddp: the MLP at about 10^E parameters for each E given "
                   "(comma-separated; alone: 4,5,6,7), full-batch, 1200 rows: each system's "
                   "step and time to the target, rank 0's bytes, a plot")
    p.add_argument("--batch-size", type=int, default=None,
                   help="ddp: rows a step, both sides drawing mpicoded's seeded batches; the "
                   "target is then a held-out accuracy; default: full-batch steps")
    p.add_argument("--ranks", type=int, default=None,
                   help="straggler-tax, ddp, overhead: MPI ranks (a master and ranks - 1 workers; "
                   "DDP runs ranks - 1 processes); default 7, 21 for overhead")
    p.add_argument("--job", choices=("logreg", "linreg", "pagerank"), default="logreg",
                   help="straggler-tax: the job, logreg or linreg (--samples x 100) or pagerank "
                   "(--nodes); default logreg")
    p.add_argument("--schemes", default=None,
                   help="straggler-tax: scheme names, comma-separated; default all; ddp: "
                   "mpicoded's schemes, default uncoded, frc s=1, gfrc s=2 partial; faults: "
                   "gfrc, mds (pagerank), adaptive split")
    p.add_argument("--patterns", default=None,
                   help="straggler-tax: none, fixed, moving, two fixed, stalls, trace=FILE "
                   "(slowdowns over time: --throttle trace=FILE; comma-separated); "
                   "ddp: none, slow, stalls (default none,slow); faults: the phases a worker "
                   "is killed at (start-up, placement, first iteration, mid-run, re-code, "
                   "failover, shutdown); default all")
    p.add_argument("--settings", default=None,
                   help="straggler-tax: capped, uncapped (comma-separated); default both")
    p.add_argument("--cap", type=float, default=0.3,
                   help="straggler-tax, ddp: every worker's share of a core in the capped setting "
                   "(the straggler gets --small-fraction of it); default 0.3")
    p.add_argument("--small-fraction", type=float, default=0.05,
                   help="real-stragglers: CPU quota of the slow rank among 7; straggler-tax: the "
                   "straggler's share of what the others get; default 0.05")
    p.add_argument("--large-fraction", type=float, default=0.25,
                   help="real-stragglers: CPU quota of the 4 slow ranks among 21; default 0.25")
    p.add_argument("--nodes", type=int, default=None,
                   help="pagerank, straggler-tax --job pagerank: nodes of the synthetic graph "
                   f"(about 9 edges each); default 120000 (about 1.08 million edges), "
                   f"{PAGERANK_NODES} for straggler-tax")
    p.add_argument("--wait", default="auto",
                   help="dispatch, overhead: mpicoded's --wait modes to measure, comma-separated "
                   "(e.g. sleep,yield,spin); default auto")
    p.add_argument("--sizes", type=parse_sizes, default=parse_sizes(OVERHEAD_SIZES),
                   help=f"overhead: data shapes, samples x features; default {OVERHEAD_SIZES}")
    p.add_argument("--repeats", type=int, default=None,
                   help="overhead: alternated rounds of the plain loop and mpicoded, default 3; "
                   "straggler-tax: rounds of every scheme under every pattern, each cell the "
                   "median of its rounds, default 1")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="results", help="directory for JSON and PNG output")
    p.add_argument("--json", default=None, help="also write the summary numbers here")
    args = p.parse_args(argv)
    if args.repeats is None:
        args.repeats = 3 if args.scenario == "overhead" else 1
    if args.repeats < 1:
        p.error(f"--repeats {args.repeats} is out of range: allowed >= 1")
    if args.iterations is None:
        args.iterations = DEFAULT_ITERATIONS.get(args.scenario, 0)
    if args.ranks is None:
        args.ranks = 21 if args.scenario == "overhead" else 7
    if args.nodes is None:
        args.nodes = PAGERANK_NODES if args.scenario == "straggler-tax" else 120000
    if args.samples is None and args.scenario != "ddp":  # ddp's: by its model
        args.samples = (ROWS_A_WORKER * (args.ranks - 1) if args.scenario == "straggler-tax"
                        else DEFAULT_SAMPLES.get(args.scenario, 0))
    out = SCENARIOS[args.scenario](args)
    if args.json:
        Path(args.json).write_text(json.dumps({"scenario": args.scenario, **out}, indent=2) + "\n")
    if out.get("failed"):  # the MPI run and the simulator disagree: a paper's figure broke
        print(f"python -m mpicoded.bench {args.scenario}: MPI and the simulator disagree past "
              f"15% at {len(out['failed'])} point(s)", file=sys.stderr)
        return 1
    return 0
