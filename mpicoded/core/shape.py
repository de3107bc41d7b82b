"""A job's shape without its data (pure): what the Session needs of a job where there is none
to compute with (the simulator, a replay, the model tests). Theta never moves; the tasks' work,
the pieces and a re-code's partitions come from the code and the rows alone."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..codes import Code
from ..codes.partial import cut_ranges, cut_rows
from ..jobs.rows import row_blocks
from ..jobs.task import default_chunk_rows


@dataclass
class Shape:
    """``code`` over partitions of ``rows`` rows each, ``width`` entries a row; data coded
    blocks (a matrix-vector job) are ``height`` rows each, padded; ``cost``: each task's work
    (by default, results coded: its partitions; data coded: one)."""

    code: Code
    cost: np.ndarray | None = None
    rows: Sequence[int] = ()
    height: int = 0
    width: int = 1
    data_coded: bool = False
    free_loss: bool = False
    share: float = 1.0  # under mini-batches: the share of the rows a step computes
    decoded_loss: float | None = field(default=None, init=False)

    def recoded(self, code: Code) -> Shape:
        """The same data in ``code``'s partitions (cut evenly, as ``row_blocks`` does)."""
        rows = [len(r) for r in row_blocks(sum(self.rows), code.n_partitions)] \
            if self.rows else []
        height = max(rows) if self.height and rows else 0
        return Shape(code, None, rows, height, self.width, self.data_coded, self.free_loss,
                     self.share)

    def pieces(self, chunk_rows: int, fit: bool = False) -> Code:
        if self.height:
            return cut_ranges(self.code, self.height, chunk_rows, fit)
        return cut_rows(self.code, list(self.rows), chunk_rows, fit)

    def default_chunk_rows(self) -> int:
        return default_chunk_rows(self.width, self.height or max(self.rows, default=0),
                                  self.share)

    def task_cost(self) -> np.ndarray:
        if self.cost is not None:
            return self.cost
        if self.data_coded:
            return np.ones(self.code.n_tasks)
        return self.code.work_units

    def theta0(self) -> np.ndarray:
        return np.zeros(1)

    def update(self, theta: np.ndarray, decoded: np.ndarray, missing: np.ndarray,
               step: int) -> np.ndarray:
        return theta
