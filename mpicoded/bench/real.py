"""Real stragglers, nothing injected: ranks under a CPU quota (cgroups, root), ``--delay none``.

Two scenarios measured side by side in one run:

- 7 ranks, rank 2 throttled to 5% of a core: uncoded, frc, gfrc, cpgc with 5% tolerance, frc
  with whole-task compute (``--chunk-rows 0``), frc without purging (how public peers run).
  Goals: frc's makespan speedup over uncoded >= 3x, and >= 0.9 x its per-iteration speedup.
- 21 ranks, four throttled: sparse tasks of two partitions (K = 40, Ω = 1.25), the uniform
  split against the adaptive one, which learns the real speeds from measured task times. Goal:
  adaptive beats uniform end to end.
- 7 ranks, rank 2 throttled as above: uncoded over K = 12 partitions (no spare task, so the
  uniform split must wait for the slow rank's share), uniform against adaptive.

logreg is coded on its results, so its splits run over codes whose tasks touch one or two
partitions: a dense mds task would compute the whole data set.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .common import have_matplotlib, needs_quotas, table, train_run

SMALL = {  # 7 ranks
    "uncoded": ["--code", "uncoded"],
    "frc": ["--code", "frc", "--stragglers", "1"],
    "gfrc": ["--code", "gfrc", "--stragglers", "1"],
    "cpgc 5%": ["--code", "cpgc", "--load", "2", "--tolerance", "0.05"],
    "frc, whole tasks": ["--code", "frc", "--stragglers", "1", "--chunk-rows", "0"],
    "frc, no purge": ["--code", "frc", "--stragglers", "1", "--no-purge"],
}
def splits(code: list[str]) -> dict[str, list[str]]:
    return {"uniform": code, "adaptive": [*code, "--split", "adaptive"]}


LARGE = splits(["--code", "sparse", "--partitions", "40", "--redundancy", "1.25", "--degree",
                "2"])  # 21 ranks
NO_SPARE = splits(["--code", "uncoded", "--partitions", "12"])  # 7 ranks


def measure(ranks: int, schemes: dict[str, list[str]], common: list[str],
            throttle: dict[int, float]) -> dict[str, dict[str, Any]]:
    out = {}
    for name, flags in schemes.items():
        print(f"[bench] real-stragglers, {ranks} ranks: {name} ...", file=sys.stderr, flush=True)
        run = train_run(ranks, common + flags, throttle=throttle)
        out[name] = {key: run[key] for key in (
            "mean_iteration_s", "job_done_s", "makespan_s", "total_purged_tasks",
            "total_stale_results", "worker_computed_tasks", "worker_dropped_tasks",
            "tolerance_partitions", "final_loss")}
        out[name]["final_loads"] = run.get("final_loads")
    return out


def speedups(runs: dict[str, dict[str, Any]], base: str) -> list[list[str]]:
    """Table rows, and each run's speedups over ``base`` written into it."""
    rows = []
    for name, run in runs.items():
        run["iteration_speedup"] = runs[base]["mean_iteration_s"] / run["mean_iteration_s"]
        run["makespan_speedup"] = runs[base]["makespan_s"] / run["makespan_s"]
        run["makespan_over_iteration_speedup"] = (run["makespan_speedup"]
                                                  / run["iteration_speedup"])
        rows.append([name, f"{run['mean_iteration_s'] * 1e3:.1f}", f"{run['job_done_s']:.2f}",
                     f"{run['makespan_s']:.2f}", f"{run['worker_computed_tasks']}",
                     f"{run['total_stale_results']:.0f}", f"{run['iteration_speedup']:.2f}x",
                     f"{run['makespan_speedup']:.2f}x",
                     f"{run['makespan_over_iteration_speedup']:.2f}"])
    return rows


HEADER = ["scheme", "mean it (ms)", "job done (s)", "makespan (s)", "computed", "stale",
          "it speedup", "makespan speedup", "makespan/it"]


def bench_real_stragglers(args: argparse.Namespace) -> dict[str, Any]:
    needs_quotas("real-stragglers")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    its = ["--iterations", str(args.iterations), "--seed", str(args.seed), "--delay", "none",
           "--loss-every", "0"]
    small_throttle = {2: args.small_fraction}
    small = measure(7, SMALL, [*its, "--samples", str(args.samples), "--features", "100"],
                    small_throttle)
    large_throttle = {r: args.large_fraction for r in (3, 8, 13, 18)}
    large = measure(21, LARGE, [*its, "--samples", str(args.samples // 4), "--features", "100"],
                    large_throttle)
    no_spare = measure(7, NO_SPARE, [*its, "--samples", str(args.samples // 4), "--features",
                                     "100"], small_throttle)
    print(f"real-stragglers: 7 ranks, rank 2 at {args.small_fraction:.0%} of a core, "
          f"{args.samples} x 100 logreg, --delay none, {args.iterations} iterations")
    print(table(HEADER, speedups(small, "uncoded")))
    print(f"\n21 ranks, ranks 3, 8, 13, 18 at {args.large_fraction:.0%} of a core, "
          f"{args.samples // 4} x 100 logreg, sparse K = 40, Ω = 1.25, degree 2")
    print(table(HEADER, speedups(large, "uniform")))
    print(f"\n7 ranks, rank 2 at {args.small_fraction:.0%} of a core, {args.samples // 4} x 100 "
          "logreg, uncoded K = 12 (no spare task)")
    print(table(HEADER, speedups(no_spare, "uniform")))
    frc = small["frc"]
    summary = {
        "frc_makespan_speedup": frc["makespan_speedup"],
        "frc_makespan_over_iteration_speedup": frc["makespan_over_iteration_speedup"],
        "adaptive_over_uniform_makespan": (large["adaptive"]["makespan_s"]
                                           / large["uniform"]["makespan_s"]),
        "adaptive_over_uniform_makespan_no_spare": (no_spare["adaptive"]["makespan_s"]
                                                    / no_spare["uniform"]["makespan_s"]),
    }
    print(f"\nfrc: makespan speedup {summary['frc_makespan_speedup']:.2f}x (goal >= 3), "
          f"{summary['frc_makespan_over_iteration_speedup']:.2f} of its iteration speedup "
          f"(goal >= 0.9); adaptive / uniform makespan "
          f"{summary['adaptive_over_uniform_makespan']:.2f} on 21 ranks (goal < 1), "
          f"{summary['adaptive_over_uniform_makespan_no_spare']:.2f} on 7 ranks without spare "
          "tasks")
    result = {"summary": summary, "small": small, "large": large, "no_spare": no_spare,
              "settings": {"small_throttle": small_throttle, "large_throttle": large_throttle,
                           "samples": args.samples, "iterations": args.iterations}}
    (out_dir / "real-stragglers.json").write_text(json.dumps(result, indent=2))
    print(f"raw numbers: {out_dir / 'real-stragglers.json'}")
    if have_matplotlib():
        plot(small, large, no_spare, out_dir / "real-stragglers.png")
        print(f"plot: {out_dir / 'real-stragglers.png'}")
    else:
        print("plot skipped: matplotlib is not installed (pip install 'mpicoded[plot]')")
    return summary


def plot(small: dict[str, Any], large: dict[str, Any], no_spare: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5), gridspec_kw={
        "width_ratios": [len(small), len(large), len(no_spare)]})
    for ax, runs, title in ((axes[0], small, "7 ranks, rank 2 throttled"),
                            (axes[1], large, "21 ranks, 4 throttled: sparse, degree 2"),
                            (axes[2], no_spare, "7 ranks: uncoded K = 12, no spare task")):
        names = list(runs)
        x = range(len(names))
        ax.bar([i - 0.2 for i in x], [runs[n]["job_done_s"] for n in names], 0.4,
               label="job done")
        ax.bar([i + 0.2 for i in x], [runs[n]["makespan_s"] for n in names], 0.4,
               label="makespan (last worker stopped)")
        ax.set_xticks(list(x), names, rotation=20, ha="right")
        ax.set_ylabel("seconds")
        ax.set_title(title)
    axes[0].legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
