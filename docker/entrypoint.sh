#!/usr/bin/env bash
# worker: make this container's host key and run sshd in the foreground, letting in only the key
#   the master publishes in the cluster volume (/cluster/authorized_keys), so that the master's
#   mpirun can start ranks here.
# master [train flags...]: make the cluster's key pair (the private half never leaves this
#   container), wait for WORKERS workers (default 4) to answer ssh, write a hostfile and run
#   mpicoded.train across them (rank 0 here) with TRAIN_ARGS then the flags given; exit with its
#   status. FT=1 runs Open MPI's ULFM (the run survives dead workers, e.g. a killed container).
set -euo pipefail
role=${1:-worker}
shift || true
keys=/home/mpi/.ssh
if [[ $role == worker ]]; then
  [[ -f $keys/host_key ]] || ssh-keygen -q -t ed25519 -N "" -f "$keys/host_key"
  exec /usr/sbin/sshd -D -e -f /home/mpi/sshd_config
fi
[[ $role == master ]] || { echo "mpicoded: role must be master or worker, not '$role'" >&2; exit 2; }
[[ -f $keys/id_ed25519 ]] || ssh-keygen -q -t ed25519 -N "" -f "$keys/id_ed25519"
cp "$keys/id_ed25519.pub" /cluster/authorized_keys.new  # replaced whole: sshd reads it per login
chmod 644 /cluster/authorized_keys.new
mv /cluster/authorized_keys.new /cluster/authorized_keys
[[ -w /home/mpi/output ]] || echo "mpicoded: note: /home/mpi/output (OUTPUT on the host) is not" \
  "writable by uid 1000: files written there will fail" >&2
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
for h in "${hosts[@]}"; do  # every sshd answers (and lets this key in) before mpirun starts
  for _ in $(seq 60); do
    ssh -o ConnectTimeout=2 -o BatchMode=yes "$h" true 2>/dev/null && continue 2
    sleep 1
  done
  echo "mpicoded: worker $h does not answer ssh" >&2; exit 1
done
read -ra train <<< "${TRAIN_ARGS:-}"
ranks=$(( 1 + want * slots ))
ft=()
if [[ ${FT:-0} == 1 ]]; then  # the launcher's ULFM flags, in mpicoded.launcher.command; the containers
  # share this machine's cores, so the load is every rank over them
  flags=$(python -c "from mpicoded.launcher.command import ft_flags; print(*ft_flags($ranks / $(nproc)))")
  read -ra ft <<< "$flags"
fi
echo "mpicoded: $ranks ranks on $want workers: $(tr '\n' ' ' < /home/mpi/hostfile)"
# python by its full path: a rank started over ssh has the default PATH, without the venv
run=(mpirun -n "$ranks" --hostfile /home/mpi/hostfile --map-by slot
  ${ft[@]+"${ft[@]}"} -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS -x MKL_NUM_THREADS
  "$(command -v python)" -m mpicoded.train ${train[@]+"${train[@]}"} "$@")
(( ${#ft[@]} )) || exec "${run[@]}"
# Under ULFM, mpirun exits 0 even when its runtime ended the job for a lost daemon (a worker
# container gone): say so, and fail.
status=0
"${run[@]}" 2>&1 | tee /tmp/mpirun.log || status=${PIPESTATUS[0]}
if (( status == 0 )) && grep -q "lost communication with a remote daemon" /tmp/mpirun.log; then
  echo "mpicoded: a worker container was lost: Open MPI ended the job" >&2
  status=1
fi
exit "$status"
