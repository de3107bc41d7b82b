"""The MPI runtime: the only package (with cdc) that imports mpi4py."""
