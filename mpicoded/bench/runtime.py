"""Runtime benchmarks: purging against stragglers, and overhead against a plain mpi4py loop."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any

from ..launcher.process import run_mpi
from .common import TIMEOUT_S, table, train_run


def bench_purge(args: argparse.Namespace) -> dict[str, Any]:
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


OVERHEAD_SIZES = "20000x50,200000x100"  # communication-bound, then compute-bound
WARMUP = 10  # iterations left out on both sides


def parse_sizes(text: str) -> list[tuple[int, int]]:
    """``"20000x50,200000x100"`` as (samples, features) pairs (the overhead bench's --sizes)."""
    sizes = []
    for item in text.split(","):
        parts = item.split("x")
        try:
            samples, features = (int(v) for v in parts) if len(parts) == 2 else (0, 0)
        except ValueError:
            samples = features = 0
        if min(samples, features) < 1:
            raise argparse.ArgumentTypeError(f"{text!r} is not a list like 20000x50,200000x100")
        sizes.append((samples, features))
    return sizes


def steady_iteration_s(records: list[dict[str, Any]]) -> float:
    """Seconds an iteration takes once warm: from the start of iteration WARMUP to the start of
    the last, per iteration (the master's own work between iterations included)."""
    timed = records[WARMUP:]
    return float((timed[-1]["started_s"] - timed[0]["started_s"]) / (len(timed) - 1))


def bench_overhead(args: argparse.Namespace) -> dict[str, Any]:
    """mpicoded with its default flags (the loss decoded with the gradient, metrics written)
    against a plain mpi4py loop, per iteration once warm, for each --wait mode asked for.

    This machine's speed drifts by a third within minutes, so the runs alternate: each round
    runs the plain loop, then mpicoded, then mpicoded with --no-trace, and the ratios are taken
    within a round; the table gives the median round (and the range of the ratio)."""
    rows: list[list[str]] = []
    out: dict[str, dict[str, Any]] = {}
    for samples, features in args.sizes:
        size = ["--samples", str(samples), "--features", str(features), "--seed", str(args.seed)]
        key = f"{samples}x{features}"
        out[key] = {}
        for mode in args.wait.split(","):
            rounds = [_overhead_round(args, size, mode, r) for r in range(args.repeats)]
            ordered = sorted(rounds, key=lambda r: r["ratio"])
            med = ordered[len(rounds) // 2]  # of an even number, the upper
            trace_cost = statistics.median(r["trace_cost"] for r in rounds)
            out[key][med["wait"]] = {**med, "rounds": rounds, "median_trace_cost": trace_cost}
            rows.append([f"{samples} x {features}", med["wait"],
                         f"{med['plain_mpi4py_s'] * 1e3:.2f}", f"{med['mpicoded_s'] * 1e3:.2f}",
                         f"{med['ratio']:.2f}x",
                         f"{ordered[0]['ratio']:.2f}-{ordered[-1]['ratio']:.2f}x",
                         f"{trace_cost:.2f}x"])
    print(f"overhead: {args.ranks - 1} workers, no injected delay, {args.iterations} iterations "
          f"after {WARMUP} of warm-up on both sides; logreg, uncoded, default flags (loss decoded "
          "with the gradient, metrics and the task trace written); "
          f"{args.repeats} rounds of plain loop, mpicoded, mpicoded --no-trace; the times of "
          "the round with the median ratio (of an even number, the upper), trace on/off the "
          "median over rounds")
    print(table(["data", "wait", "plain mpi4py ms/it", "mpicoded ms/it", "ratio",
                 "ratio range", "trace on/off"], rows))
    return out


def _overhead_round(args: argparse.Namespace, size: list[str], mode: str, index: int) -> dict[str, Any]:
    """One round: the plain loop, mpicoded and mpicoded --no-trace, back to back."""
    label = f"overhead {size[1]}x{size[3]}, wait {mode}, round {index + 1}/{args.repeats}"
    print(f"[bench] {label}: plain mpi4py loop ...", file=sys.stderr, flush=True)
    done = run_mpi(args.ranks, ["-m", "mpicoded.bench.baseline", *size, "--warmup", str(WARMUP),
                        "--iterations", str(args.iterations)], timeout=TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"baseline failed:\n{done.output[-3000:]}")
    plain = json.loads(done.output.strip().splitlines()[-1])["mean_iteration_s"]
    print(f"[bench] {label}: mpicoded uncoded ...", file=sys.stderr, flush=True)
    flags = ["--code", "uncoded", "--delay", "none", "--wait", mode, "--iterations",
             str(WARMUP + args.iterations), *size]
    run = train_run(args.ranks, flags, records=True)
    steady = steady_iteration_s(run["iteration_records"])
    print(f"[bench] {label}: the same, --no-trace ...", file=sys.stderr, flush=True)
    untraced = steady_iteration_s(train_run(args.ranks, [*flags, "--no-trace"],
                                            records=True)["iteration_records"])
    return {"wait": run["wait"], "plain_mpi4py_s": plain, "mpicoded_s": steady,
            "ratio": steady / plain, "no_trace_s": untraced, "trace_cost": steady / untraced}
