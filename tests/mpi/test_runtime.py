"""The runtime on real MPI ranks (pytest-mpi): purging, exact decoding, worker errors carried back.

Run as ``mpirun -n 4 python -m mpi4py -m pytest --with-mpi tests/mpi`` (ci/test.sh does): a
failing rank then aborts the job instead of hanging it.
"""

from __future__ import annotations

import numpy as np
import pytest

from mpicoded.codes import make_code
from mpicoded.delays import DelayModel
from mpicoded.jobs import make_job, synthetic

MPI = pytest.importorskip("mpi4py.MPI")


def reference_theta(job, code, iterations):
    """Plain serial gradient descent with every partition: what exact decoding must reproduce."""
    theta = np.zeros(job.dim)
    for _ in range(iterations):
        dec = code.decoder()
        for t in range(code.n_tasks):
            if dec.add(t, job.compute(t, theta)):
                break
        theta = job.update(theta, dec.result(), dec.missing_partitions)
    return theta


def run(code, delay, iterations=8, jobname="logreg"):
    """Master on rank 0 returns its RunResult; workers serve and return None."""
    from mpicoded.runtime.master import Master
    from mpicoded.runtime.worker import run_worker

    comm = MPI.COMM_WORLD
    job = make_job(jobname, synthetic(jobname, 400, 5, seed=3), code)
    if comm.rank == 0:
        master = Master(comm, code, job, delay)
        master.place()
        return master.run(iterations), job
    assert run_worker(comm) == 0
    return None, job


@pytest.mark.mpi(min_size=4)
@pytest.mark.timeout(120)
def test_very_slow_worker_is_purged_and_decoding_is_exact():
    comm = MPI.COMM_WORLD
    n = comm.size - 1
    code = make_code("cyclic", n, stragglers=1)
    slow = n - 1  # the last worker is 200x slower: every iteration decodes without it
    delay = DelayModel("persistent", task_time=0.005, slow=frozenset({slow}), slow_factor=200)
    result, job = run(code, delay, iterations=8)
    if result is None:
        return
    assert len(result.records) == 8
    assert all(r.purged_tasks >= 1 for r in result.records)
    assert result.totals["purged_tasks"] >= 8
    # the slow worker dropped its task every iteration instead of finishing it
    assert result.worker_counters[slow][2] == 8 and result.worker_counters[slow][1] == 0
    # makespan: 8 fast iterations, not 8 slow tasks (one slow task alone takes 2 s)
    assert result.makespan_s < 2.0
    expected = reference_theta(job, code, 8)
    assert np.allclose(result.theta, expected, rtol=1e-9, atol=1e-12)


@pytest.mark.mpi(min_size=3)
@pytest.mark.timeout(120)
def test_uncoded_each_target_multi_message_linreg():
    comm = MPI.COMM_WORLD
    code = make_code("uncoded", comm.size - 1, target="each")
    result, job = run(code, DelayModel("none"), iterations=5, jobname="linreg")
    if result is None:
        return
    assert [r.results_received for r in result.records] == [code.n_tasks] * 5
    assert sum(r.purged_tasks for r in result.records) == 0
    assert result.records[0].volume == pytest.approx(1.0)
    assert np.allclose(result.theta, reference_theta(job, code, 5), rtol=1e-9, atol=1e-12)
    assert result.losses[-1] < job.loss(np.zeros(job.dim))


@pytest.mark.mpi(min_size=3)
@pytest.mark.timeout(120)
def test_worker_exception_is_carried_back_with_its_rank():
    from mpicoded.runtime.master import Master, worker_setup
    from mpicoded.runtime.protocol import Tag
    from mpicoded.runtime.transport import WorkerError
    from mpicoded.runtime.worker import run_worker

    comm = MPI.COMM_WORLD
    code = make_code("uncoded", comm.size - 1)
    job = make_job("logreg", synthetic("logreg", 100, 4, seed=0), code)
    if comm.rank != 0:
        assert run_worker(comm) == 0
        return
    for w, tasks in enumerate(code.schedule):
        setup = worker_setup(code, job, DelayModel(), w + 1, tasks, purge=True, kill_at=None,
                             chunk_rows=0, report_progress=False, epoch=0)
        if w == 1:  # a block whose shape cannot meet theta: the task raises on rank 2
            setup.blocks = {k: {**b, "X": b["X"][:, :2]} for k, b in setup.blocks.items()}
        comm.send(setup, dest=w + 1, tag=int(Tag.SETUP))
    master = Master(comm, code, job, DelayModel())
    with pytest.raises(WorkerError) as info:
        master.run(3)
    assert info.value.rank == 2 and "ValueError" in str(info.value)
    master.shutdown()  # every worker, the failed one too, still stops cleanly
    assert master.state.acked == set(range(code.n_workers))
