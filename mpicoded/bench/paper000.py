"""Paper 000's stream of jobs over uneven workers: mean in-order delay by load split, simulator
for the whole grid and the MPI runtime for K = 100, side by side.

Profile paper000 (20 workers: mu_p = 1, 2, 4, 8 and c_p = 2, 1, 0.5, 0.25, five each), K·C = 100,
λ = 0.01 jobs per model time unit, I = 10 iterations a job; codes where any K of the KΩ tasks
decode (mds). The genie bound uses the realized task times of the same run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ..balance.search import Candidate, parameter_search
from ..balance.split import Moments
from ..balance.splitter import Splitter
from ..codes import make_code
from ..delays import PAPER000_PROFILE, DelayModel
from ..sim import Simulator, expected_iteration_time
from ..stream import poisson_arrivals
from .common import agreement, have_matplotlib, table, train_run

PARTITIONS = (20, 40, 100)
REDUNDANCIES = (1.0, 1.1, 1.25, 1.5)
SPLITS = ("uniform", "optimal", "adaptive")
WORK, RATE, ITERATIONS, WORKERS = 100.0, 0.01, 10, 20


def simulated(k: int, omega: float, jobs: int, seed: int) -> dict[str, Any]:
    code = make_code("mds", WORKERS, partitions=k, redundancy=omega)
    complexity = WORK / k
    delay = DelayModel("seed000", seed=seed, profile=PAPER000_PROFILE, complexity=complexity)
    m = complexity / np.array([mu for mu, _ in PAPER000_PROFILE])
    declared = Moments(m, m**2, np.array([c for _, c in PAPER000_PROFILE]))
    arrivals = poisson_arrivals(jobs, RATE, seed)
    out = {}
    for split in SPLITS:
        splitter = None if split == "uniform" else Splitter(split, code.n_tasks, WORKERS,
                                                            declared)
        res = Simulator(code, delay, np.ones(code.n_tasks), 0, splitter).run_stream(
            arrivals, ITERATIONS)
        assert res.jobs is not None and res.genie is not None  # a stream, genie timed by default
        out[split] = float(res.jobs.delay.mean())
        out["genie"] = float(res.genie.delay.mean())
    return out


def measured(k: int, omega: float, jobs: int, seed: int, time_scale: float) -> dict[str, Any]:
    out = {}
    for split in SPLITS:
        run = train_run(WORKERS + 1, [
            "--job", "linreg", "--code", "mds", "--partitions", str(k), "--redundancy", str(omega),
            "--features", str(max(k, 50)), "--samples", "3000", "--delay", "seed000",
            "--profile", "paper000", "--work", str(WORK), "--split", split, "--jobs", str(jobs),
            "--arrival-rate", str(RATE), "--iterations", str(ITERATIONS), "--seed", str(seed),
            "--time-scale", str(time_scale), "--loss-every", "0"])
        # back to model time units, to sit beside the simulator's numbers
        out[split] = run["mean_in_order_delay_s"] / time_scale
        out["genie"] = run["genie_mean_in_order_delay_s"] / time_scale
    return out


def plot(sim: dict[str, Any], mpi: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(PARTITIONS), figsize=(15, 4.2), sharey=True)
    styles = {"uniform": "tab:red", "optimal": "tab:blue", "adaptive": "tab:green",
              "genie": "black"}
    for ax, k in zip(axes, PARTITIONS, strict=True):
        for name, color in styles.items():
            ax.plot(REDUNDANCIES, [sim[f"{k}/{o}"][name] for o in REDUNDANCIES], "x--",
                    color=color, label=f"{name} (simulator)")
            ran = [o for o in REDUNDANCIES if f"{k}/{o}" in mpi]
            if ran:
                ax.plot(ran, [mpi[f"{k}/{o}"][name] for o in ran], "o-", color=color,
                        label=f"{name} (MPI)")
        ax.set_yscale("log")
        ax.set_title(f"K = {k}, C = {WORK / k:g}")
        ax.set_xlabel("redundancy Ω")
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel("mean in-order delay (model time)")
    axes[-1].legend(fontsize=7)
    fig.suptitle("paper 000: in-order delay by load split, λ = 0.01, I = 10, profile paper000")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def search(seed: int) -> list[Any]:
    """Algorithm 1 over the bench's grid: least mismatch first, the simulator's expected
    iteration time beside each candidate."""
    mu = np.array([m for m, _ in PAPER000_PROFILE])
    c = np.array([c for _, c in PAPER000_PROFILE])

    def simulated_time(cand: Candidate) -> float:
        code = make_code("mds", WORKERS, partitions=cand.partitions, redundancy=cand.redundancy)
        delay = DelayModel("seed000", seed=seed, profile=PAPER000_PROFILE,
                           complexity=cand.complexity)
        return expected_iteration_time(code, delay, cand.loads, iterations=200)

    ranked = parameter_search(WORK, mu, c, list(PARTITIONS), list(REDUNDANCIES),
                              simulate_iteration=simulated_time)
    print("code-parameter search (Algorithm 1), least mismatch first:")
    print(table(["K", "C", "Ω", "mismatch", "level (mean+std)", "simulated iteration"],
                [[str(cand.partitions), f"{cand.complexity:g}", f"{cand.redundancy:g}",
                  f"{cand.mismatch:.4f}", f"{cand.level:.2f}",
                  f"{cand.expected_iteration:.2f}"] for cand in ranked]))
    return ranked


def bench_paper000(args: argparse.Namespace) -> dict[str, Any]:
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    search(args.seed)
    sim, mpi, paired, rows = {}, {}, {}, []
    on_mpi = args.redundancies or REDUNDANCIES
    for k in PARTITIONS:
        for omega in REDUNDANCIES:
            print(f"[bench] paper000 K={k} Ω={omega} ...", file=sys.stderr, flush=True)
            key = f"{k}/{omega}"
            sim[key] = simulated(k, omega, args.sim_jobs, args.seed)
            if k == args.mpi_partitions and omega in on_mpi:
                mpi[key] = measured(k, omega, args.jobs, args.seed, args.time_scale)
                paired[key] = simulated(k, omega, args.jobs, args.seed)  # the same jobs
            for source, numbers in (("sim", sim[key]), ("MPI", mpi.get(key))):
                if numbers is None:
                    continue
                rows.append([str(k), f"{omega:g}", source, *(f"{numbers[s]:.1f}" for s in SPLITS),
                             f"{numbers['genie']:.1f}",
                             f"{numbers['uniform'] / numbers['optimal']:.2f}",
                             f"{numbers['optimal'] / numbers['genie']:.2f}",
                             f"{numbers['adaptive'] / numbers['optimal']:.2f}"])
    print(f"paper000: profile paper000, K·C = {WORK:g}, λ = {RATE}, I = {ITERATIONS}; simulator "
          f"{args.sim_jobs} jobs, MPI (mpirun -n 21, K = {args.mpi_partitions}, time scale "
          f"{args.time_scale} s) {args.jobs} jobs; mean in-order delay in model time units")
    print(table(["K", "Ω", "", *SPLITS, "genie", "uni/opt", "opt/genie", "adapt/opt"], rows))
    failed = agreement([(f"K={key.replace('/', ' Ω=')} {split} in-order delay",
                         mpi[key][split], paired[key][split])
                        for key in mpi for split in (*SPLITS, "genie")])
    (out_dir / "paper000.json").write_text(json.dumps(
        {"simulator": sim, "mpi": mpi, "simulator_same_jobs": paired}, indent=1))
    print(f"raw numbers: {out_dir / 'paper000.json'}")
    if have_matplotlib():
        plot(sim, mpi, out_dir / "paper000.png")
        print(f"plot: {out_dir / 'paper000.png'}")
    return {"simulator": sim, "mpi": mpi, "simulator_same_jobs": paired, "failed": failed}
