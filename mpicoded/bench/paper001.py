"""Paper 001, Section 4.1 reproduced on the simulator and on the MPI runtime, side by side.

K = M = 20, r = 3, μ = 10, α = 0.01, one second per model time unit; UC-MMC, CPGC and MCC at
tolerance rates 0 to 20%: mean per-iteration time, communication load (messages an iteration)
and communication volume (results an iteration / M). The MPI runs use the same keyed delays as
the simulator, so iteration t meets the same stragglers in both: the agreement column compares
the MPI mean with the simulator's mean over the same iterations.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ..codes import make_code
from ..delays import DelayModel
from ..sim import simulate
from .common import agreement, have_matplotlib, table, train_run

SCHEMES = ("ucmmc", "cpgc", "mcc")
TOLERANCES = (0.0, 0.05, 0.10, 0.15, 0.20)
WORKERS, LOAD = 20, 3


def simulated(scheme: str, tolerance: float, iterations: int, seed: int) -> dict[str, Any]:
    code = make_code(scheme, WORKERS, load=LOAD)
    m = int(np.floor(tolerance * code.n_partitions + 1e-9))
    res = simulate(code, DelayModel("seed001", seed=seed), iterations, tolerance=m,
                   task_cost=np.ones(code.n_tasks))  # a coded block of W costs one unit
    return {"wall_s": [r.wall_s for r in res.records],
            "messages": [r.messages for r in res.records],
            "volume": [r.volume for r in res.records], "events_per_s": res.events_per_s}


def measured(scheme: str, tolerance: float, iterations: int, seed: int) -> dict[str, Any]:
    run = train_run(WORKERS + 1, ["--job", "linreg", "--code", scheme, "--load", str(LOAD),
                                  "--tolerance", str(tolerance), "--delay", "seed001",
                                  "--seed", str(seed), "--iterations", str(iterations),
                                  "--samples", "4000", "--features", "40"], records=True)
    recs = run["iteration_records"]
    return {key: [r[key] for r in recs] for key in ("wall_s", "messages", "volume")}


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    metrics = (("wall_s", "average per-iteration time (s)"), ("volume", "communication volume"),
               ("messages", "communication load (messages)"))
    x = [100 * r["tolerance"] for r in results[SCHEMES[0]]]
    for ax, (key, label) in zip(axes, metrics, strict=True):
        for scheme, color in zip(SCHEMES, ("tab:blue", "tab:red", "tab:green"), strict=True):
            rows = results[scheme]
            ax.plot(x, [np.mean(r["mpi"][key]) for r in rows], "o-", color=color,
                    label=f"{scheme} (MPI)")
            ax.plot(x, [np.mean(r["sim"][key]) for r in rows], "x--", color=color,
                    label=f"{scheme} (simulator)")
        ax.set_xlabel("tolerance rate (%)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("paper 001, Fig. 1: K = M = 20, r = 3, μ = 10, α = 0.01")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def bench_paper001(args: argparse.Namespace) -> dict[str, Any]:
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    rows = []
    tolerances = args.tolerances or TOLERANCES
    for scheme in SCHEMES:
        results[scheme] = []
        for tol in tolerances:
            print(f"[bench] paper001 {scheme} tolerance {tol:.0%} ...", file=sys.stderr,
                  flush=True)
            sim = simulated(scheme, tol, args.sim_iterations, args.seed)
            mpi = measured(scheme, tol, args.iterations, args.seed)
            paired = float(np.mean(sim["wall_s"][: len(mpi["wall_s"])]))
            ratio = float(np.mean(mpi["wall_s"])) / paired
            results[scheme].append({"tolerance": tol, "sim": sim, "mpi": mpi,
                                    "mpi_over_sim_same_iterations": ratio})
            rows.append([scheme, f"{tol:.0%}",
                         f"{np.mean(sim['wall_s']) * 1e3:.1f}", f"{paired * 1e3:.1f}",
                         f"{np.mean(mpi['wall_s']) * 1e3:.1f}", f"{ratio:.3f}",
                         f"{np.mean(sim['messages']):.1f}", f"{np.mean(mpi['messages']):.1f}",
                         f"{np.mean(sim['volume']):.2f}", f"{np.mean(mpi['volume']):.2f}"])
    print(f"paper001: K = M = 20, r = 3, mu = 10, alpha = 0.01, 1 s per model unit; simulator "
          f"{args.sim_iterations} iterations, MPI (mpirun -n 21) {args.iterations} iterations, "
          f"seed {args.seed}")
    print(table(["scheme", "tol", "sim ms", "sim ms (same its)", "MPI ms", "MPI/sim",
                 "sim msgs", "MPI msgs", "sim volume", "MPI volume"], rows))
    summary: dict[str, Any] = {"worst_mpi_sim_disagreement": max(
        abs(r["mpi_over_sim_same_iterations"] - 1) for s in SCHEMES for r in results[s])}
    at = {r["tolerance"]: i for i, r in enumerate(results["cpgc"])}
    if 0.05 in at:
        five = {s: np.mean(results[s][at[0.05]]["mpi"]["wall_s"]) for s in SCHEMES}
        summary["cpgc_over_mcc_at_5pct"] = five["cpgc"] / five["mcc"]
        summary["cpgc_over_ucmmc_at_5pct"] = five["cpgc"] / five["ucmmc"]
        print(f"MPI at 5% tolerance: CPGC / MCC = {summary['cpgc_over_mcc_at_5pct']:.3f}, "
              f"CPGC / UC-MMC = {summary['cpgc_over_ucmmc_at_5pct']:.3f}")
    summary["failed"] = agreement([
        (f"{s} {r['tolerance']:.0%} mean iteration (s)", float(np.mean(r["mpi"]["wall_s"])),
         float(np.mean(r["sim"]["wall_s"][: len(r["mpi"]["wall_s"])]))) for s in SCHEMES
        for r in results[s]])
    (out_dir / "paper001.json").write_text(json.dumps({"summary": summary, "results": results}))
    print(f"raw numbers: {out_dir / 'paper001.json'}")
    if have_matplotlib():
        plot(results, out_dir / "paper001.png")
        print(f"plot: {out_dir / 'paper001.png'}")
    else:
        print("plot skipped: matplotlib is not installed (pip install 'mpicoded[plot]')")
    return summary
