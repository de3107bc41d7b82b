#!/usr/bin/env bash
# worker: run sshd in the foreground, so the master's mpirun can start ranks here.
# master [train flags...]: wait for the workers, write a hostfile, run mpicoded.train across
#   them (rank 0 here) and exit with its status. WORKERS (default 4) is how many to wait for.
set -euo pipefail
role=${1:-worker}
shift || true
if [[ $role == worker ]]; then
  exec /usr/sbin/sshd -D -e -f /home/mpi/sshd_config
fi
/usr/sbin/sshd -f /home/mpi/sshd_config  # the master runs ranks of its own too
want=${WORKERS:-4}
for _ in $(seq 120); do
  mapfile -t hosts < <(getent ahostsv4 "${WORKER_SERVICE:-worker}" | awk '{print $1}' | sort -u)
  (( ${#hosts[@]} >= want )) && break
  sleep 1
done
(( ${#hosts[@]} >= want )) || { echo "mpicoded: only ${#hosts[@]} of $want workers came up" >&2; exit 1; }
slots=${SLOTS_PER_WORKER:-5}
{
  echo "localhost slots=1"
  for h in "${hosts[@]}"; do echo "$h slots=$slots"; done
} > /home/mpi/hostfile
for h in "${hosts[@]}"; do  # every sshd answers before mpirun starts
  until ssh -o ConnectTimeout=2 "$h" true 2>/dev/null; do sleep 1; done
done
ranks=$(( 1 + want * slots ))
echo "mpicoded: $ranks ranks on $want workers: $(tr '\n' ' ' < /home/mpi/hostfile)"
exec mpirun -n "$ranks" --hostfile /home/mpi/hostfile --map-by slot \
  -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS -x MKL_NUM_THREADS \
  python -m mpicoded.train "$@"
