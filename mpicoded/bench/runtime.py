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
WARMUP = 10  # iterations left out on both sides


def steady_iteration_s(records: list[dict]) -> float:
    """Seconds an iteration takes once warm: from the start of iteration WARMUP to the start of
    the last, per iteration (the master's own work between iterations included)."""
    timed = records[WARMUP:]
    return (timed[-1]["started_s"] - timed[0]["started_s"]) / (len(timed) - 1)


def bench_overhead(args: argparse.Namespace) -> dict:
    """mpicoded with its default flags (the loss decoded with the gradient, metrics written)
    against a plain mpi4py loop, per iteration once warm, for each --wait mode asked for."""
    rows, out = [], {}
    for samples, features in OVERHEAD_SIZES:
        size = ["--samples", str(samples), "--features", str(features), "--seed", str(args.seed)]
        print(f"[bench] overhead {samples}x{features}: plain mpi4py loop ...", file=sys.stderr,
              flush=True)
        done = run_mpi(21, ["-m", "mpicoded.runtime.baseline", *size, "--warmup", str(WARMUP),
                            "--iterations", str(args.iterations)], timeout=TIMEOUT_S)
        if done.returncode != 0:
            raise RuntimeError(f"baseline failed:\n{done.output[-3000:]}")
        plain = json.loads(done.output.strip().splitlines()[-1])["mean_iteration_s"]
        key = f"{samples}x{features}"
        out[key] = {"plain_mpi4py_s": plain}
        for mode in args.wait.split(","):
            print(f"[bench] overhead {samples}x{features}: mpicoded uncoded, wait {mode} ...",
                  file=sys.stderr, flush=True)
            flags = ["--code", "uncoded", "--delay", "none", "--wait", mode, "--iterations",
                     str(WARMUP + args.iterations), *size]
            run = train_run(21, flags, records=True)
            steady = steady_iteration_s(run["iteration_records"])
            print(f"[bench] overhead {samples}x{features}: the same, --no-trace ...",
                  file=sys.stderr, flush=True)
            untraced = steady_iteration_s(train_run(21, [*flags, "--no-trace"],
                                                    records=True)["iteration_records"])
            out[key][run["wait"]] = {"mpicoded_s": steady, "ratio": steady / plain,
                                     "no_trace_s": untraced, "trace_cost": steady / untraced}
            rows.append([f"{samples} x {features}", run["wait"], f"{plain * 1e3:.2f}",
                         f"{steady * 1e3:.2f}", f"{steady / plain:.2f}x",
                         f"{untraced * 1e3:.2f}", f"{steady / untraced:.2f}x"])
    print(f"overhead: 20 workers, no injected delay, {args.iterations} iterations after "
          f"{WARMUP} of warm-up on both sides; logreg, uncoded, default flags (loss decoded "
          "with the gradient, metrics and the task trace written); then with --no-trace")
    print(table(["data", "wait", "plain mpi4py ms/it", "mpicoded ms/it", "ratio",
                 "no trace ms/it", "trace on/off"], rows))
    return out
