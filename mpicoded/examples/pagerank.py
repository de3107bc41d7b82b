"""PageRank of a graph file with coded matrix-vector products:
``mpirun -n 7 python -m mpicoded.examples.pagerank [EDGES.txt]``. EDGES.txt is an edge list as
SNAP writes it (e.g. web-Google.txt); without one, a synthetic power-law graph is written to a
temporary file first (removed at the end), to show the whole path.
"""

import os
import sys
import tempfile

import numpy as np

import mpicoded
from mpicoded.jobs import PageRank
from mpicoded.jobs.pagerank import power_law_graph


def example_graph() -> str:
    """A synthetic graph of 5000 nodes written as a SNAP edge list (rank 0 reads it)."""
    src, dst = power_law_graph(5000, 8.0, seed=1)
    path = tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False).name
    np.savetxt(path, np.column_stack([src, dst]), fmt="%d", delimiter="\t",
               header="Directed graph\nFromNodeId\tToNodeId")
    return path


if __name__ == "__main__":
    graph = sys.argv[1] if len(sys.argv) > 1 else example_graph()
    try:
        job = PageRank(graph=graph)
        # sparse code, target each: a coded block mixes 3 partitions' rows, so it stays sparse
        result = mpicoded.run(job, code="sparse", target="each", redundancy=1.5, iterations=40,
                              delay="seed001", time_scale=0.05, quiet=True)
    finally:
        if len(sys.argv) == 1:
            os.unlink(graph)
    if result is not None:
        print(f"pagerank of {job.n} nodes: residual {result.losses[-1]:.2e}, "
              f"sum {result.theta.sum():.6f}")
        print(job.summary(result.theta))
