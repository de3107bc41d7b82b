"""End to end: the coded MapReduce job over MPI (paper 002)."""

from __future__ import annotations

import json

import pytest

from mpicoded.launcher.process import run_mpi


def cdc(storage, files, *flags, tmp_path, timeout=120):
    path = tmp_path / "cdc.json"
    done = run_mpi(len(storage), ["-m", "mpicoded.cdc", "--storage", ",".join(map(str, storage)),
                                  "--files", str(files), "--json", str(path), *flags],
                   timeout=timeout)
    return done, (json.loads(path.read_text()) if done.returncode == 0 else None)


@pytest.mark.parametrize("job", ["wordcount", "sort"])
def test_paper_example_over_mpi(tmp_path, job):
    done, r = cdc([6, 7, 7], 12, "--job", job, tmp_path=tmp_path)
    assert done.returncode == 0, done.output[-3000:]
    assert r["verified"] and r["load"] == 12 and r["uncoded_load"] == 16
    assert r["bytes_sent"] == 12 * r["value_bytes"]
    assert r["uncoded_bytes_sent"] == 16 * r["value_bytes"]


def test_half_integer_load_in_packets(tmp_path):
    done, r = cdc([5, 5, 5], 12, tmp_path=tmp_path)
    assert done.returncode == 0, done.output[-3000:]
    assert r["verified"] and r["load"] == 19.5
    assert r["bytes_sent"] == 19.5 * r["value_bytes"]


@pytest.mark.parametrize("storage", [[5, 6, 7, 8], [6, 6, 6, 6, 6], [4, 6, 8, 10, 12, 14]])
def test_more_nodes_verified(tmp_path, storage):
    done, r = cdc(storage, 12 if len(storage) < 6 else 24, tmp_path=tmp_path)
    assert done.returncode == 0, done.output[-3000:]
    assert r["verified"] and r["load"] <= r["uncoded_load"]
    assert r["bytes_sent"] == r["load"] * r["value_bytes"]


def test_uncoded_flag(tmp_path):
    done, r = cdc([6, 7, 7], 12, "--uncoded", tmp_path=tmp_path)
    assert done.returncode == 0 and r["load"] == 16 and r["verified"]


@pytest.mark.parametrize(("storage", "files", "message"), [
    ([3, 3, 3], 12, "fewer than N=12"),
    ([13, 6, 6], 12, "out of range"),
    ([6, 7], 12, "--storage lists 2 nodes but the job has 3 ranks"),
])
def test_bad_input_exits_2(tmp_path, storage, files, message):
    path = tmp_path / "cdc.json"
    done = run_mpi(3, ["-m", "mpicoded.cdc", "--storage", ",".join(map(str, storage)),
                       "--files", str(files), "--json", str(path)], timeout=60)
    assert done.returncode == 2, done.output[-2000:]
    errors = [line for line in done.output.splitlines() if line.startswith("mpicoded.cdc: error:")]
    assert len(errors) == 1 and message in errors[0]
    assert "Traceback" not in done.output


def test_a_failing_rank_ends_the_job_instead_of_hanging_it(tmp_path):
    """Rank 1 fails before the shuffle's collectives: every rank must go, not wait for ever."""
    script = tmp_path / "fail.py"
    script.write_text(
        "from mpi4py import MPI\n"
        "import mpicoded.cdc.__main__ as cdc\n"
        "if MPI.COMM_WORLD.Get_rank() == 1:\n"
        "    def broken(*args, **kwargs):\n"
        "        raise RuntimeError('disk on fire')\n"
        "    cdc.make_files = broken\n"
        "cdc.main(['--storage', '6,7,7', '--files', '12'])\n")
    done = run_mpi(3, [str(script)], timeout=60)
    assert done.returncode != 0
    assert "mpicoded.cdc: rank 1 failed" in done.output and "disk on fire" in done.output
