"""Dispatch rate: how many tasks a second the master sustains when tasks do no work (ucmmc,
r = 3, one message a task, 20 workers, no delay), against mpi4py.futures.MPIPoolExecutor running
the same number of no-op tasks on the same 21 ranks. Side by side in one run.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..launcher.process import run_mpi
from .common import TIMEOUT_S, table, train_run


def bench_dispatch(args: argparse.Namespace) -> dict[str, Any]:
    modes = args.wait.split(",")
    runs = {}
    for mode in modes:
        print(f"[bench] dispatch: mpicoded, wait {mode} ...", file=sys.stderr, flush=True)
        run = train_run(21, ["--code", "ucmmc", "--load", "3", "--samples", "40", "--features",
                             "1", "--delay", "none", "--loss-every", "0", "--iterations",
                             str(args.iterations), "--wait", mode])
        tasks = run["total_results_received"] + run["total_stale_results"]
        runs[f"mpicoded ({run['wait']})"] = {"tasks": tasks, "seconds": run["makespan_s"],
                                             "tasks_per_s": tasks / run["makespan_s"]}
    tasks = int(max(r["tasks"] for r in runs.values()))
    print("[bench] dispatch: MPIPoolExecutor ...", file=sys.stderr, flush=True)
    done = run_mpi(21, ["-m", "mpi4py.futures", "-m", "mpicoded.bench.futures_baseline",
                        "--tasks", str(tasks)], timeout=TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"MPIPoolExecutor baseline failed:\n{done.output[-3000:]}")
    anchor = json.loads(done.output.strip().splitlines()[-1])
    runs["MPIPoolExecutor"] = {k: anchor[k] for k in ("tasks", "seconds", "tasks_per_s")}
    rows = [[name, f"{r['tasks']:.0f}", f"{r['seconds']:.2f}", f"{r['tasks_per_s']:.0f}",
             f"{r['tasks_per_s'] / anchor['tasks_per_s']:.2f}x"] for name, r in runs.items()]
    print(f"dispatch: 20 workers, zero-work tasks (ucmmc r = 3, a message a task), "
          f"{args.iterations} iterations")
    print(table(["runner", "tasks", "seconds", "tasks/s", "vs executor"], rows))
    return {"runs": runs}
