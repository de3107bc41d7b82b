"""What a run reports: progress records (the ``mpicoded`` logger), the metrics records, the
final summary table, and the saved model."""

from __future__ import annotations

import json
import resource
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np

from . import checkpoint as ckpt
from .log import logger
from .plan import Plan, job_settings
from .stream import genie_iteration_time, serve_in_order

if TYPE_CHECKING:
    from .core.result import IterationRecord, JobRecord, RunResult


def recorded_iterations(path: str, job: int) -> set[int]:
    """Iterations of ``job`` a metrics file already has records of (a torn last line aside)."""
    done = set()
    with open(path) as f:
        for line in f:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if row.get("record") == "iteration" and row.get("job") == job:
                done.add(int(row["iteration"]))
    return done


def save_output(path: str, result: RunResult, stream: bool) -> None:
    """The final theta, or for a stream one row a job this run served."""
    array = np.stack(result.job_thetas) if stream else result.theta
    ckpt.write_atomically(path, lambda f: np.save(f, array))


class Progress:
    """Rank 0's progress: about ten log records a job (each with ``progress`` = (iteration,
    iterations), which the CLI draws as a bar on a terminal), and the metrics records."""

    def __init__(self, total: int, quiet: bool, metrics: TextIO | None, jobs: int = 1,
                 traffic: Callable[[], tuple[int, int]] | None = None) -> None:
        """``traffic()``: rank 0's bytes received and sent so far (each iteration's record gets
        what they grew by since the last)."""
        self.total, self.quiet, self.metrics, self.jobs = total, quiet, metrics, jobs
        self.traffic = traffic
        self.counted = (0, 0)
        self.every = max(1, total // 10)
        self.wall = 0.0
        self.seen = 0
        self.purged = 0
        self.loss: float | None = None
        self.evaluation = ""  # the newest evaluation, as progress lines show it

    def job_done(self, job: JobRecord) -> None:
        if self.metrics is not None:
            self.metrics.write(json.dumps({"record": "job", **job.__dict__}) + "\n")
        if not self.quiet and self.jobs > 1:
            logger.info("job %d/%d done: in-order delay %.3f s, loss %s", job.job + 1,
                        self.jobs, job.in_order_delay_s, shown(job.final_loss))

    def __call__(self, record: IterationRecord, loss: float | None,
                 theta: np.ndarray | None = None) -> None:
        self.wall += record.wall_s
        self.seen += 1
        self.purged += record.purged_tasks
        self.loss = loss if loss is not None else self.loss
        if self.metrics is not None:
            row = {"record": "iteration", **record.__dict__, "loss": loss}
            if self.traffic is not None:
                now = self.traffic()
                row["master_bytes_in"], row["master_bytes_out"] = (
                    now[0] - self.counted[0], now[1] - self.counted[1])
                self.counted = now
            self.metrics.write(json.dumps(row) + "\n")
        done = record.iteration + 1
        if self.quiet or not (done % self.every == 0 or done == self.total):
            return
        where = f"job {record.job + 1}/{self.jobs} " if self.jobs > 1 else ""
        if record.evaluation:
            self.evaluation = "".join(f"  {name} {shown(value)}"
                                      for name, value in record.evaluation.items())
        logger.info("%siteration %d/%d  loss %s%s  mean %.1f ms/it  purged %d", where, done,
                    self.total, shown(self.loss), self.evaluation, self.wall / self.seen * 1e3,
                    self.purged, extra={"progress": (done, self.total)})


def shown(loss: float | None) -> str:
    """A loss as progress lines print it; '-' for a job that reports none."""
    if loss is None:
        return "-"
    return f"{loss:.6f}" if loss == 0 or abs(loss) >= 1e-3 else f"{loss:.3e}"


def run_record(plan: Plan, result: RunResult, n_workers: int, initial_loss: float | None,
               master_max_pending: int = 0, chunk_rows: int = 0, placed_bytes: int = 0,
               master_result_cpu: tuple[float, int] = (0.0, 0),
               master_bytes: tuple[int, int] = (0, 0)) -> dict[str, Any]:
    """The final metrics line: config, code, totals and the makespan."""
    records = result.records
    wall = [r.wall_s for r in records]
    return {
        "record": "run",
        "config": {k: v for k, v in asdict(plan.options).items() if k != "metrics"},
        "job": {**job_settings(plan.job.job), **plan.job.describe()},
        "code": plan.code.describe(),
        "delay": plan.delay.describe(),
        "n_workers": n_workers,
        "tolerance_partitions": plan.tolerance,
        "iterations": len(records),
        "mean_iteration_s": sum(wall) / len(wall),
        "makespan_s": result.makespan_s,
        "job_done_s": result.jobs[-1].done_s if result.jobs else 0.0,
        "chunk_rows": chunk_rows,
        "placed_bytes": placed_bytes,
        "initial_loss": initial_loss,
        "final_loss": result.losses[-1],
        **{f"total_{k}": v for k, v in result.totals.items()},
        "worker_dropped_tasks": sum(c[2] for c in result.worker_counters.values()),
        "worker_computed_tasks": sum(c[0] for c in result.worker_counters.values()),
        "worker_computed_rows": sum(c[3] for c in result.worker_counters.values()),
        "workers": [{"rank": w + 1, "computed_tasks": c[0], "sent_results": c[1],
                     "dropped_tasks": c[2], "computed_rows": c[3]}
                    for w, c in sorted(result.worker_counters.items())],
        **stream_summary(plan, result),
        "failed_workers": int(result.totals.get("failed_workers", 0)),
        "recodes": result.recodes,
        "master_max_pending_sends": master_max_pending,
        "master_cpu_per_result_us": (1e6 * master_result_cpu[0] / master_result_cpu[1]
                                     if master_result_cpu[1] else None),
        "master_maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        # rank 0's bytes over the run (the set-ups' aside: placed_bytes), in and out
        "master_bytes_in": master_bytes[0], "master_bytes_out": master_bytes[1] - placed_bytes,
        "final_theta": [float(v) for v in result.theta] if len(result.theta) <= 1000 else None,
    }


def stream_summary(plan: Plan, result: RunResult) -> dict[str, Any]:
    """Jobs, mean in-order delay, and the genie's lower bound for the same realized delays."""
    delay, code = plan.delay, plan.code
    genie = [sum(delay.seconds(genie_iteration_time(delay, code.n_workers, j, it,
                                                    code.n_partitions))
                 for it in range(plan.options.iterations)) for j in range(len(result.jobs))]
    bound = serve_in_order(plan.arrivals_s, genie)
    out: dict[str, Any] = {
        "jobs": len(result.jobs),
        "mean_in_order_delay_s": float(np.mean([j.in_order_delay_s for j in result.jobs])),
        "genie_mean_in_order_delay_s": float(np.mean(bound.delay))}
    if plan.splitter is not None:
        out["split"] = plan.splitter.kind
        out["final_loads"] = result.final_loads  # over the survivors after a re-code
    return out


def megabytes(n: float) -> str:
    return f"{n / 1e6:.3g} MB" if n >= 1e5 else f"{n / 1e3:.3g} kB"


def data_path(record: dict[str, Any]) -> str:
    """Rank 0's bytes an iteration, in and out, and how results are added up."""
    its = max(1, record["iterations"])
    how = ("results summed by the workers" if record.get("config", {}).get("reduce") == "on" else
           "every result to rank 0")
    if record.get("board_workers"):
        how += f"; θ on its board for the {record['board_workers']} workers on its node"
    return (f"{megabytes(record['master_bytes_in'] / its)} in, "
            f"{megabytes(record['master_bytes_out'] / its)} out an iteration ({how})")


def summary_table(record: dict[str, Any]) -> str:
    rows = [
        ("iterations", f"{record['iterations']}"),
        ("mean iteration", f"{record['mean_iteration_s'] * 1e3:.1f} ms"),
        ("job done", f"{record['job_done_s']:.3f} s"),
        ("makespan", f"{record['makespan_s']:.3f} s"),
        ("results received", f"{record['total_results_received']:.0f}"),
        ("stale results dropped", f"{record['total_stale_results']:.0f}"),
        ("tasks purged", f"{record['total_purged_tasks']:.0f}"),
        ("loss", f"{shown(record['initial_loss'])} -> {shown(record['final_loss'])}"),
    ]
    if "master_bytes_in" in record:
        rows.append(("rank 0's bytes", data_path(record)))
    if "stragglers" in record:  # with the task trace
        rows.append(("stragglers", ", ".join(f"rank {r} ({x:.2f}x the median worker's speed)"
                                             for r, x in record["stragglers"].items())
                     or "none"))
    if "handed" in record:  # partial work: the three ranks that handed the most
        handed = sorted(record["handed"].items(), key=lambda rn: (-rn[1], int(rn[0])))
        said = ", ".join(f"rank {r}: {n} piece{'s' * (n != 1)}" for r, n in handed[:3])
        if len(handed) > 3:
            said += (f", {len(handed) - 3} more ranks ({sum(n for _, n in handed)} pieces "
                     "in all)")
        rows.append(("handed to others", said or "none"))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)
