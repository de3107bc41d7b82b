"""Runtime benchmarks: purging against stragglers, and overhead against a plain mpi4py loop."""

from __future__ import annotations

import argparse
import json
import sys

from ..launcher import run_mpi
from .common import TIMEOUT_S, table, train_run


def bench_purge(args: argparse.Namespace) -> dict:
    common = ["--job", "logreg", "--delay", "persistent", "--task-time", str(args.task_time),
              "--slow-workers", "3", "--slow-factor", "10", "--iterations", str(args.iterations),
              "--seed", str(args.seed), "--samples", "6000", "--features", "20"]
    schemes = {
        "uncoded": ["--code", "uncoded"],
        "frc": ["--code", "frc", "--stragglers", "1"],
        "cyclic": ["--code", "cyclic", "--stragglers", "1"],
        "frc, no purge": ["--code", "frc", "--stragglers", "1", "--no-purge"],
    }
    runs = {}
    for name, flags in schemes.items():
        print(f"[bench] purge: {name} ...", file=sys.stderr, flush=True)
        runs[name] = train_run(7, common + flags)
    base = runs["uncoded"]
    rows, out = [], {}
    for name, run in runs.items():
        it_speedup = base["mean_iteration_s"] / run["mean_iteration_s"]
        ms_speedup = base["makespan_s"] / run["makespan_s"]
        out[name] = {"mean_iteration_s": run["mean_iteration_s"], "makespan_s": run["makespan_s"],
                     "purged_tasks": run["total_purged_tasks"],
                     "worker_dropped_tasks": run["worker_dropped_tasks"],
                     "iteration_speedup": it_speedup, "makespan_speedup": ms_speedup,
                     "makespan_over_iteration_speedup": ms_speedup / it_speedup,
                     "final_loss": run["final_loss"]}
        rows.append([name, f"{run['mean_iteration_s'] * 1e3:.1f}", f"{run['makespan_s']:.2f}",
                     f"{run['total_purged_tasks']:.0f}", f"{it_speedup:.2f}x",
                     f"{ms_speedup:.2f}x", f"{ms_speedup / it_speedup:.2f}"])
    print(f"purge: 6 workers, rank 3 persistently 10x slower, {args.iterations} iterations, "
          f"task time {args.task_time} s a unit, seed {args.seed}")
    print(table(["scheme", "mean it (ms)", "makespan (s)", "purged", "it speedup",
                 "makespan speedup", "makespan/it speedup"], rows))
    return out


OVERHEAD_SIZES = ((20000, 50), (200000, 100))  # communication-bound, then compute-bound


def bench_overhead(args: argparse.Namespace) -> dict:
    rows, out = [], {}
    for samples, features in OVERHEAD_SIZES:
        size = ["--samples", str(samples), "--features", str(features), "--seed", str(args.seed)]
        print(f"[bench] overhead {samples}x{features}: plain mpi4py loop ...", file=sys.stderr,
              flush=True)
        done = run_mpi(21, ["-m", "mpicoded.runtime.baseline", *size,
                            "--iterations", str(args.iterations)], timeout=TIMEOUT_S)
        if done.returncode != 0:
            raise RuntimeError(f"baseline failed:\n{done.output[-3000:]}")
        plain = json.loads(done.output.strip().splitlines()[-1])["mean_iteration_s"]
        print(f"[bench] overhead {samples}x{features}: mpicoded uncoded ...", file=sys.stderr,
              flush=True)
        run = train_run(21, ["--code", "uncoded", "--delay", "none", "--loss-every", "0",
                             "--iterations", str(args.iterations), *size])
        per_iteration = run["makespan_s"] / run["iterations"]
        out[f"{samples}x{features}"] = {
            "plain_mpi4py_s": plain, "mpicoded_mean_iteration_s": run["mean_iteration_s"],
            "mpicoded_makespan_per_iteration_s": per_iteration, "ratio": per_iteration / plain}
        rows.append([f"{samples} x {features}", f"{plain * 1e3:.2f}",
                     f"{run['mean_iteration_s'] * 1e3:.2f}", f"{per_iteration * 1e3:.2f}",
                     f"{per_iteration / plain:.2f}x"])
    print(f"overhead: 20 workers, no injected delay, {args.iterations} iterations, logreg; "
          "loss only at the end")
    print(table(["data", "plain mpi4py ms/it", "mpicoded ITERATE->decode ms",
                 "mpicoded makespan/it ms", "ratio"], rows))
    return out
