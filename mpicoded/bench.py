"""``python -m mpicoded.bench SCENARIO``: side-by-side comparisons measured in one run.

- ``purge``: one persistent 10x straggler among 6 workers, 50 iterations; uncoded vs frc vs cyclic
  under the same seed, plus frc without purging (how public peers run). Mean iteration time,
  makespan, purged tasks, and each speedup over uncoded.
- ``overhead``: no injected delay, 20 workers: mpicoded's uncoded iteration time vs a minimal
  plain-mpi4py gradient loop on the same data, as a ratio.
- ``decode``: per-iteration decode time against n_workers, for the structured decoders (gfrc,
  cpgc up to 1000 workers) and the generic one (cyclic, sparse up to 200). No MPI.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .launcher import run_mpi

TIMEOUT_S = 600


def train_run(ranks: int, flags: list[str]) -> dict:
    """One mpicoded.train run; returns its final run record."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.jsonl"
        done = run_mpi(ranks, ["-m", "mpicoded.train", *flags, "--quiet", "--metrics", str(path)],
                       timeout=TIMEOUT_S)
        if done.returncode != 0:
            raise RuntimeError(f"mpicoded.train {' '.join(flags)} failed:\n{done.output[-3000:]}")
        return json.loads(path.read_text().splitlines()[-1])


def table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=True)]
    lines = [header, ["-" * w for w in widths], *rows]
    return "\n".join("  ".join(str(c).rjust(w) for c, w in zip(line, widths, strict=True))
                     for line in lines)


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


DECODE_CASES = (  # (code, parameters from n, largest n)
    ("gfrc", lambda n: {"stragglers": max(1, n // 10)}, 1000),
    ("cpgc", lambda n: {"load": 3}, 1000),
    ("cyclic", lambda n: {"stragglers": max(1, n // 10)}, 200),
    ("sparse", lambda n: {"redundancy": 1.25, "degree": 3}, 200),
)


def arrival_order(code, rng: np.random.Generator) -> list[int]:
    """Task results in the order they would reach the master under paper 001's delays: each
    worker draws E ~ Exp(mean 0.1) an iteration and each of its tasks takes 0.01 + E."""
    finish = []
    for tasks in code.schedule:
        step = 0.01 + rng.exponential(0.1)
        finish += [((i + 1) * step, t) for i, t in enumerate(tasks)]
    return [t for _, t in sorted(finish)]


def bench_decode(args: argparse.Namespace) -> dict:
    from .codes import make_code

    rng = np.random.default_rng(args.seed)
    rows, out = [], {}
    for name, params_of, largest in DECODE_CASES:
        for n in (n for n in (20, 50, 100, 200, 500, 1000) if n <= largest):
            code = make_code(name, n, **params_of(n))
            values = rng.standard_normal((code.n_tasks, 10))
            times, used = [], []
            for _ in range(args.iterations):
                order = arrival_order(code, rng)
                start = time.perf_counter()
                dec = code.decoder()
                for t in order:
                    if dec.add(t, values[t]):
                        break
                dec.result()
                times.append(time.perf_counter() - start)
                used.append(dec.results_used)
            mean_ms = 1e3 * float(np.mean(times))
            out[f"{name}/{n}"] = {"decoder": code.decoder_cls.__name__, "ms": mean_ms,
                                  "results_used": float(np.mean(used)), "n_tasks": code.n_tasks}
            rows.append([name, str(n), code.decoder_cls.__name__, str(code.n_tasks),
                         f"{np.mean(used):.0f}", f"{mean_ms:.2f}"])
            print(f"[bench] decode {name} n={n}: {mean_ms:.2f} ms", file=sys.stderr, flush=True)
    print(f"decode: mean per-iteration decode time (add every arriving result until ready, then "
          f"result(), 10-value results), {args.iterations} iterations each")
    print(table(["code", "n_workers", "decoder", "tasks", "results used", "ms / iteration"], rows))
    return out


SCENARIOS: dict[str, Callable[[argparse.Namespace], dict]] = {
    "purge": bench_purge,
    "overhead": bench_overhead,
    "decode": bench_decode,
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mpicoded.bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scenario", choices=sorted(SCENARIOS))
    p.add_argument("--iterations", type=int, default=None,
                   help="default 50 (purge), 200 (overhead) or 20 (decode)")
    p.add_argument("--task-time", type=float, default=0.02,
                   help="purge: seconds per unit of work; default 0.02")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="also write the numbers here")
    args = p.parse_args(argv)
    if args.iterations is None:
        args.iterations = {"purge": 50, "overhead": 200, "decode": 20}[args.scenario]
    out = SCENARIOS[args.scenario](args)
    if args.json:
        Path(args.json).write_text(json.dumps({"scenario": args.scenario, **out}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
