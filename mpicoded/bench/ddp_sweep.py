"""``bench ddp --params-sweep``: the same DDP comparison at models of about 10^4 to 10^7
parameters (the MLP made wider), so that what the cost does as the model grows shows: each
system's step time and time to the target, mpicoded's over DDP's, rank 0's bytes an
iteration, and a plot of step time against parameters."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .common import have_matplotlib, table
from .ddp import compare, setup

CLASSES = 10
SAMPLES = 1200  # rows: 200 a worker on 7 ranks
SHAPES = {4: (100, 96), 5: (400, 240), 6: (1000, 1000), 7: (2000, 5000)}  # features, hidden
GOAL_NONE, GOAL_SLOW = 1.10, 10.0  # the issue's: within 1.10x of DDP; >= 10x sooner


def parameters(features: int, hidden: int) -> int:
    """The MLP's parameters: features -> hidden -> CLASSES, with biases."""
    return features * hidden + hidden + hidden * CLASSES + CLASSES


def exponents(text: str) -> list[int]:
    """--params-sweep's sizes, powers of ten among SHAPES'."""
    try:
        got = [int(e) for e in text.split(",") if e.strip()]
    except ValueError:
        got = []
    if not got or any(e not in SHAPES for e in got):
        raise SystemExit(f"ddp --params-sweep {text!r}: powers of ten of the parameters, "
                         f"comma-separated, among {','.join(map(str, SHAPES))}")
    return got


def sweep(args: argparse.Namespace, schemes: list[str], patterns: list[str]) -> dict[str, Any]:
    if args.model != "mlp" or args.batch_size is not None or args.features or args.hidden:
        raise SystemExit("ddp --params-sweep sizes the MLP itself, full-batch: drop --model, "
                         "--batch-size, --features and --hidden")
    points: list[dict[str, Any]] = []
    for e in exponents(args.params_sweep):
        features, hidden = SHAPES[e]
        args.samples, args.features, args.hidden = args.samples or SAMPLES, features, hidden
        env, what = setup(args)
        print(f"[bench] ddp --params-sweep: {what}", file=sys.stderr, flush=True)
        done = compare(args, schemes, patterns, env)
        points.append({"parameters": parameters(features, hidden), "shape": [features, hidden],
                       **done})
    args.features = args.hidden = None
    summary = report(points, schemes, patterns)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "ddp-sweep.json").write_text(json.dumps({"points": points, "summary": summary},
                                                   indent=1))
    if have_matplotlib():
        plot(points, schemes, patterns, out / "ddp-sweep.png")
        print(f"plot: {out / 'ddp-sweep.png'}")
    print(f"raw numbers: {out / 'ddp-sweep.json'}")
    return summary


def report(points: list[dict[str, Any]], schemes: list[str],
           patterns: list[str]) -> dict[str, Any]:
    """The sweep's table: at each size and pattern, each system's step, its time to the target
    over DDP's (with nobody slow, the yardstick; and under the pattern), rank 0's MB an
    iteration; and each scheme's worst against the goals."""
    rows, worst = [], {n: {"none": 0.0, "sooner": float("inf")} for n in schemes}
    for point in points:
        runs = point["runs"]
        clean = runs["DDP | none"]["to_target_s"]
        for pattern in patterns:
            ddp = runs[f"DDP | {pattern}"]
            rows.append([f"{point['parameters']:,}", pattern, "DDP",
                         f"{ddp['step_s'] * 1e3:.1f}", ratio(ddp["to_target_s"], clean), "", ""])
            for name in schemes:
                run = runs[f"mpicoded {name} | {pattern}"]
                over = (run["to_target_s"] or float("inf")) / clean
                if pattern == "none":
                    worst[name]["none"] = max(worst[name]["none"], over)
                elif ddp["to_target_s"] is not None and run["to_target_s"]:
                    worst[name]["sooner"] = min(worst[name]["sooner"],
                                                ddp["to_target_s"] / run["to_target_s"])
                rows.append([f"{point['parameters']:,}", pattern, f"mpicoded {name}",
                             f"{run['step_s'] * 1e3:.1f}", ratio(run["to_target_s"], clean),
                             f"{run['master_bytes'] / 1e6:.2f}", "/".join(run["paths"])])
    print("\nPyTorch DDP against mpicoded as the model grows (time to the target over DDP's "
          "with nobody slow; rank 0's MB in and out an iteration; --reduce/--relay)")
    print(table(["parameters", "straggler", "system", "step (ms)", "to target / DDP's",
                 "rank 0 MB/it", "reduce/relay"], rows))
    print("\neach scheme, over every size: its worst time to the target over DDP's with "
          f"nobody slow (goal <= {GOAL_NONE}), and the least by which it beats DDP with the "
          f"straggler (goal >= {GOAL_SLOW})")
    for name, w in worst.items():
        sooner = "" if "slow" not in patterns else f", {w['sooner']:.1f}x sooner with the straggler"
        print(f"  {name}: {w['none']:.2f}x DDP with nobody slow{sooner}")
    return {"worst": worst}


def ratio(value: float | None, over: float | None) -> str:
    return "never" if value is None or not over else f"{value / over:.2f}"


def plot(points: list[dict[str, Any]], schemes: list[str], patterns: list[str],
         path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    x = [p["parameters"] for p in points]
    for system in ["DDP", *(f"mpicoded {n}" for n in schemes)]:
        for pattern, style in zip(patterns, ("-", "--", ":"), strict=False):
            y = [p["runs"][f"{system} | {pattern}"]["step_s"] * 1e3 for p in points]
            ax.plot(x, y, style, marker="o", label=f"{system}, {pattern}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("parameters (MLP, float32)")
    ax.set_ylabel("step (ms)")
    ax.set_title("step time as the model grows")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
