"""The straggler tax: each scheme's time under a straggler pattern over uncoded's time with no
straggler at all, on the same data and ranks (``../shared/design.md``).

7 ranks, logreg, nothing injected (``--delay none``): real slow ranks under CPU quotas
(cgroups, root). Capped: every worker at the same share of a core, so that the ranks behave as
separate machines of one size, the straggler at a fraction of that share; uncapped: the six
workers share the cores, the straggler at that fraction of one core. Patterns: none, one fixed
rank, a moving one (a different random worker every 0.4 s), two fixed. Per run: the tax of the
mean iteration and of the makespan, rows computed over rows in the data, messages an iteration
and rank 0's CPU a result. The limit with a core per worker and one worker at fraction f of its
speed is n / (n - 1 + f).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..throttle import Schedule, parse_schedule
from .common import have_matplotlib, needs_quotas, table, train_run

RANKS = 7
PATTERNS = ("none", "fixed", "moving", "two fixed")
SCHEMES: dict[str, list[str]] = {
    "uncoded": ["--code", "uncoded"],
    "frc s=1": ["--code", "frc", "--stragglers", "1"],
    "gfrc s=1": ["--code", "gfrc", "--stragglers", "1"],
    "gfrc s=1 partial": ["--code", "gfrc", "--stragglers", "1", "--partial", "on"],
    "gfrc s=2": ["--code", "gfrc", "--stragglers", "2"],
    "gfrc s=2 partial": ["--code", "gfrc", "--stragglers", "2", "--partial", "on"],
    "gfrc s=5 partial": ["--code", "gfrc", "--stragglers", "5", "--partial", "on"],
    "adaptive split": ["--code", "uncoded", "--partitions", "24", "--split", "adaptive"],
}
PARTIAL = [name for name in SCHEMES if name.endswith("partial")]
MOVE_PERIOD_S = 0.4


def schedule(pattern: str, cap: float | None, fraction: float) -> Schedule | None:
    """The throttle of a pattern: every worker at ``cap`` (None: uncapped), the straggler(s) at
    ``fraction`` of that."""
    slow = fraction * (cap or 1.0)
    items = [f"workers={cap:g}"] if cap else []
    if pattern == "fixed":
        items.append(f"2={slow:g}")
    elif pattern == "two fixed":
        items += [f"2={slow:g}", f"5={slow:g}"]
    elif pattern == "moving":
        items.append(f"move={slow:g}/{MOVE_PERIOD_S:g}/3")
    return parse_schedule(",".join(items), RANKS) if items else None


def measure(flags: list[str], common: list[str], throttle: Schedule | None) -> dict:
    run = train_run(RANKS, [*common, *flags], records=True, throttle=throttle)
    its = run["iteration_records"]
    data_rows = run["job"].get("data_rows")
    return {"mean_iteration_s": run["mean_iteration_s"], "makespan_s": run["makespan_s"],
            "rows_over_data": (run["worker_computed_rows"] / (data_rows * len(its))
                               if data_rows else None),
            "messages_an_iteration": sum(r["messages"] for r in its) / len(its),
            "master_cpu_per_result_us": run["master_cpu_per_result_us"],
            "final_loss": run["final_loss"],
            "loss_curve": [(r["started_s"] + r["wall_s"], r["loss"]) for r in its]}


def bench_straggler_tax(args: argparse.Namespace) -> dict:
    needs_quotas("straggler-tax")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    common = ["--job", "logreg", "--samples", str(args.samples), "--features", "100",
              "--delay", "none", "--iterations", str(args.iterations), "--seed",
              str(args.seed), "--loss-every", "0"]
    n = RANKS - 1
    limit = n / (n - 1 + args.small_fraction)
    result: dict = {"settings": {"ranks": RANKS, "samples": args.samples,
                                 "iterations": args.iterations, "cap": args.cap,
                                 "fraction": args.small_fraction, "limit": limit}}
    summary: dict = {}
    for setting, cap in (("capped", args.cap), ("uncapped", None)):
        runs: dict = {}
        for pattern in PATTERNS:
            for name, flags in SCHEMES.items():
                print(f"[bench] straggler-tax {setting}, {pattern}: {name} ...", file=sys.stderr,
                      flush=True)
                runs[f"{name} | {pattern}"] = measure(
                    flags, common, schedule(pattern, cap, args.small_fraction))
        base = runs["uncoded | none"]
        rows = []
        for key, run in runs.items():
            run["iteration_tax"] = run["mean_iteration_s"] / base["mean_iteration_s"]
            run["makespan_tax"] = run["makespan_s"] / base["makespan_s"]
            name, pattern = key.split(" | ")
            rows.append([name, pattern, f"{run['mean_iteration_s'] * 1e3:.1f}",
                         f"{run['iteration_tax']:.2f}", f"{run['makespan_tax']:.2f}",
                         "-" if run["rows_over_data"] is None else f"{run['rows_over_data']:.2f}",
                         f"{run['messages_an_iteration']:.1f}",
                         f"{run['master_cpu_per_result_us']:.1f}"])
        what = (f"every worker at {cap:g} of a core, the straggler at {args.small_fraction:g} "
                "of that" if cap else f"uncapped, the straggler at {args.small_fraction:g} of a "
                "core")
        print(f"\nstraggler tax, {setting} ({what}): {RANKS} ranks, logreg {args.samples} x 100, "
              f"{args.iterations} iterations; uncoded with no straggler "
              f"{base['mean_iteration_s'] * 1e3:.1f} ms an iteration, {base['makespan_s']:.2f} s")
        print(table(["scheme", "pattern", "it (ms)", "it tax", "makespan tax", "rows/data",
                     "msgs/it", "master us/result"], rows))
        best = {p: min(runs[f"{s} | {p}"]["makespan_tax"] for s in PARTIAL) for p in PATTERNS}
        summary[setting] = {"best_partial_makespan_tax": best,
                            "gfrc_s2_partial_two_fixed": runs["gfrc s=2 partial | two fixed"][
                                "makespan_tax"],
                            "partial_rows_over_data_none": max(
                                runs[f"{s} | none"]["rows_over_data"] for s in PARTIAL)}
        result[setting] = runs
    capped = summary["capped"]
    print(f"\ncapped: best partial makespan tax {capped['best_partial_makespan_tax']} (goals: <= "
          f"1.3 fixed and moving, <= 1.05 none; limit {limit:.2f}); gfrc s=2 partial under two "
          f"fixed {capped['gfrc_s2_partial_two_fixed']:.2f} (goal <= 1.6); partial rows over "
          f"data with no straggler {capped['partial_rows_over_data_none']:.2f} (goal <= 1.1)")
    result["summary"] = summary
    (out_dir / "straggler-tax.json").write_text(json.dumps(result, indent=1))
    print(f"raw numbers: {out_dir / 'straggler-tax.json'}")
    if have_matplotlib():
        plot(result, out_dir)
        print(f"plots: {out_dir / 'straggler-tax.png'}, {out_dir / 'straggler-tax-loss.png'}")
    return summary


def plot(result: dict, out_dir: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(15, 4.8), sharey=True)
    names = list(SCHEMES)
    width = 0.8 / len(PATTERNS)
    for ax, setting in zip(axes, ("capped", "uncapped"), strict=True):
        for k, pattern in enumerate(PATTERNS):
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
