"""PageRank on coded matrix-vector products: 21 ranks, seed001 delays, a power-law graph of at
least a million edges. Uncoded (every block needed) against MDS (any K of N blocks, but a coded
block mixes K partitions' rows and fills in) against the sparse code with target each (d
partitions a row: coded blocks stay sparse). Time per iteration, end to end, non-zeros a task
computes, and messages, side by side in one run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .common import table, train_run

SCHEMES = {
    "uncoded": ["--code", "uncoded"],
    "mds": ["--code", "mds", "--stragglers", "4"],
    "sparse": ["--code", "sparse", "--redundancy", "1.25", "--degree", "3"],
}


def bench_pagerank(args: argparse.Namespace) -> dict[str, Any]:
    common = ["--job", "pagerank", "--nodes", str(args.nodes), "--iterations",
              str(args.iterations), "--delay", "seed001", "--seed", str(args.seed),
              "--loss-every", "0"]
    runs = {}
    for name, flags in SCHEMES.items():
        print(f"[bench] pagerank: {name} ...", file=sys.stderr, flush=True)
        run = train_run(21, common + flags)
        job = run["job"]
        runs[name] = {
            "edges": job["matrix_nonzeros"], "mean_iteration_s": run["mean_iteration_s"],
            "makespan_s": run["makespan_s"], "task_nonzeros": job["task_nonzeros"],
            "partition_nonzeros": job["partition_nonzeros"],
            "messages": run["total_messages"], "results_received": run["total_results_received"],
            "placed_mb": run["placed_bytes"] / 2**20, "final_loss": run["final_loss"]}
    base = runs["uncoded"]
    rows = []
    for name, r in runs.items():
        r["iteration_speedup"] = base["mean_iteration_s"] / r["mean_iteration_s"]
        r["makespan_speedup"] = base["makespan_s"] / r["makespan_s"]
        rows.append([name, f"{r['mean_iteration_s'] * 1e3:.1f}", f"{r['makespan_s']:.2f}",
                     f"{r['iteration_speedup']:.2f}x", f"{r['task_nonzeros']:.0f}",
                     f"{r['task_nonzeros'] / r['partition_nonzeros']:.2f}",
                     f"{r['messages']:.0f}", f"{r['placed_mb']:.1f}", f"{r['final_loss']:.1e}"])
    print(f"pagerank, 21 ranks, {base['edges']} edges (non-zeros of M), {args.iterations} "
          "iterations, seed001 delays")
    print(table(["code", "ms/it", "makespan s", "speedup", "nnz/task", "x partition",
                 "messages", "placed MB", "residual"], rows))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "pagerank.json").write_text(json.dumps(runs, indent=2) + "\n")
    return {"runs": runs}
