"""Running one task in row chunks: the only place a worker's real compute happens.

A task is ``sum over (block, coef) of coef * f(block, θ)``. Each block's rows are computed in
chunks of about 2 MB of data (a quarter to one millisecond of numpy), and ``stop()`` is asked
between chunks, so a purge interrupts a slow CPU within one chunk instead of one task. The
chunk size comes from the data's shape alone, never from a measured speed: runs stay
reproducible bit for bit. A chunked sum differs from an unchunked one only by floating-point
reassociation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np

# A block is any picklable object a job's kernel understands: an array, a sparse matrix, a tuple
# of arrays, a dict... ``Kernel.rows`` and ``Kernel.accumulate`` are what make sense of it.
Block: TypeAlias = Any
Terms = tuple[tuple[int, float], ...]  # (block key, coefficient) pairs of one task

# Matrix entries a chunk touches: 2 MB of float64. A gradient reads its chunk twice (X θ, then
# Xᵀ r), and a chunk this small is still in cache the second time: on data no cache holds,
# 10000 x 100 rows computed in 2500-row chunks take 1040-1100 µs against 1120-1500 whole.
CHUNK_ELEMENTS = 250_000


def default_chunk_rows(columns: int, rows: int = 0, share: float = 1.0) -> int:
    """Rows a chunk of a ``columns``-wide block holds: CHUNK_ELEMENTS entries. Given the
    block's ``rows``, the chunks cut it evenly, the nearest whole number of them (at most 1.5
    times the nominal size): 10000 rows at 2475 a chunk are four chunks of 2500, not four and a
    100-row remainder that costs a whole kernel call of its own. Under mini-batches a step
    computes a ``share`` of a block's rows: a chunk spans the rows of which that many are."""
    nominal = max(1, round(CHUNK_ELEMENTS // max(1, columns) / share))
    if rows <= 0:
        return nominal
    chunks = max(1, round(rows / nominal))
    return -(-rows // chunks)


@dataclass(frozen=True)
class Kernel:
    """What a job computes on a worker, row range by row range.

    ``accumulate(block, θ, start, stop, coef, out)`` adds ``coef`` times rows [start, stop) of the
    block's contribution to ``out``; ``rows(block)`` is the block's row count.
    """

    rows: Callable[[Block], int]
    accumulate: Callable[[Block, np.ndarray, int, int, float, np.ndarray], None]


def run_task(kernel: Kernel, blocks: Mapping[int, Block], terms: Terms, theta: np.ndarray,
             size: int, chunk_rows: int = 0, repeat: float = 1.0,
             stop: Callable[[], bool] | None = None) -> tuple[np.ndarray | None, float, int]:
    """The task's value (None if ``stop()`` said so between chunks), the fraction of its rows
    computed and the chunks computed.

    ``chunk_rows`` 0 computes the task whole, never asking ``stop()``. ``repeat`` > 1 computes
    every chunk that many times over (the surplus into a scratch buffer): a CPU that is really
    ``repeat`` times slower, for the ``compute`` delay model.
    """
    out = np.zeros(size)
    burn = _Burn(kernel, size, repeat - 1.0) if repeat > 1 else None
    done = chunks = 0
    ask = stop if chunk_rows > 0 else None
    for key, coef in terms:
        block = blocks[key]
        n = kernel.rows(block)
        step = chunk_rows if chunk_rows > 0 else max(n, 1)
        for start in range(0, n, step):
            if done and ask is not None and ask():  # between chunks: a finished task is sent
                total = sum(kernel.rows(blocks[k]) for k, _ in terms)
                return None, done / total, chunks
            end = min(n, start + step)
            kernel.accumulate(block, theta, start, end, coef, out)
            if burn is not None:
                burn(block, theta, start, end, coef)
            done += end - start
            chunks += 1
    return out, 1.0, chunks


def run_piece(kernel: Kernel, rows: Block, theta: np.ndarray, size: int,
              repeat: float = 1.0) -> np.ndarray:
    """The value of ``rows``, a block's row range (a piece of partial work), computed whole;
    ``repeat`` as in ``run_task``."""
    out = np.zeros(size)
    n = kernel.rows(rows)
    if n == 0:  # a mini-batch may have none of a piece's rows: their sum is zero
        return out
    kernel.accumulate(rows, theta, 0, n, 1.0, out)
    if repeat > 1:
        _Burn(kernel, size, repeat - 1.0)(rows, theta, 0, n, 1.0)
    return out


class _Burn:
    """Computes rows ``extra`` more times into a scratch buffer: whole repeats of every chunk,
    and the fractional part as rows carried over from chunk to chunk (so 1.5 is 1.5 even with
    one-row chunks)."""

    def __init__(self, kernel: Kernel, size: int, extra: float) -> None:
        self.kernel, self.scratch = kernel, np.zeros(size)
        self.whole, self.part = int(extra), extra - int(extra)
        self.owed = 0.0  # rows of the fractional part not computed yet

    def __call__(self, block: Block, theta: np.ndarray, start: int, end: int,
                 coef: float) -> None:
        for _ in range(self.whole):
            self.kernel.accumulate(block, theta, start, end, coef, self.scratch)
        self.owed += self.part * (end - start)
        rows = min(int(self.owed), end - start)
        if rows:
            self.kernel.accumulate(block, theta, start, start + rows, coef, self.scratch)
            self.owed -= rows
