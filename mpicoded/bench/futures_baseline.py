"""The dispatch anchor: mpi4py.futures.MPIPoolExecutor running no-op tasks on the same ranks.

``mpirun -n 21 python -m mpi4py.futures -m mpicoded.bench.futures_baseline --tasks 12000``:
rank 0 maps a no-op over the other ranks (after a warm-up) and prints one JSON line with the
tasks per second it sustained. What a user would reach for to farm out tasks with mpi4py.
"""

from __future__ import annotations

import argparse
import json
import time

from mpi4py.futures import MPIPoolExecutor


def noop(task: int) -> int:
    """No work: what is measured is the dispatch."""
    return task


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m mpi4py.futures -m mpicoded.bench.futures_baseline")
    p.add_argument("--tasks", type=int, default=12000)
    p.add_argument("--warmup", type=int, default=200)
    args = p.parse_args()
    with MPIPoolExecutor() as executor:
        list(executor.map(noop, range(args.warmup)))  # every worker up and connected
        start = time.perf_counter()
        done = list(executor.map(noop, range(args.tasks)))
        elapsed = time.perf_counter() - start
    assert done == list(range(args.tasks))
    print(json.dumps({"baseline": "MPIPoolExecutor", "tasks": args.tasks, "seconds": elapsed,
                      "tasks_per_s": args.tasks / elapsed}))


if __name__ == "__main__":
    main()
