"""A minimal plain-mpi4py gradient loop: the yardstick for mpicoded's runtime overhead.

Broadcast θ, every worker computes its partition's logistic gradient, gather on rank 0, step.
No coding, no purging, no delays: what a public research script does. Prints one JSON line.
``mpirun -n 21 python -m mpicoded.bench.baseline --samples 20000 --features 50 --iterations 200``
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from mpi4py import MPI
from scipy.special import expit

from ..jobs import synthetic
from ..jobs.logreg import REG, default_lr


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m mpicoded.bench.baseline")
    p.add_argument("--samples", type=int, default=20000)
    p.add_argument("--features", type=int, default=50)
    p.add_argument("--iterations", type=int, default=200)
    p.add_argument("--warmup", type=int, default=0,
                   help="iterations run before the timing starts")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    comm = MPI.COMM_WORLD
    rank, workers = comm.Get_rank(), comm.Get_size() - 1
    data = synthetic("logreg", args.samples, args.features, args.seed)
    theta = np.zeros(args.features)
    lr = 0.0
    if rank == 0:
        lr = default_lr(data.X)
        gathered = np.empty((workers + 1, args.features))
    else:
        rows = np.array_split(np.arange(args.samples), workers)[rank - 1]
        X, y = data.X[rows], data.y[rows]
        gathered = None
    mine = np.zeros(args.features)
    comm.Barrier()
    start = time.perf_counter()
    for it in range(args.warmup + args.iterations):
        if it == args.warmup:
            start = time.perf_counter()
        comm.Bcast(theta, root=0)
        if rank:
            mine = X.T @ (expit(X @ theta) - y)  # the whole partition at once, by hand
        comm.Gather(mine, gathered, root=0)
        if rank == 0:
            assert gathered is not None  # rank 0 gathers into it
            theta -= lr * (gathered[1:].sum(axis=0) / args.samples + REG * theta)
    elapsed = time.perf_counter() - start
    if rank == 0:
        print(json.dumps({"baseline": "plain-mpi4py", "iterations": args.iterations,
                          "mean_iteration_s": elapsed / args.iterations,
                          "theta": theta.tolist()}))


if __name__ == "__main__":
    main()
