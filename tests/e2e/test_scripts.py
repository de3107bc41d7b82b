"""Usage errors of the launch/ scripts: one line naming the problem, exit status 2, before
anything starts (no venv install, no mpirun); the ``mpicoded`` command and its subcommands."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mpicoded import __version__
from mpicoded.cli import SUBCOMMANDS
from mpicoded.launcher.command import mpi_env

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("script", "args", "message"), [
    ("local.sh", ["-n"], "launch/local.sh: -n needs a number of ranks"),
    ("local.sh", ["--throttle"], "launch/local.sh: --throttle needs RANK=FRACTION[,...]"),
    ("local.sh", ["-n", "x"], "mpicoded.launcher: error: -n 'x': expected a number of ranks"),
    ("local.sh", ["--throttle", "3=2"], "FRACTION must be a share of one core in [0.001, 1]"),
    ("netns-cluster.sh", ["run", "x"], "RANKS must be a number of ranks, got 'x'"),
    ("netns-cluster.sh", ["run", "3", "--throttle"], "--throttle needs a SPEC, e.g. h1=0.25"),
])
def test_launch_usage_errors_are_one_line_exit_2(script, args, message):
    if script == "netns-cluster.sh" and os.geteuid() != 0:
        pytest.skip("netns-cluster.sh is for root only")
    done = subprocess.run([str(ROOT / "launch" / script), *args], capture_output=True,
                          text=True, timeout=120)
    lines = [s for s in done.stderr.splitlines() if s.strip() and not s.startswith("[mpicoded]")]
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(lines) == 1 and message in lines[0], done.stderr[-2000:]


def mpicoded(*args: str) -> subprocess.CompletedProcess:
    """The installed ``mpicoded`` command (the console script beside this Python)."""
    command = Path(sys.executable).parent / "mpicoded"
    return subprocess.run([str(command), *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **mpi_env()})


def test_mpicoded_command_lists_its_subcommands():
    done = mpicoded("--help")
    assert done.returncode == 0, done.stderr
    assert all(f"  {name}" in done.stdout for name in SUBCOMMANDS), done.stdout
    assert mpicoded("--version").stdout == f"mpicoded {__version__}\n"
    wrong = mpicoded("trian")
    assert wrong.returncode == 2 and "no subcommand 'trian'" in wrong.stderr
    bare = mpicoded()  # no subcommand: a usage error, the usage on stderr
    assert bare.returncode == 2 and bare.stdout == "" and "subcommands:" in bare.stderr


@pytest.mark.parametrize("name", list(SUBCOMMANDS))
def test_each_subcommand_has_its_own_help(name):
    """``mpicoded NAME --help`` is that module's own help, exit 0 (train's needs no mpirun)."""
    done = mpicoded(name, "--help")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout, done.stdout[-2000:]
