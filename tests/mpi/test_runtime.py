"""The runtime on real MPI ranks (pytest-mpi), through ``mpicoded.run``: purging, exact decoding,
user jobs, workers that load their own data, refused options, worker errors carried back.

Run as ``mpirun -n 4 python -m mpi4py -m pytest --with-mpi tests/mpi`` (ci/test.sh does): a
failing rank then aborts the job instead of hanging it.
"""

from __future__ import annotations

import numpy as np
import pytest
from ridge_job import Ridge, serial

import mpicoded
from mpicoded.codes import make_code
from mpicoded.jobs import LinReg, LogReg, PageRank, coded
from mpicoded.options import UsageError

MPI = pytest.importorskip("mpi4py.MPI")


def workers() -> int:
    return MPI.COMM_WORLD.Get_size() - 1


def reference_thetas(job, code, iterations):
    """Plain serial descent with every partition: the thetas exact decoding must reproduce,
    after each iteration."""
    job = coded(job, code)
    thetas = [job.theta0()]
    for _ in range(iterations):
        dec = code.decoder()
        for t in range(code.n_tasks):
            if dec.add(t, job.compute(t, thetas[-1])):
                break
        thetas.append(job.update(thetas[-1], dec.result(), dec.missing_partitions, 0))
    return thetas[1:]


def reference_theta(job, code, iterations):
    return reference_thetas(job, code, iterations)[-1]


class RemoteRidge(Ridge):
    """The same job, but every worker loads the partitions it needs: the master ships ids."""

    blocks = mpicoded.GradientJob.blocks

    def load_block(self, j, k):
        return Ridge.blocks(self, k)[j]


@pytest.mark.mpi(min_size=4)
@pytest.mark.timeout(120)
def test_very_slow_worker_is_purged_and_decoding_is_exact():
    n = workers()
    job = LogReg(samples=400, features=5, seed=3)
    result = mpicoded.run(job, code="cyclic", stragglers=1, delay="persistent", task_time=0.005,
                          slow_workers=[n], slow_factor=200, iterations=8, quiet=True)
    if result is None:
        return
    slow = n - 1  # the last worker is 200x slower: every iteration decodes without it
    assert len(result.records) == 8
    assert all(r.purged_tasks >= 1 for r in result.records)
    # the slow worker dropped its task every iteration instead of finishing it
    assert result.worker_counters[slow][2] == 8 and result.worker_counters[slow][1] == 0
    job = LogReg(samples=400, features=5, seed=3)
    thetas = reference_thetas(job, make_code("cyclic", n, stragglers=1), 8)
    assert np.allclose(result.theta, thetas[-1], rtol=1e-9, atol=1e-12)
    # the losses came back coded from the workers (the last one computed on rank 0): each is
    # the full-data loss of the theta its iteration produced
    assert result.losses == pytest.approx([job.loss(t) for t in thetas], rel=1e-9)


@pytest.mark.mpi(min_size=3)
@pytest.mark.timeout(120)
def test_uncoded_each_target_multi_message_linreg():
    result = mpicoded.run(LinReg(samples=400, features=5, seed=3), code="uncoded", target="each",
                          delay="none", iterations=5, quiet=True)
    if result is None:
        return
    code = make_code("uncoded", workers(), target="each")
    assert [r.results_received for r in result.records] == [code.n_tasks] * 5
    assert sum(r.purged_tasks for r in result.records) == 0
    assert result.records[0].volume == pytest.approx(1.0)
    job = LinReg(samples=400, features=5, seed=3)
    assert np.allclose(result.theta, reference_theta(job, code, 5), rtol=1e-9, atol=1e-12)
    assert result.losses[-1] < job.loss(np.zeros(5))


@pytest.mark.mpi(min_size=4)
@pytest.mark.timeout(120)
def test_a_users_job_equals_serial_descent_with_stragglers_purged():
    result = mpicoded.run(Ridge(), code="gfrc", stragglers=1, delay="persistent",
                          task_time=0.002, slow_workers=[1], slow_factor=50, iterations=12,
                          quiet=True)
    if result is None:
        return
    expected = serial(Ridge(), 12)
    assert np.allclose(result.theta, expected, rtol=1e-10, atol=0)
    assert result.totals["purged_tasks"] >= 12  # the slow worker, every iteration
    assert result.losses[-1] == pytest.approx(Ridge().loss(result.theta))
    assert result.record["final_loss"] == result.losses[-1]


class LinearRidge(Ridge):
    """The user's ridge job declared linear: coded on its data, its form probed from compute."""

    linear = True


@pytest.mark.mpi(min_size=4)
@pytest.mark.timeout(120)
@pytest.mark.parametrize("make", [lambda: LinReg(samples=600, features=6, seed=2), LinearRidge])
def test_a_linear_job_is_coded_on_its_data_and_equals_serial_descent(make):
    """Every mds task is one pre-combined block (one unit of injected delay); with a 50x slow
    worker purged, theta is plain serial descent on all the data within 1e-9."""
    result = mpicoded.run(make(), code="mds", stragglers=1, delay="persistent", task_time=0.002,
                          slow_workers=[2], slow_factor=50, iterations=10, quiet=True)
    if result is None:
        return
    job = make()
    facts = result.record["job"]
    assert facts["coded_on"] == "data" and facts["task_cost_ratio"] == 1.0
    if isinstance(job, LinReg):
        X, y, lr = job.data.X, job.data.y, job.step_size
        theta = np.zeros(6)
        for _ in range(10):
            theta = theta - lr * X.T @ (X @ theta - y) / len(y)
        assert result.losses[-1] == pytest.approx(job.loss(result.theta), rel=1e-12)
    else:
        theta = serial(job, 10)
    assert np.linalg.norm(result.theta - theta) <= 1e-9 * np.linalg.norm(theta)
    assert result.totals["purged_tasks"] >= 10  # the slow worker, every iteration


@pytest.mark.mpi(min_size=3)
@pytest.mark.timeout(120)
def test_workers_that_load_their_own_blocks_get_no_data_from_the_master():
    shipped = mpicoded.run(Ridge(n=20000), code="gfrc", stragglers=1, delay="none",
                           iterations=4, quiet=True)
    loaded = mpicoded.run(RemoteRidge(n=20000), code="gfrc", stragglers=1, delay="none",
                          iterations=4, quiet=True)
    if loaded is None:
        return
    data_bytes = 20000 * 8 * 8  # X (20000 x 7) and y, as float64
    assert shipped.record["placed_bytes"] > data_bytes  # each worker got its partitions
    assert loaded.record["placed_bytes"] < 1000 * workers()  # settings and ids, no rows
    assert np.array_equal(loaded.theta, shipped.theta)


@pytest.mark.mpi(min_size=4)
@pytest.mark.timeout(120)
@pytest.mark.parametrize(("code", "params"), [("mds", {"stragglers": 1}),
                                              ("sparse", {"partitions": 3, "redundancy": 2}),
                                              ("uncoded", {})])
def test_pagerank_equals_a_serial_power_iteration(code, params):
    result = mpicoded.run(PageRank(nodes=3000, seed=4), code=code, delay="seed001", mu=200,
                          iterations=15, quiet=True, **params)
    if result is None:
        return
    job = PageRank(nodes=3000, seed=4)
    x = job.start()
    for _ in range(15):
        x = job.step(x, job.transition @ x)
    assert np.allclose(result.theta, x, rtol=1e-10, atol=0)
    assert result.theta.sum() == pytest.approx(1.0)


@pytest.mark.mpi(min_size=3)
@pytest.mark.timeout(60)
def test_bad_options_raise_on_every_rank_and_nobody_hangs():
    """Every rank raises; the workers' errors are echoes (printed by rank 0 alone) and the
    messages name keywords, not flags."""
    rank = MPI.COMM_WORLD.Get_rank()
    with pytest.raises(UsageError, match="'stragler' is not an option of mpicoded.run") as bad:
        mpicoded.run(Ridge(), stragler=3)  # found by every rank alone
    assert bad.value.echoed == (rank != 0)
    reversed_ = MPI.COMM_WORLD.Split(0, -rank)  # the run's rank 0 is the world's last
    with pytest.raises(UsageError, match="'stragler' is not an option") as bad:
        mpicoded.run(Ridge(), comm=reversed_, stragler=3)
    assert bad.value.echoed == (reversed_.Get_rank() != 0)
    reversed_.Free()
    with pytest.raises(UsageError, match="^stragglers does not apply to code='cpgc'; it takes "
                       "load$") as bad:
        mpicoded.run(Ridge(), code="cpgc", stragglers=2, quiet=True)  # found on rank 0 only
    assert bad.value.echoed == (rank != 0)
    with pytest.raises(ValueError, match="stragglers=99 is out of range"):
        mpicoded.run(Ridge(), code="gfrc", stragglers=99, quiet=True)  # found on rank 0 only
    with pytest.raises(ValueError, match="MatVecJob: it needs a code whose target is 'each'"):
        mpicoded.run(PageRank(nodes=100), code="frc", quiet=True)
    with pytest.raises(TypeError, match="is not a job"):
        mpicoded.run("ridge")
    # and the ranks still agree afterwards: a real run goes through
    result = mpicoded.run(Ridge(), code="uncoded", delay="none", iterations=2, quiet=True)
    assert (result is None) == (MPI.COMM_WORLD.Get_rank() != 0)


class Failing(Ridge):
    """Raises on rank 2 only: a bug in a user's compute."""

    def compute(self, block, theta):
        if MPI.COMM_WORLD.Get_rank() == 2:
            raise ValueError("a bug in compute")
        return super().compute(block, theta)


def bare_master(comm, job, code, observers=None):
    """A Master over a Session of ``code`` with no options (the workers are started apart)."""
    from mpicoded.core.observers import Observers
    from mpicoded.core.session import Session
    from mpicoded.core.settings import Settings
    from mpicoded.delays import DelayModel
    from mpicoded.runtime.master import Master

    session = Session(Settings(code, coded(job, code), iterations=3))
    return Master(comm, session, observers or Observers(), DelayModel(), [0.0], {}, None,
                  None)


@pytest.mark.mpi(min_size=3)
@pytest.mark.timeout(120)
def test_worker_exception_is_carried_back_with_its_rank():
    from mpicoded.core.protocol import Tag, pack_control
    from mpicoded.runtime.transport import WorkerError, wait_buffer
    from mpicoded.runtime.worker import Worker, receive_setup

    comm = MPI.COMM_WORLD
    code = make_code("uncoded", comm.size - 1)
    if comm.rank != 0:
        Worker(comm, receive_setup(comm), Failing()).run()  # serves on after its error
        return
    master = bare_master(comm, Failing(), code)
    with pytest.raises(WorkerError) as info:
        master.run()
    assert info.value.rank == 2 and "ValueError: a bug in compute" in str(info.value)
    for rank in range(1, comm.size):  # every worker, the failed one too, still stops cleanly
        master.outbox.send(pack_control(), rank, Tag.STOP)
    acked = set()
    for rank in range(1, comm.size):
        if wait_buffer(comm, rank, Tag.STOP_ACK, 60.0) is not None:
            acked.add(rank)
            master.outbox.send(pack_control(), rank, Tag.RELEASE)
    master.drain()
    assert acked == set(range(1, comm.size))


@pytest.mark.mpi(min_size=3)
@pytest.mark.timeout(120)
def test_stop_goes_out_before_the_last_loss_is_computed():
    """Nothing is left to compute once the last iteration decodes: the workers are told STOP
    then, and acknowledge while rank 0 computes the final loss (a straggler on a CPU quota
    reads STOP with the last purge instead of one quota period later). Exact, over MPI."""
    from mpicoded.core import events as ev
    from mpicoded.core.observers import Observers
    from mpicoded.runtime.worker import Worker, receive_setup

    comm = MPI.COMM_WORLD
    code = make_code("uncoded", comm.size - 1)
    if comm.rank != 0:
        Worker(comm, receive_setup(comm), Ridge()).run()
        return
    kinds = []

    def watch(event, out):
        kinds.extend(type(i).__name__ for i in out if isinstance(i, ev.Stop | ev.ComputeLoss))

    result = bare_master(comm, Ridge(), code, Observers(watch)).run()
    assert kinds == ["ComputeLoss", "ComputeLoss", *["Stop"] * code.n_workers, "ComputeLoss"]
    assert set(result.counters) == set(range(code.n_workers))
    np.testing.assert_allclose(result.theta, reference_theta(Ridge(), code, 3), rtol=1e-9)


class BrokenData(Ridge):
    """A bug in the user's data loading, on rank 0 before the run starts."""

    def blocks(self, k):
        raise KeyError("no column 'price'")


@pytest.mark.mpi(min_size=3)
@pytest.mark.timeout(60)
def test_a_failure_while_planning_reaches_every_rank():
    from mpicoded.runtime.api import MasterFailed

    expected = KeyError if MPI.COMM_WORLD.Get_rank() == 0 else MasterFailed
    with pytest.raises(expected, match="no column 'price'"):
        mpicoded.run(BrokenData(), code="uncoded", quiet=True)


@pytest.mark.mpi(min_size=2)
@pytest.mark.timeout(60)
def test_wait_modes():
    import os
    import time

    from mpicoded.runtime.waits import Backoff, end_waits, set_wait, waiting

    local = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE", MPI.COMM_WORLD.Get_size()))
    assert set_wait("auto") == ("spin" if local <= os.cpu_count() else "yield")
    try:
        set_wait("spin")
        backoff = Backoff(first=0.05, cap=0.05)
        start = time.perf_counter()
        for _ in range(20):
            backoff.wait()
        assert time.perf_counter() - start < 0.5  # 20 sleeps of 50 ms would take a second
        assert waiting() == "spin"
        with pytest.raises(ValueError, match="wait='nap' is not one of"):
            set_wait("nap")
    finally:
        set_wait("sleep")
        end_waits()  # Open MPI's own yield back, as mpicoded.run leaves it


@pytest.mark.mpi(min_size=2)
@pytest.mark.timeout(60)
def test_auto_wait_counts_the_ranks_and_cores_of_this_node():
    """``--wait auto`` asks MPI which ranks share this node and pools their affinities (no
    launcher variable: the same under mpirun, srun and MPICH): here every rank is on one node,
    and a rank that may run on fewer cores than the node has ranks yields, unless a rank is
    held to a CPU quota (a container's, say): then every rank sleeps."""
    import os

    from mpicoded.runtime.waits import end_waits, node_load, set_wait

    comm = MPI.COMM_WORLD
    local, cores, held = node_load(comm)
    mine = os.sched_getaffinity(0)
    assert local == comm.Get_size()
    assert len(mine) <= cores <= (os.cpu_count() or 1)
    try:
        assert set_wait("auto", comm) == (
            "sleep" if held else "spin" if local <= cores else "yield")
        assert set_wait("auto", MPI.COMM_SELF) == "spin"  # one rank, at least one core
    finally:
        set_wait("sleep")
        end_waits()


@pytest.mark.mpi(min_size=2)
@pytest.mark.timeout(60)
def test_choosing_a_wait_turns_open_mpis_own_yield_off():
    """Once mpicoded's waits are chosen, an MPI call that finds nothing to do returns at once
    instead of giving the core away (Open MPI's default when ranks outnumber cores)."""
    import ctypes

    from mpicoded.runtime.waits import _open_pal, end_waits, mpi_yield, set_wait

    pal = _open_pal()
    if pal is None:
        pytest.skip("not Open MPI: there is no in-progress yield to turn off")
    flag = ctypes.c_bool.in_dll(pal, "opal_progress_yield_when_idle")
    try:
        mpi_yield(True)
        assert flag.value
        set_wait("sleep")
        assert not flag.value
        assert mpi_yield(True) is False  # the previous setting is returned
    finally:
        set_wait("sleep")
        end_waits()  # Open MPI's own yield back, as mpicoded.run leaves it


@pytest.mark.mpi(min_size=1)
@pytest.mark.timeout(60)
def test_a_worker_probes_before_it_reads_and_obeys_what_came():
    """Between chunks, and while idle, a worker probes before it reads its inbox: with nothing
    come it is not interrupted; a PURGE of the iteration under way interrupts it; once dropped
    it stays dropped without reading again, until the next iteration is asked for. On
    COMM_SELF every rank is its own master."""
    from mpicoded.core.protocol import Tag, pack_control, pack_iterate
    from mpicoded.core.setup import SetupShared
    from mpicoded.delays import DelayModel
    from mpicoded.runtime.worker import Worker

    comm = MPI.COMM_SELF
    sends = []

    def send(buf, tag):
        sends.append((comm.Isend([buf, MPI.DOUBLE], dest=0, tag=int(tag)), buf))

    code = make_code("uncoded", 1)
    job = coded(Ridge(), code)
    setup = SetupShared(code, job, DelayModel()).for_worker(1, 0, [0])
    worker = Worker(comm, setup, job.job)
    assert not worker.arrived() and not worker.interrupted()
    send(pack_iterate(0, 0, job.theta0(), {0: (0,)}), Tag.ITERATE)
    assert worker.arrived()
    msg = worker.inbox.next_iteration()
    assert msg is not None and msg.iteration == 0
    assert not worker.arrived() and not worker.interrupted()
    send(pack_control(job=0, iteration=0), Tag.PURGE)
    assert worker.interrupted()
    send(pack_control(job=0, iteration=0), Tag.PURGE)
    assert worker.interrupted() and worker.arrived()  # dropped already: the new PURGE unread
    worker.inbox.close_current()
    assert worker.inbox.next_iteration() is None  # the late PURGE read now, nothing to run
    assert not worker.arrived() and worker.inbox.current is None
    for request, _ in sends:
        request.Wait()
    worker.outbox.drain()


@pytest.mark.mpi(min_size=1)
@pytest.mark.timeout(60)
def test_a_setup_arrives_with_its_arrays_in_the_buffers_they_came_in():
    """A set-up is its pickle and then each contiguous array's bytes as a frame of its own;
    the receiver's arrays are views of the buffers the frames were received into (no copy
    after MPI's), equal and writable; the pickle keeps what is not contiguous. On COMM_SELF."""
    from mpicoded.core.protocol import Tag
    from mpicoded.runtime.outbox import Outbox
    from mpicoded.runtime.transport import object_frames, receive

    comm = MPI.COMM_SELF
    rng = np.random.default_rng(0)
    sent = {"X": rng.standard_normal((300, 7)), "y": np.arange(300), "name": "ridge",
            "strided": np.arange(10.0)[::3]}
    head, frames = object_frames(sent)
    assert [f.nbytes for f in frames] == [300 * 7 * 8, 300 * 8]
    outbox = Outbox(comm)
    outbox.send(head, 0, Tag.SETUP)
    for frame in frames:
        outbox.send(frame, 0, Tag.SETUP_DATA)
    got = receive(comm, source=0)
    assert got is not None
    msg, _ = got
    outbox.drain()
    obj = msg.payload
    assert msg.tag == Tag.SETUP and obj["name"] == "ridge"
    for key in ("X", "y", "strided"):
        assert np.array_equal(obj[key], sent[key]) and obj[key].dtype == sent[key].dtype
    assert obj["X"].flags.writeable and isinstance(obj["X"].base, np.ndarray)
    assert obj["X"].base.dtype == np.uint8 and obj["X"].base.nbytes == 300 * 7 * 8
    assert receive(comm, source=0) is None  # every frame taken with the set-up


@pytest.mark.mpi(min_size=3)
@pytest.mark.timeout(120)
@pytest.mark.parametrize("make", [lambda: LogReg(samples=400, features=5, seed=3), Ridge])
def test_callbacks_see_every_iteration_with_its_theta_and_loss(make, tmp_path_factory):
    """Rank 0 calls each callback after every iteration with the record, the loss and the theta
    the iteration produced: logreg decodes its loss with the next iteration's results, ridge's
    is computed on rank 0; in both the loss is that theta's and the last theta the result's.
    The API's delay defaults to none."""
    job, seen = make(), []
    metrics = tmp_path_factory.mktemp("cb") / "m.jsonl"  # the run record leaves them out
    result = mpicoded.run(job, code="gfrc", stragglers=1, iterations=6, loss_every=1,
                          metrics=str(metrics),
                          callbacks=[lambda record, loss, theta: seen.append(
                              (record.iteration, loss, theta.copy()))], quiet=True)
    if result is None:
        assert seen == []
        return
    assert [it for it, _, _ in seen] == list(range(6))
    np.testing.assert_array_equal(seen[-1][2], result.theta)
    for _, loss, theta in seen:
        assert loss == pytest.approx(job.loss(theta), rel=1e-9)
    assert result.record["delay"]["delay"] == "none" and "callbacks" not in result.record["config"]
    assert '"record": "run"' in metrics.read_text().splitlines()[-1]
    with pytest.raises(UsageError, match="callbacks: 3 is not callable"):
        mpicoded.run(job, callbacks=[3])


@pytest.mark.mpi(min_size=4)
@pytest.mark.timeout(120)
def test_two_runs_at_once_on_sub_communicators_of_a_larger_program():
    """A program splits its ranks in two and runs a job on each half at the same time
    (``comm=``): each half's rank 0 gets its own job's serial result, and the program's own
    messages on COMM_WORLD around the runs are not disturbed. ``threads`` sets the BLAS
    pools of the half's ranks."""
    from threadpoolctl import threadpool_info, threadpool_limits

    world = MPI.COMM_WORLD
    rank = world.Get_rank()
    color = rank % 2 if world.Get_size() >= 4 else 0
    half = world.Split(color, rank)
    token = world.bcast("before" if rank == 0 else None, root=0)
    features = 4 + color  # the halves train different jobs
    job = LinReg(samples=240, features=features, seed=5)
    result = mpicoded.run(job, comm=half, code="uncoded", iterations=5, quiet=True,
                          threads=1 + color)
    assert {pool["num_threads"] for pool in threadpool_info()} == {1 + color}
    threadpool_limits(1)
    assert (result is not None) == (half.Get_rank() == 0)
    if result is not None:
        code = make_code("uncoded", n_workers=half.Get_size() - 1)
        np.testing.assert_allclose(result.theta, reference_theta(job, code, 5), rtol=1e-9)
        assert result.theta.shape == (features,)
    assert world.allreduce(1) == world.Get_size() and token == "before"
    half.Free()
    with pytest.raises(TypeError, match="comm=3: expected an mpi4py intracommunicator"):
        mpicoded.run(job, comm=3)


@pytest.mark.mpi(min_size=3)
@pytest.mark.timeout(120)
@pytest.mark.parametrize("partial", ["off", "on"])
def test_float32_results_cost_only_float32_rounding(partial):
    """A job whose results travel as float32 (``result_dtype``) trains to the float64 run's
    theta within 1e-6 relative after 10 steps (each value rounded to 2**-24), whole tasks or
    pieces; it is not bitwise the same run, so the values did travel as float32."""
    runs = []
    for dtype in ("float64", "float32"):
        job = LogReg(samples=600, features=6, seed=3)
        job.result_dtype = dtype
        runs.append(mpicoded.run(job, code="gfrc", stragglers=1, iterations=10, quiet=True,
                                 partial=partial))
    if runs[0] is None:
        assert runs[1] is None
        return
    wide, half = runs[0].theta, runs[1].theta
    rel = np.linalg.norm(half - wide) / np.linalg.norm(wide)
    assert 0 < rel < 1e-6, rel
    assert runs[1].losses[-1] == pytest.approx(runs[0].losses[-1], rel=1e-6)
