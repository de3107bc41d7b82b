"""Examples to copy: ``mpirun -n 7 python -m mpicoded.examples.NAME`` (ridge, mlp, pagerank)."""
