#!/usr/bin/env bash
# Brings up a real single-node Slurm (Debian's packages), submits launch/slurm.sbatch with
# sbatch --wait (srun --mpi=pmix, then mpirun inside the allocation), checks the metrics, tears
# the cluster down. Root with apt only; otherwise it says why it skips. Needs .venv (ci/test.sh).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null; then
  echo "slurm test: SKIPPED (needs root and apt-get to install a throwaway Slurm)"
  exit 0
fi
if ! { command -v slurmctld >/dev/null && command -v sbatch >/dev/null &&
       dpkg -s libpmix-dev >/dev/null 2>&1; } ; then
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
         --no-install-recommends slurmctld slurmd slurm-client munge libpmix-dev; } >/tmp/slurm-apt.log 2>&1; then
    echo "slurm test: SKIPPED (the Debian packages could not be installed; see /tmp/slurm-apt.log)"
    exit 0
  fi
fi
dir=$(mktemp -d /tmp/mpicoded-slurm.XXXXXX)
mkdir -p "$dir"/{state,spool,jobs}
host=$(hostname -s)
sed "s|HOST|$host|g; s|DIR|$dir|g" "$root/ci/slurm/slurm.conf.in" >"$dir/slurm.conf"
export SLURM_CONF=$dir/slurm.conf
cleanup() {
  for f in "$dir/slurmd.pid" "$dir/slurmctld.pid"; do
    [[ -f $f ]] && kill "$(cat "$f")" 2>/dev/null
  done
  if [[ ${started_munge:-} == yes && -f /run/munge/munged.pid ]]; then
    kill "$(cat /run/munge/munged.pid)" 2>/dev/null
  fi
  sleep 1
}
trap cleanup EXIT
mkdir -p /run/munge /var/log/munge /var/lib/munge
chown munge: /run/munge /var/log/munge /var/lib/munge
if [[ ! -f /etc/munge/munge.key ]]; then
  dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
  chown munge: /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
fi
if ! { [[ -f /run/munge/munged.pid ]] && kill -0 "$(cat /run/munge/munged.pid)" 2>/dev/null; }; then
  runuser -u munge -- /usr/sbin/munged
  started_munge=yes
fi
/usr/sbin/slurmctld -f "$SLURM_CONF"
/usr/sbin/slurmd -f "$SLURM_CONF"
for _ in $(seq 60); do
  [[ $(sinfo -h -o %T 2>/dev/null) == *idle* ]] && break
  sleep 0.5
done
status=0
for launcher in srun mpirun; do
  start=$(date +%s)
  ( cd "$dir/jobs" && MPICODED_ROOT=$root MPICODED_LAUNCHER=$launcher timeout -k 10 300 \
      sbatch --wait --ntasks=5 --overcommit --output="$dir/jobs/%j.out" \
      "$root/launch/slurm.sbatch" --iterations 8 --samples 2000 --quiet >"$dir/submit.log" 2>&1 )
  rc=$?
  job=$(sed -n 's/^Submitted batch job \([0-9][0-9]*\).*/\1/p' "$dir/submit.log")
  metrics=$dir/jobs/mpicoded-$job.jsonl
  if [[ $rc == 0 ]] && "$root/.venv/bin/python" - "$metrics" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
run = rows[-1]
assert run["record"] == "run" and run["n_workers"] == 4 and run["iterations"] == 8, run
assert run["final_loss"] < run["initial_loss"]
PY
  then
    echo "slurm test ($launcher): passed in $(( $(date +%s) - start )) s"
  else
    echo "slurm test ($launcher): FAILED (sbatch exit $rc)"
    cat "$dir/submit.log" "$dir"/jobs/*.out 2>/dev/null | tail -30
    status=1
  fi
done
exit $status
