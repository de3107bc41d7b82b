"""mpirun from Python (benchmarks, end-to-end tests): right flags, hard timeout, no leftovers.
``python -m mpicoded.launcher`` runs it in the foreground, behind ``launch/local.sh``."""
