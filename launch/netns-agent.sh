#!/usr/bin/env bash
# Open MPI's launcher calls this instead of ssh (--prtemca plm_ssh_agent): $1 is a host address
# 10.77.0.(10+i), the rest the command to start there: run it inside network namespace h<i>.
# With MPICODED_THROTTLE_DIR set (netns-cluster.sh run --throttle), first join host h<i>'s cpu
# group, so its daemon and ranks run under that host's CPU quota; an unthrottled host leaves the
# group of h0 (mpirun's) that this agent inherited.
host=$1
shift
i=$(( ${host##*.} - 10 ))
dir=${MPICODED_THROTTLE_DIR:-}
if [[ -n $dir && -d $dir/h$i ]]; then
  echo $$ >"$dir/h$i/cgroup.procs" || exit 1
elif [[ -n $dir && -d $dir/h0 ]]; then
  echo $$ >"$dir/../cgroup.procs" || exit 1
fi
exec ip netns exec "h$i" unshare --uts /bin/sh -c "hostname h$i; $*"
