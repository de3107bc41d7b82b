"""PageRank (a MatVecJob): x <- d·M x + (d·(dangling mass) + 1 − d) / n, M column-stochastic.

The graph is an edge list as SNAP writes it (``#`` comments, whitespace-separated node ids, one
edge "from to" a line), or a synthetic power-law graph from a seed. Node ids are used as given:
the result is indexed by node id from 0 to the largest id and sums to 1.
"""

from __future__ import annotations

import warnings
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, cast

import numpy as np

from .data import DatasetError
from .kinds import MatVecJob

if TYPE_CHECKING:
    import scipy.sparse as sp


def read_edges(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """(from, to) node ids of an edge-list file; DatasetError if it is not one."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"graph {path}: no such file")
    try:
        with warnings.catch_warnings():  # an empty file: reported below as no edges
            warnings.simplefilter("ignore", UserWarning)
            table = np.loadtxt(path, comments="#", dtype=np.int64, ndmin=2)
    except (OSError, ValueError) as exc:
        raise DatasetError(f"graph {path}: not an edge list of integer node ids: {exc}") from None
    if table.size == 0 or table.shape[1] < 2:
        raise DatasetError(f"graph {path}: no edges (expected lines 'FROM TO')")
    if (table[:, :2] < 0).any():
        raise DatasetError(f"graph {path}: node ids must be >= 0")
    return table[:, 0], table[:, 1]


def power_law_graph(nodes: int, degree: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A directed graph with power-law out-degrees (mean ``degree``, 5% dangling nodes) whose
    edges point at nodes with power-law popularity."""
    if nodes < 2 or not degree > 0:
        raise DatasetError(f"nodes={nodes}, degree={degree}: need nodes >= 2 and degree > 0")
    rng = np.random.default_rng([seed, 11])
    raw = rng.pareto(1.5, nodes) + 1.0
    out = np.minimum(np.round(raw * degree / raw.mean()), nodes - 1).astype(np.int64)
    out[rng.random(nodes) < 0.05] = 0
    popularity = rng.permutation(nodes)
    p = (popularity + 1.0) ** -0.9
    src = np.repeat(np.arange(nodes), out)
    dst = rng.choice(nodes, size=len(src), p=p / p.sum())
    return src, dst


class PageRank(MatVecJob):
    """The stationary distribution of a random surfer with teleport probability 1 − damping."""

    name = "pagerank"

    def __init__(self, graph: str | None = None, damping: float = 0.85, nodes: int = 20000,
                 degree: float = 10.0, seed: int = 0) -> None:
        if not 0.0 < damping < 1.0:
            raise ValueError(f"damping={damping} is out of range: allowed (0, 1)")
        self.graph, self.damping, self.nodes, self.degree, self.seed = (graph, damping, nodes,
                                                                        degree, seed)

    @cached_property
    def edges(self) -> tuple[np.ndarray, np.ndarray]:
        if self.graph:
            return read_edges(self.graph)
        return power_law_graph(self.nodes, self.degree, self.seed)

    @property
    def title(self) -> str:
        src, _ = self.edges
        where = self.graph or f"synthetic(nodes={self.nodes}, degree={self.degree:g}, seed={self.seed})"
        return f"pagerank on {where}: {self.n} nodes, {len(src)} edges"

    @cached_property
    def n(self) -> int:
        src, dst = self.edges
        return int(max(src.max(), dst.max())) + 1

    @cached_property
    def out_degree(self) -> np.ndarray:
        return np.bincount(self.edges[0], minlength=self.n).astype(np.float64)

    @cached_property
    def transition(self) -> sp.csr_matrix:
        """M[i, j] = edges j -> i over j's out-degree (duplicate edges count twice)."""
        from scipy.sparse import csr_matrix  # here: no other job needs it at start

        src, dst = self.edges
        weight = 1.0 / self.out_degree[src]
        return csr_matrix((weight, (dst, src)), shape=(self.n, self.n))

    def matrix(self) -> sp.csr_matrix:
        return self.transition

    def start(self) -> np.ndarray:
        return np.full(self.n, 1.0 / self.n)

    def step(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """One power step from y = M x; a row of a missed block is taken from x as if x were
        already stationary there."""
        d = self.damping
        base = (d * x[self.out_degree == 0].sum() + 1.0 - d) / self.n
        missed = np.isnan(y)
        if missed.any():
            y = np.where(missed, (x - base) / d, y)
        new = d * y + base
        return cast(np.ndarray, new / new.sum())

    def loss(self, x: np.ndarray) -> float:
        """The L1 change one more exact step would make (rank 0 has the matrix)."""
        return float(np.abs(self.step(x, self.transition @ x) - x).sum())

    def summary(self, x: np.ndarray) -> str:
        top = np.argsort(-x, kind="stable")[:10]
        return "top nodes (id: score): " + ", ".join(f"{i}: {x[i]:.6f}" for i in top)
