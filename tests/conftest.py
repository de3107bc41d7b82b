"""Shared fixtures: one BLAS thread a rank, set before numpy loads in any test process."""

import mpicoded  # noqa: F401 - sets OPENBLAS_NUM_THREADS and friends before numpy is imported
