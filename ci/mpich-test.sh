#!/usr/bin/env bash
# The MPICH layer: a second venv (.venv-mpich) with the PyPI mpich wheel in place of Open MPI's,
# then the pytest-mpi tests under MPICH's mpiexec (Hydra) and a representative end-to-end subset
# through the launcher: the default run, purges, a user job, bad input, --help. ULFM (--ft) is
# Open MPI's: its tests are not run here, and the launcher refuses --ft under MPICH.
# Extra arguments go to every pytest run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# shellcheck source=launch/venv.sh
source launch/venv.sh
mpicoded_venv mpich,test,examples "$root/.venv-mpich"
py=$VENV/bin/python
# sed, not head: head closes the pipe early and pipefail turns mpiexec's SIGPIPE into exit 141
"$VENV/bin/mpiexec" --version | sed -n 1,2p
"$py" -c 'from mpi4py import MPI; print(MPI.Get_library_version().splitlines()[0])'

echo "== mypy against this venv's packages (no torch: an extra is checked only where installed)"
"$root/.venv/bin/python" -m mypy --python-executable "$py" mpicoded

echo "== MPI tests under MPICH (pytest-mpi, 4 ranks)"
timeout -k 10 300 "$VENV/bin/mpiexec" -n 4 \
  "$py" -m mpi4py -m pytest -q --with-mpi -p no:cacheprovider tests/mpi "$@"

echo "== end-to-end subset under MPICH"
"$py" -m pytest -q -p no:cacheprovider "$@" \
  tests/e2e/test_train.py::test_default_run_on_21_ranks \
  tests/e2e/test_train.py::test_compute_bound_straggler_is_purged_mid_task \
  tests/e2e/test_train.py::test_without_purging_stale_work_is_finished_and_dropped \
  tests/e2e/test_train.py::test_usage_errors_exit_2_with_one_line \
  tests/e2e/test_train.py::test_help_exits_0 \
  tests/e2e/test_train.py::test_partial_work_uses_a_stragglers_rows_and_equals_serial_descent \
  tests/e2e/test_jobs_cli.py::test_a_job_file_through_the_cli_equals_serial_descent \
  tests/e2e/test_jobs_cli.py::test_a_script_calling_run_equals_serial_descent \
  tests/e2e/test_jobs_cli.py::test_bad_job_values_exit_2_with_one_line
