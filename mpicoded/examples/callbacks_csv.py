"""Logging a run from your program: ``mpirun -n 7 python -m mpicoded.examples.callbacks_csv
[OUT.csv]``. A callback writes one CSV row an iteration (what a TensorBoard or MLflow logger
would take: step, wall time, loss, the parameters' norm), and the standard ``logging`` module
shows mpicoded's progress records with the rank each comes from."""

import csv
import logging
import sys

import numpy as np

import mpicoded
from mpicoded.jobs import LogReg


class CsvLog:
    """A callback: ``callback(record, loss, theta)`` on rank 0 after every iteration."""

    def __init__(self, path: str) -> None:
        self.file = open(path, "w", newline="")  # noqa: SIM115 - closed by close()
        self.rows = csv.writer(self.file)
        self.rows.writerow(["iteration", "wall_s", "loss", "theta_norm", "purged_tasks"])
        self.wall = 0.0

    def __call__(self, record: mpicoded.IterationRecord, loss: float | None,
                 theta: np.ndarray) -> None:
        self.wall += record.wall_s
        self.rows.writerow([record.iteration, f"{self.wall:.6f}",
                            "" if loss is None else f"{loss:.9g}",
                            f"{np.linalg.norm(theta):.9g}", record.purged_tasks])

    def close(self) -> None:
        self.file.close()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s rank %(rank)s: %(message)s")
    path = sys.argv[1] if len(sys.argv) > 1 else "run.csv"
    log = CsvLog(path)
    result = mpicoded.run(LogReg(samples=20000, features=30, seed=1), code="gfrc", stragglers=2,
                          iterations=30, delay="persistent", slow_workers=[3], slow_factor=20,
                          task_time=0.002, callbacks=[log])
    log.close()
    if result is not None:
        print(f"callbacks_csv: {len(result.losses)} iterations logged to {path}, final loss "
              f"{result.losses[-1]:.6f}")
