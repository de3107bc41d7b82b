#!/usr/bin/env bash
# What the later layers of ci/test.sh install, done at once in the background while the first
# layers run (it is mostly waiting on disk and the package mirrors): the MPICH venv, and, as root
# with apt, the Debian packages of the docker, Slurm and browser layers in one apt transaction.
# Each layer still installs what is missing itself, so a failure here only costs time.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# shellcheck source=launch/venv.sh
source launch/venv.sh
mpicoded_venv mpich,test,examples "$root/.venv-mpich" || echo "prepare: the MPICH venv failed"
if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
  want=()
  command -v dockerd >/dev/null || want+=(docker.io)
  command -v debootstrap >/dev/null || want+=(debootstrap)
  command -v slurmctld >/dev/null || want+=(slurmctld slurmd slurm-client munge)
  dpkg -s libpmix-dev >/dev/null 2>&1 || want+=(libpmix-dev)
  command -v chromium >/dev/null || want+=(chromium)
  if (( ${#want[@]} )); then
    { apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${want[@]}"; } >/tmp/mpicoded-prepare-apt.log 2>&1 ||
      echo "prepare: apt-get install ${want[*]} failed (the layers try again themselves)"
  fi
fi
echo "prepare: done in ${SECONDS} s"
