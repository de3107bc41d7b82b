"""The straggler tax: each scheme's time under a straggler pattern over uncoded's time with no
straggler at all, on the same data and ranks (docs/architecture.md, "The straggler tax").

7 ranks (``--ranks``), logreg (or linreg, coded on its data, or PageRank: ``--job``), nothing
injected (``--delay none``): real slow ranks under CPU quotas (cgroups, root). Capped: every
worker at the same share of a core, so that the ranks behave as separate machines of one size,
the straggler at a fraction of that share; uncapped: the six workers share the cores, the
straggler at that fraction of one core. Patterns: none, one fixed rank, a moving one (a
different random worker every 0.4 s), two fixed, short random stalls. Per cell (the median of
``--repeats`` alternated rounds): the tax of the mean iteration and of the makespan (over uncoded
with no straggler, three runs at least), each round's makespan tax, rows computed over rows in
the data, messages an iteration and rank 0's CPU a result, and, capped, the pattern's limit:
n workers over their mean total speed (one at fraction f of its share: n / (n - 1 + f)).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ..delays import keyed_uniform
from ..throttle.schedule import Schedule, parse_schedule
from .common import have_matplotlib, needs_quotas, table, train_run, worst_case

PATTERNS = ("none", "fixed", "moving", "two fixed", "stalls")
SCHEMES: dict[str, list[str]] = {
    "uncoded": ["--code", "uncoded"],
    "default": [],  # what a user gets without choosing
    "frc s=1": ["--code", "frc", "--stragglers", "1", "--partial", "off"],
    "gfrc s=1": ["--code", "gfrc", "--stragglers", "1", "--partial", "off"],
    "gfrc s=1 partial": ["--code", "gfrc", "--stragglers", "1", "--partial", "on"],
    "gfrc s=2": ["--code", "gfrc", "--stragglers", "2", "--partial", "off"],
    "gfrc s=2 partial": ["--code", "gfrc", "--stragglers", "2", "--partial", "on"],
    "spread s=1 partial": ["--code", "spread", "--stragglers", "1", "--partial", "on"],
    "spread s=2 partial": ["--code", "spread", "--stragglers", "2", "--partial", "on"],
    "adaptive split": ["--split", "adaptive"],  # on logreg: partial work, data everywhere
}
PAGERANK_SCHEMES: dict[str, list[str]] = {  # a matrix-vector job: codes whose target is each
    "uncoded": ["--code", "uncoded"],
    "default": [],
    "mds s=1": ["--code", "mds", "--stragglers", "1"],
    "mds s=1 partial": ["--code", "mds", "--stragglers", "1", "--partial", "on"],
    "mds s=2": ["--code", "mds", "--stragglers", "2"],
    "mds s=2 partial": ["--code", "mds", "--stragglers", "2", "--partial", "on"],
    "sparse": ["--code", "sparse"],  # coded blocks of a few partitions each, not all K
    "sparse partial": ["--code", "sparse", "--partial", "on"],
    # plain blocks on s+1 workers each: no non-zeros added, a straggler's ranges to the others
    "spread s=2": ["--code", "spread", "--stragglers", "2", "--partial", "off"],
    "spread s=1 partial": ["--code", "spread", "--stragglers", "1", "--partial", "on"],
    "spread s=2 partial": ["--code", "spread", "--stragglers", "2", "--partial", "on"],
}
LINEAR_SCHEMES: dict[str, list[str]] = {  # linreg, coded on its data: no pieces, one product
    "uncoded": ["--code", "uncoded"],  # a task whatever the code
    "default": [],
    "frc s=1": ["--code", "frc", "--stragglers", "1", "--partial", "off"],
    "gfrc s=2": ["--code", "gfrc", "--stragglers", "2", "--partial", "off"],
    "mds s=2": ["--code", "mds", "--stragglers", "2"],
    "spread s=2": ["--code", "spread", "--stragglers", "2", "--partial", "off"],
}
JOB_SCHEMES = {"logreg": SCHEMES, "linreg": LINEAR_SCHEMES, "pagerank": PAGERANK_SCHEMES}
JOB_KINDS = {"logreg": "gradient", "linreg": "linear", "pagerank": "matvec"}  # jobs/defaults.py
MOVE_PERIOD_S = 0.4
# short random stalls: every STALL_PERIOD_S each worker, with this probability, 10-40x slower,
# on top of a mild spread of speeds (each worker 1.1-1.5x slower than the cap, seeded). A
# period of a few iterations: a stall shorter than a capped rank's quota period does not bite
STALL_PERIOD_S, STALL_PROBABILITY, STALL_SLOWDOWN, SPREAD = 0.2, 0.05, "10-40", (1.1, 1.5)
# rows a worker holds by default: as many on 21 ranks as on 7 (weak scaling). With 240000 rows
# on 20 workers at 0.05 of a core an iteration took 70 ms, and a straggler at 5% of that runs 1
# ms every 400 ms (the kernel's shortest quota, 1 ms): its bursts set the pace, not its speed
ROWS_A_WORKER = 40000
LIMIT_SAMPLES = 2000  # times a pattern's limit averages its workers' speeds over
# PageRank's nodes by default (9 million edges): with 120000 uncoded took 5.5 ms an iteration,
# 0.2 s in all, so a straggler moving every 0.4 s never moved and a quota period of the
# straggler (67 ms on 7 ranks) weighed as much as ten iterations; with 10^6, 72 ms and 2.4 s
PAGERANK_NODES = 1_000_000
BASELINE_RUNS = 3  # uncoded with no straggler varied 33-40 ms an iteration from run to run


def spread(cap: float, workers: int, seed: int) -> list[float]:
    """The stalls pattern's mild spread: each of ``workers`` at ``cap`` over a seeded 1.1-1.5."""
    draws = keyed_uniform(seed, 15485863, np.arange(1, workers + 1))
    return [cap / (SPREAD[0] + (SPREAD[1] - SPREAD[0]) * float(u)) for u in draws]


def schedule(pattern: str, cap: float | None, fraction: float, ranks: int,
             seed: int = 0) -> Schedule | None:
    """The throttle of a pattern: every worker at ``cap`` (None: uncapped), the straggler(s) at
    ``fraction`` of that from the first iteration on (``train_run`` starts the clock there)."""
    slow = fraction * (cap or 1.0)
    items = [f"workers={cap:g}"] if cap else []
    if pattern == "stalls":
        items += [f"{r}={share:.4g}" for r, share in enumerate(spread(cap or 1.0, ranks - 1,
                                                                      seed), 1)]
        items.append(f"stalls={STALL_PROBABILITY:g}/{STALL_PERIOD_S:g}/{STALL_SLOWDOWN}/{seed}")
    elif pattern == "fixed":
        items.append(f"2={slow:g}@0-")
    elif pattern == "two fixed":
        items += [f"2={slow:g}@0-", f"5={slow:g}@0-"]
    elif pattern == "moving":
        items.append(f"move={slow:g}/{MOVE_PERIOD_S:g}/3")
    elif pattern.startswith("trace="):  # slowdowns over time, from the first iteration
        items.append(pattern)
    return parse_schedule(",".join(items), ranks) if items else None


def measure(ranks: int, flags: list[str], common: list[str], throttle: Schedule | None) -> dict[str, Any]:
    run = train_run(ranks, [*common, *flags], records=True, throttle=throttle)
    its = run["iteration_records"]
    data_rows = run["job"].get("data_rows")
    return {"mean_iteration_s": run["mean_iteration_s"], "makespan_s": run["makespan_s"],
            # a lingering rank's counts are not in the record: rows unknown then
            "rows_over_data": (run["worker_computed_rows"] / (data_rows * len(its))
                               if data_rows and not run["lingering_workers"] else None),
            "messages_an_iteration": sum(r["messages"] for r in its) / len(its),
            "master_cpu_per_result_us": run["master_cpu_per_result_us"],
            "final_loss": run["final_loss"],
            "loss_curve": [(r["started_s"] + r["wall_s"] - its[0]["started_s"], r["loss"])
                           for r in its]}  # from the first iteration's start


def pattern_limit(throttle: Schedule | None, cap: float, workers: int) -> float:
    """What nothing exact beats under ``throttle`` (design.md): ``workers`` over their mean
    total speed in shares of ``cap``, averaged over seeded times a stall period apart."""
    if throttle is None:
        return 1.0
    times = (np.arange(LIMIT_SAMPLES) + 0.5) * STALL_PERIOD_S
    total = np.mean([sum((throttle.at(t).get(r) or cap) / cap for r in range(1, workers + 1))
                     for t in times])
    return workers / float(total)


def median_run(tries: list[dict[str, Any]]) -> dict[str, Any]:
    """One cell's runs as one: the run of the median makespan (the lower middle of an even
    count), its iteration time the median of the runs', and every run's makespan."""
    ordered = sorted(tries, key=lambda run: run["makespan_s"])
    iterations = sorted(run["mean_iteration_s"] for run in tries)
    return {**ordered[(len(ordered) - 1) // 2],
            "mean_iteration_s": iterations[(len(iterations) - 1) // 2],
            "makespans_s": [run["makespan_s"] for run in tries]}


def bench_straggler_tax(args: argparse.Namespace) -> dict[str, Any]:
    needs_quotas("straggler-tax")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    data = (["--job", args.job, "--samples", str(args.samples), "--features", "100"]
            if args.job != "pagerank" else ["--job", "pagerank", "--nodes", str(args.nodes)])
    common = [*data, "--delay", "none", "--iterations", str(args.iterations), "--seed",
              str(args.seed), "--loss-every", "0"]
    known = JOB_SCHEMES[args.job]
    ranks = args.ranks
    n = ranks - 1
    limit = n / (n - 1 + args.small_fraction)
    result: dict[str, Any] = {"settings": {"ranks": ranks, "job": args.job, "data": data[1:],
                                 "samples": args.samples,
                                 "iterations": args.iterations, "cap": args.cap,
                                 "fraction": args.small_fraction, "limit": limit}}
    summary: dict[str, Any] = {}
    schemes = {name: known[name] for name in chosen(args.schemes, known, "--schemes")}
    patterns = chosen(args.patterns, PATTERNS, "--patterns", free="trace=")
    settings = {"capped": args.cap, "uncapped": None}
    if "uncoded" not in schemes or "none" not in patterns:
        raise SystemExit("straggler-tax: the tax is over uncoded with no straggler: --schemes "
                         "needs uncoded and --patterns none")
    rounds = args.repeats  # set by main: 1 unless given
    for setting in chosen(args.settings, settings, "--settings"):
        cap = settings[setting]
        tries: dict[str, list[dict[str, Any]]] = {}
        for index in range(rounds):  # alternated: a drift of the machine hits every cell alike
            for pattern in patterns:
                for name, flags in schemes.items():
                    print(f"[bench] straggler-tax {setting}, round {index + 1}/{rounds}, "
                          f"{pattern}: {name} ...", file=sys.stderr, flush=True)
                    throttle = schedule(pattern, cap, args.small_fraction, ranks, args.seed)
                    # every tax's denominator: three runs at least
                    runs_now = -(-BASELINE_RUNS // rounds) if (name, pattern) == (
                        "uncoded", "none") else 1
                    tries.setdefault(f"{name} | {pattern}", []).extend(
                        measure(ranks, flags, common, throttle) for _ in range(runs_now))
        runs = {key: median_run(cell) for key, cell in tries.items()}
        base = runs["uncoded | none"]
        limits = {p: pattern_limit(schedule(p, cap, args.small_fraction, ranks, args.seed), cap, n)
                  if cap and not p.startswith("trace=") else None for p in patterns}
        rows = []
        for key, run in runs.items():
            run["iteration_tax"] = run["mean_iteration_s"] / base["mean_iteration_s"]
            run["makespan_tax"] = run["makespan_s"] / base["makespan_s"]
            spread_of = [t / base["makespan_s"] for t in run["makespans_s"]]
            name, pattern = key.split(" | ")
            run["limit"] = limits[pattern]
            rows.append([name, pattern, "-" if limits[pattern] is None else
                         f"{limits[pattern]:.2f}", f"{run['mean_iteration_s'] * 1e3:.1f}",
                         f"{run['iteration_tax']:.2f}", f"{run['makespan_tax']:.2f}",
                         f"{min(spread_of):.2f}-{max(spread_of):.2f}",
                         "-" if run["rows_over_data"] is None else f"{run['rows_over_data']:.2f}",
                         f"{run['messages_an_iteration']:.1f}",
                         f"{run['master_cpu_per_result_us'] or 0:.1f}"])
        what = (f"every worker at {cap:g} of a core, the straggler at {args.small_fraction:g} "
                "of that" if cap else f"uncapped, the straggler at {args.small_fraction:g} of a "
                "core")
        job = (f"{args.job} {args.samples} x 100" if args.job != "pagerank" else
               f"pagerank {args.nodes} nodes")
        print(f"\nstraggler tax, {setting} ({what}): {ranks} ranks, {job}, "
              f"{args.iterations} iterations, medians of {rounds} alternated round(s); uncoded "
              f"with no straggler {base['mean_iteration_s'] * 1e3:.1f} ms an iteration, "
              f"{base['makespan_s']:.2f} s")
        print(table(["scheme", "pattern", "limit", "it (ms)", "it tax", "makespan tax", "runs' taxes",
                     "rows/data", "msgs/it", "master us/result"], rows))
        partial = [name for name in schemes if name.endswith("partial")]
        summary[setting] = {"best_partial_makespan_tax": {
            p: min(runs[f"{s} | {p}"]["makespan_tax"] for s in partial) for p in patterns}
            if partial else {}}
        for name in ("gfrc s=2 partial", "spread s=2 partial", "mds s=2 partial"):
            if name in schemes and "two fixed" in patterns:
                summary[setting][f"{name.replace(' ', '_')}_two_fixed"] = runs[
                    f"{name} | two fixed"]["makespan_tax"]
        worst = {name: max(runs[f"{name} | {p}"]["makespan_tax"] for p in patterns)
                 for name in schemes if name != "uncoded"}
        if worst:  # a user picks the scheme before knowing the pattern: its worst case counts
            print("makespan tax, " + worst_case(worst, patterns, JOB_KINDS[args.job]))
            summary[setting]["worst_makespan_tax"] = worst
        if partial and "none" in patterns:
            summary[setting]["partial_rows_over_data_none"] = max(
                (runs[f"{s} | none"]["rows_over_data"] for s in partial
                 if runs[f"{s} | none"]["rows_over_data"] is not None), default=None)
        result[setting] = runs
    for setting, numbers in summary.items():
        print(f"\n{setting}: {json.dumps(numbers)} (goals, capped: best partial makespan tax "
              f"<= 1.3 fixed and moving, <= 1.05 none, limit {limit:.2f}; s=2 partial "
              "<= 1.6 under two fixed; partial rows over data <= 1.1 with none)")
    result["summary"] = summary
    (out_dir / "straggler-tax.json").write_text(json.dumps(result, indent=1))
    print(f"raw numbers: {out_dir / 'straggler-tax.json'}")
    if have_matplotlib() and set(settings) <= set(result) and "moving" in patterns:
        plot(result, out_dir, list(schemes), patterns)
        print(f"plots: {out_dir / 'straggler-tax.png'}, {out_dir / 'straggler-tax-loss.png'}")
    return summary


def chosen(given: str | None, known: Iterable[str], flag: str, free: str = "") -> list[str]:
    """The comma-separated names of ``given`` (all of ``known`` if None), each checked (a name
    that starts with ``free``, when given, passes: ``trace=FILE``)."""
    names = list(known) if given is None else [n.strip() for n in given.split(",") if n.strip()]
    unknown = [n for n in names if n not in known and not (free and n.startswith(free))]
    if unknown or not names:
        raise SystemExit(f"straggler-tax {flag} {given!r}: allowed {', '.join(known)}")
    return names


def plot(result: dict[str, Any], out_dir: Path, names: list[str], patterns: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(15, 4.8), sharey=True)
    width = 0.8 / len(patterns)
    for ax, setting in zip(axes, ("capped", "uncapped"), strict=True):
        for k, pattern in enumerate(patterns):
            ax.bar([i + k * width for i in range(len(names))],
                   [result[setting][f"{s} | {pattern}"]["makespan_tax"] for s in names], width,
                   label=pattern)
        ax.axhline(result["settings"]["limit"], color="black", ls="--", lw=1,
                   label="limit, one straggler")
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(names))], names, rotation=25,
                      ha="right")
        ax.set_title(f"makespan tax, {setting}")
        ax.set_yscale("log")
    axes[0].set_ylabel("time over uncoded with no straggler")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out_dir / "straggler-tax.png", dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(8, 4.8))
    for name in names:
        curve = result["capped"][f"{name} | moving"]["loss_curve"]
        known = [(t, loss) for t, loss in curve if loss is not None]
        ax.plot([t for t, _ in known], [loss for _, loss in known], label=name)
    ax.set_xlabel("wall time (s)")
    ax.set_ylabel("training loss")
    ax.set_title("loss against wall time, capped workers, a moving straggler")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out_dir / "straggler-tax-loss.png", dpi=110)
    plt.close(fig)
