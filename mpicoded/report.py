"""``python -m mpicoded.report METRICS.jsonl [--out DIR] [--html]``: a summary of a run's
metrics, PNG plots (iteration time, purged and stale work, loss) when matplotlib is installed,
and with ``--html`` one self-contained page with the dashboard's plots (the task stream too)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from .core.trace import FINISHED, OUTCOMES
from .dashboard import missing_extra
from .speeds import speed_lines

Record = dict[str, Any]  # one line of a metrics file


def read(path: Path) -> tuple[list[Record], list[Record], Record, list[Record]]:
    """Iteration, job, run and task records of a metrics file; ValueError if it is not one."""
    try:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a mpicoded metrics file: {exc}") from None
    its = [r for r in rows if r.get("record") == "iteration"]
    jobs = [r for r in rows if r.get("record") == "job"]
    runs = [r for r in rows if r.get("record") == "run"]
    if not its:
        raise ValueError(f"{path}: no iteration records (was it written by mpicoded.train?)")
    tasks = [r for r in rows if r.get("record") == "task"]
    return its, jobs, runs[-1] if runs else {}, tasks


def summary(its: list[Record], jobs: list[Record], run: Record,
            tasks: list[Record] | None = None) -> str:
    wall = np.array([r["wall_s"] for r in its])
    rows = [
        ("iterations", f"{len(its)}"),
        ("iteration time", f"mean {wall.mean() * 1e3:.1f} ms, median {np.median(wall) * 1e3:.1f} "
                           f"ms, p95 {np.percentile(wall, 95) * 1e3:.1f} ms"),
        ("results used / received", f"{np.mean([r['results_used'] for r in its]):.1f} / "
                                    f"{np.mean([r['results_received'] for r in its]):.1f} an "
                                    "iteration"),
        ("messages, volume", f"{np.mean([r['messages'] for r in its]):.1f}, "
                             f"{np.mean([r['volume'] for r in its]):.2f} an iteration"),
        ("purged tasks", f"{sum(r['purged_tasks'] for r in its)}"),
        ("stale results", f"{sum(r['stale_results'] for r in its)}"),
        ("missing partitions", f"{sum(r['missing_partitions'] for r in its)}"),
    ]
    # from the loss before the first step (the run record's), as train prints it
    losses = [run.get("initial_loss")] if run else []
    losses = [x for x in losses + [r.get("loss") for r in its] if x is not None]
    if losses:
        rows.append(("loss", f"{losses[0]:.6f} -> {losses[-1]:.6f}"))
    if run:
        rows.append(("code", f"{run['code']['name']} ({run['code'].get('n_tasks')} tasks, "
                             f"{run['n_workers']} workers)"))
        if run.get("job_done_s") is not None:
            rows.append(("job done", f"{run['job_done_s']:.3f} s"))
        rows.append(("makespan", f"{run['makespan_s']:.3f} s"))
        if run.get("failed_workers"):
            rows.append(("failed workers", f"{run['failed_workers']} ({run['recodes']} re-codes)"))
    if len(jobs) > 1:  # a stream: one job has no in-order delay to speak of
        delay = np.array([j["in_order_delay_s"] for j in jobs])
        rows.append(("jobs", f"{len(jobs)}, mean in-order delay {delay.mean():.3f} s"))
        if run.get("genie_mean_in_order_delay_s") is not None:
            rows.append(("genie bound", f"{run['genie_mean_in_order_delay_s']:.3f} s"))
    rows += timeline(its, tasks or [])
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def timeline(its: list[Record], tasks: list[Record]) -> list[tuple[str, str]]:
    """Where an iteration's time goes, from the task trace (medians over iterations, on rank
    0's clock): from sending it out to the workers' first, median and last task start, a task
    computed to the end, the last result used to the decode, the decode to the next send-out."""
    if not tasks:
        return []
    outcomes = {o: sum(t["outcome"] == o for t in tasks) for o in OUTCOMES}
    rows = [("task outcomes", ", ".join(f"{o} {n}" for o, n in outcomes.items()))]
    by_key: dict[tuple[Any, ...], list[Record]] = {}
    for t in tasks:
        by_key.setdefault((t["job"], t["iteration"], t.get("epoch", 0)), []).append(t)
    starts, last_used, next_out = [], [], []
    for i, it in enumerate(its):
        mine = by_key.get((it["job"], it["iteration"], it.get("epoch", 0)), [])
        begun = sorted(t["start_s"] - it["started_s"] for t in mine if t["outcome"] != "dropped")
        if begun:
            starts.append((begun[0], begun[len(begun) // 2], begun[-1]))
        decode = it["started_s"] + it["wall_s"]
        used = [t["end_s"] for t in mine if t["outcome"] == "used"]
        if used:
            last_used.append(decode - max(used))
        if i + 1 < len(its) and its[i + 1]["job"] == it["job"]:
            next_out.append(its[i + 1]["started_s"] - decode)
    done = [t["end_s"] - t["start_s"] for t in tasks
            if t["outcome"] in FINISHED]
    ms = 1e3
    if starts:
        first, middle, last = np.median(np.array(starts), axis=0) * ms
        rows.append(("sent out -> task starts", f"first {first:.3f}, median {middle:.3f}, "
                                                f"last {last:.3f} ms (medians)"))
    if done:
        rows.append(("task, start to end", f"median {np.median(done) * ms:.3f} ms"))
    if last_used:
        rows.append(("last used result -> decode", f"median {np.median(last_used) * ms:.3f} ms"))
    if next_out:
        rows.append(("decode -> next send-out", f"median {np.median(next_out) * ms:.3f} ms"))
    return rows


def plot(its: list[Record], out: Path, stem: str) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = np.arange(len(its))
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    axes[0].plot(x, [r["wall_s"] * 1e3 for r in its], lw=0.8)
    axes[0].set_ylabel("iteration time (ms)")
    axes[1].plot(x, [r["purged_tasks"] for r in its], lw=0.8, label="purged tasks")
    axes[1].plot(x, [r["stale_results"] for r in its], lw=0.8, label="stale results")
    axes[1].plot(x, [r["results_received"] for r in its], lw=0.8, label="results received")
    axes[1].set_ylabel("per iteration")
    axes[1].legend(fontsize=8)
    loss = [(i, r["loss"]) for i, r in enumerate(its) if r.get("loss") is not None]
    if loss:
        axes[2].plot(*zip(*loss, strict=True), "-o", ms=2)
    axes[2].set_ylabel("training loss")
    for ax in axes:
        ax.set_xlabel("iteration")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    path = out / f"{stem}.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return [path]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mpicoded.report", description=__doc__)
    p.add_argument("metrics", help="a JSON lines file written by mpicoded.train --metrics")
    p.add_argument("--out", default=None, help="directory for the PNG (default: beside it)")
    p.add_argument("--html", action="store_true",
                   help="also write one self-contained HTML file with the dashboard's plots "
                   "(the task stream among them), beside the PNG (needs the dashboard extra)")
    args = p.parse_args(argv)
    path = Path(args.metrics)
    try:
        its, jobs, run, tasks = read(path)
    except ValueError as exc:
        print(f"mpicoded.report: error: {exc}", file=sys.stderr)
        return 2
    print(summary(its, jobs, run, tasks))
    handed = {int(r): n for r, n in run["handed"].items()} if "handed" in run else None
    print("\n".join(speed_lines(tasks, handed)) if tasks else
          "worker speed: needs the task trace (run with --trace)")
    out = Path(args.out) if args.out else path.parent
    try:
        out.mkdir(parents=True, exist_ok=True)
        for written in plot(its, out, path.stem):
            print(f"plot: {written}")
    except ImportError:
        print("plots skipped: matplotlib is not installed (pip install 'mpicoded[plot]')")
    if args.html:
        missing = missing_extra()
        if missing:
            print(f"mpicoded.report: --html: {missing}", file=sys.stderr)
            return 2
        from .dashboard.figures import standalone_html
        from .dashboard.runlog import RunLog

        log = RunLog(str(path), keep_tasks=None)  # a report shows every task
        log.poll()
        page = out / f"{path.stem}.html"
        page.write_text(standalone_html(log, path.name))
        print(f"html: {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
