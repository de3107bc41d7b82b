"""Blocks by rows: the partitions' row ranges, and a block's rows, width and entries, cut in row
chunks without copying."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np


def is_sparse(x: object) -> bool:
    """Whether ``x`` is a SciPy sparse matrix or array. SciPy is not imported for it: sparse data
    has imported it already, and a run on dense data starts without it (on every rank)."""
    sparse = sys.modules.get("scipy.sparse")
    return sparse is not None and bool(sparse.issparse(x))


def row_blocks(n_rows: int, k: int) -> list[np.ndarray]:
    """Split ``range(n_rows)`` into k contiguous, nearly equal blocks (the partitions)."""
    if k > n_rows:
        raise ValueError(f"{k} partitions need at least {k} rows of data, the job has {n_rows}")
    return np.array_split(np.arange(n_rows), k)


def row_arrays(block: Any) -> tuple[Any, ...] | None:
    """The arrays of a block that can be cut in row chunks: an array or sparse matrix, or a
    tuple of them sharing their first dimension; None for anything else."""
    parts = block if isinstance(block, tuple) else (block,)
    rows = -1  # a plain loop: this runs for every chunk a worker computes
    for p in parts:
        if not ((isinstance(p, np.ndarray) and p.ndim >= 1) or is_sparse(p)):
            return None
        if rows < 0:
            rows = p.shape[0]
        elif p.shape[0] != rows:
            return None
    return parts if rows >= 0 else None


def row_count(block: Any) -> int:
    parts = row_arrays(block)
    return 1 if parts is None else int(parts[0].shape[0])


def take_rows(block: Any, start: int, stop: int) -> Any:
    """Rows [start, stop) of a block that can be cut (``row_arrays``), its entries not copied."""
    if isinstance(block, tuple):
        return tuple(row_range(p, start, stop) for p in block)
    return row_range(block, start, stop)


def join_rows(blocks: list[Any]) -> Any:
    """Blocks that can be cut (``row_arrays``, of one kind), their rows one after another: one
    block (a copy; a single block is itself)."""
    if len(blocks) == 1:
        return blocks[0]
    if isinstance(blocks[0], tuple):
        return tuple(join_rows([b[i] for b in blocks]) for i in range(len(blocks[0])))
    if is_sparse(blocks[0]):
        import scipy.sparse as sp

        return sp.vstack(blocks, format="csr")
    return np.concatenate(blocks)


def pick_rows(block: Any, rows: np.ndarray) -> Any:
    """The given rows of a block that can be cut (``row_arrays``), in that order: a copy (a
    mini-batch's rows are scattered)."""
    if isinstance(block, tuple):
        return tuple(p[rows] for p in block)
    return block[rows]


def row_range(matrix: Any, start: int, stop: int) -> Any:
    """Rows [start, stop) of an array or a sparse matrix without copying its entries: scipy's
    slice of a CSR matrix copies them (and faults their pages in) at every call, 5.5 times
    the product of a chunk of PageRank's rows (1.9 ms against 0.34), and so does its
    constructor for arrays that view less than half of another (``prune``). Here a CSR
    matrix's rows are an empty matrix of their shape given views of its arrays. Other sparse
    formats are sliced by scipy."""
    if not is_sparse(matrix) or matrix.format != "csr" or not 0 <= start <= matrix.shape[0]:
        return matrix[start:stop]
    stop = max(start, min(stop, matrix.shape[0]))
    lo, hi = matrix.indptr[start], matrix.indptr[stop]
    rows = type(matrix)((stop - start, matrix.shape[1]), dtype=matrix.dtype)
    rows.data, rows.indices = matrix.data[lo:hi], matrix.indices[lo:hi]
    rows.indptr = matrix.indptr[start:stop + 1] - lo
    return rows


def row_width(block: Any) -> int:
    """Matrix entries a row of the block holds (non-zeros for sparse), for the chunk size."""
    parts = row_arrays(block)
    if parts is None:
        return 1
    width = 0
    for p in parts:
        if is_sparse(p):
            width += max(1, p.nnz // max(1, p.shape[0]))
        else:
            width += int(np.prod(p.shape[1:], dtype=np.int64))
    return max(1, width)


def entry_count(block: Any) -> int:
    """Matrix entries a block multiplies: rows x columns (non-zeros where sparse)."""
    return row_count(block) * row_width(block)
