"""Mini-batches: which rows each step computes, DDP's shares of them, a worker's step rows, and a
job coded for them (exact decoding of the batch's mean gradient, refusals with the fix)."""

from __future__ import annotations

import numpy as np
import pytest
from ridge_job import Ridge

from mpicoded import ShardSampler
from mpicoded.codes import make_code
from mpicoded.core.shape import Shape
from mpicoded.jobs import GradientJob, LinReg, LogReg, coded
from mpicoded.jobs.batches import Batches, StepRows
from mpicoded.jobs.logreg import REG, sigmoid
from mpicoded.jobs.task import default_chunk_rows, run_task


def test_a_pass_computes_every_row_once_and_the_short_batch_is_dropped():
    b = Batches(rows=1003, size=100, seed=4)
    assert b.steps_per_pass == 10 and b.share == pytest.approx(100 / 1003)
    for pass_ in (0, 1):
        steps = [b.batch(pass_ * 10 + i) for i in range(10)]
        rows = np.concatenate(steps)
        assert all(len(s) == 100 and (np.diff(s) > 0).all() for s in steps)
        assert len(np.unique(rows)) == 1000 and rows.min() >= 0 and rows.max() < 1003
    assert not np.array_equal(b.batch(0), b.batch(10))  # each pass its own shuffle
    assert np.array_equal(b.batch(3), Batches(1003, 100, seed=4).batch(3))  # from the seed alone
    assert not np.array_equal(b.batch(3), Batches(1003, 100, seed=5).batch(3))
    assert np.array_equal(np.sort(b.ordered(7)), b.batch(7))


@pytest.mark.parametrize("size", [0, 1004])
def test_a_batch_size_out_of_range_is_refused(size):
    with pytest.raises(ValueError, match=r"--batch-size .* allowed 1 to the data's 1003 rows"):
        Batches(1003, size)


def test_partitions_counts_add_up_to_the_batch():
    b = Batches(1000, 64, seed=1)
    bounds = [0, 300, 301, 700, 1000]
    counts = b.counts(5, bounds)
    batch = b.batch(5)
    assert counts.sum() == 64
    assert counts.tolist() == [len(b.within(batch, lo, hi))
                               for lo, hi in zip(bounds, bounds[1:], strict=False)]


def test_ddp_processes_share_each_batch_equally():
    """Each step the processes' rows are disjoint, equal in number, and make up mpicoded's
    batch of that step: the mean of their means is the batch's mean."""
    batches = Batches(1000, 96, seed=2)
    world, per = 3, 32
    samplers = [ShardSampler(1000, 96, 2, rank, world) for rank in range(world)]
    for epoch in (0, 1):
        lists = []
        for s in samplers:
            s.set_epoch(epoch)
            lists.append(list(s))
            assert len(lists[-1]) == len(s) == batches.steps_per_pass * per
        for i in range(batches.steps_per_pass):
            shares = [set(rows[i * per:(i + 1) * per]) for rows in lists]
            assert all(len(share) == per for share in shares)
            assert set().union(*shares) == set(batches.batch(epoch * batches.steps_per_pass + i))


def test_a_sampler_that_cannot_share_equally_is_refused():
    with pytest.raises(ValueError, match="batch size 100 over 3 processes"):
        ShardSampler(1000, 100, world=3)
    with pytest.raises(ValueError, match="rank 3 of world 3"):
        ShardSampler(1000, 99, rank=3, world=3)


def test_step_rows_are_the_batch_rows_of_each_block_and_piece():
    rows = np.arange(40.0).reshape(20, 2)
    blocks = {0: (rows[:8], np.arange(8)), 1: (rows[8:], np.arange(8, 20))}
    batches = Batches(20, 6, seed=3)
    step = StepRows(batches, (0, 8, 20), blocks, 4)
    batch = batches.batch(4)
    got = np.concatenate([step[0][1], step[1][1]])
    assert np.array_equal(got, batch) and step[1] is step[1]  # picked once a step
    pieces = [step.piece(1, 0, 5)[1], step.piece(1, 5, 12)[1]]
    assert np.array_equal(np.concatenate(pieces), batch[batch >= 8])
    assert np.array_equal(step.piece(1, 0, 5)[0], rows[pieces[0]])


def test_chunks_span_the_rows_a_chunk_of_the_batch_is_drawn_from():
    assert default_chunk_rows(100, 10000) == 2500
    assert default_chunk_rows(100, 10000, share=0.5) == 5000
    assert default_chunk_rows(100, 10000, share=0.01) == 10000  # one chunk: the whole block


def step_rows_of(job, step):
    """A worker's blocks as step ``step`` sees them (read by the worker where it loads them)."""
    blocks = {j: job.local_block(j) for j in range(job.code.n_partitions)}
    return StepRows(job.batches, job.bounds, blocks, step)


@pytest.mark.parametrize("codename", ["frc", "cyclic"])
def test_a_coded_logreg_steps_on_the_batch_mean_gradient(codename):
    """Tasks computed over each step's rows decode to the batch's summed gradient, and the
    step divides it (and the decoded loss) by the batch's rows, not the data's."""
    user = LogReg(samples=500, features=6, seed=3, lr=0.5)
    job = coded(user, make_code(codename, 6, stragglers=2), batch_size=50, batch_seed=9)
    assert job.batches is not None and job.shape()["share"] == 0.1
    X, y = user.data.X, user.data.y
    theta = np.zeros(6)
    for step in range(12):  # into the second pass
        blocks = step_rows_of(job, step)
        dec = job.code.decoder()
        for task in range(job.code.n_tasks):
            value, _, _ = run_task(job.kernel, blocks, job.terms(task), theta, job.result_size)
            if dec.add(task, value):
                break
        rows = job.batches.batch(step)
        z = X[rows] @ theta
        loss = np.mean(np.logaddexp(0.0, z) - y[rows] * z) + 0.5 * REG * theta @ theta
        expected = theta - 0.5 * (X[rows].T @ (sigmoid(z)[0] - y[rows]) / 50 + REG * theta)
        theta = job.update(theta, dec.result(), dec.missing_partitions, step)
        assert job.decoded_loss == pytest.approx(loss, rel=1e-12)
        np.testing.assert_allclose(theta, expected, rtol=1e-12, atol=1e-15)


def test_a_linear_job_in_mini_batches_is_coded_on_its_results():
    """Data coding sums whole partitions on rank 0: no batch of rows can be drawn from it."""
    code = make_code("gfrc", 6, stragglers=2)
    assert coded(LinReg(samples=400, features=5), code).data_coded
    assert not coded(LinReg(samples=400, features=5), code, batch_size=40).data_coded


def test_jobs_that_cannot_train_in_mini_batches_are_refused_with_the_fix():
    from mpicoded.jobs import PageRank

    code = make_code("uncoded", 4)
    with pytest.raises(ValueError, match="does not define batch_rows"):
        coded(Ridge(), code, batch_size=10)
    with pytest.raises(ValueError, match="matrix-vector job.*drop --batch-size"):
        coded(PageRank(), make_code("mds", 4), batch_size=10)
    with pytest.raises(ValueError, match="--batch-size 501 is out of range"):
        coded(LogReg(samples=500, features=4), code, batch_size=501)

    class Loaded(GradientJob):  # its workers load their blocks; rank 0 cannot count rows
        dim = 2

        def load_block(self, j: int, k: int):
            return np.ones((10, 2))

        def batch_rows(self, rows: np.ndarray) -> None:
            pass

    with pytest.raises(ValueError, match="does not define partition_rows"):
        coded(Loaded(), code, batch_size=10)

    class Miscounted(Loaded):
        def partition_rows(self, k: int) -> list[int]:
            return [10] * (k - 1)

    with pytest.raises(ValueError, match=r"partition_rows\(4\) gave 3 counts; expected 4"):
        coded(Miscounted(), code, batch_size=10)


def test_a_replay_cuts_the_chunks_of_a_batched_run_as_the_job_did():
    job = coded(LogReg(samples=6000, features=10), make_code("frc", 6, stragglers=2),
                batch_size=60)
    shape = Shape(job.code, **job.shape())
    assert shape.default_chunk_rows() == job.default_chunk_rows() == 1000
    recoded = shape.recoded(make_code("gfrc", 5, stragglers=1))
    assert recoded.share == shape.share == 0.01
    assert recoded.default_chunk_rows() == job.recoded(recoded.code).default_chunk_rows()



def test_a_libsvm_file_and_a_mapped_npy_step_in_mini_batches_as_their_dense_copy(tmp_path):
    """Sparse CSR partitions give up a step's rows as the dense ones do, and a memory-mapped
    .npy whose workers read their own partitions (rank 0 numbering the rows from its shape
    alone) as one rank 0 holds: the coded mini-batch steps of all three are the same."""
    rng = np.random.default_rng(2)
    X = rng.standard_normal((90, 6)) * (rng.random((90, 6)) < 0.4)
    X[:, -1] = 1.0  # every column present, so both files have six
    y = np.where(X @ np.linspace(-1, 1, 6) > 0, 1.0, -1.0)
    lines = [" ".join([f"{label:+g}", *(f"{j + 1}:{v:.17g}" for j, v in enumerate(row) if v)])
             for row, label in zip(X, y, strict=True)]
    (tmp_path / "d.svm").write_text("\n".join(lines) + "\n")
    np.savez(tmp_path / "d.npz", X=X, y=(y > 0).astype(float))
    np.save(tmp_path / "d.npy", np.column_stack([X, y > 0]).astype(float))
    code = make_code("gfrc", 4, stragglers=1)
    thetas = []
    for name in ("d.svm", "d.npz", "d.npy"):
        job = coded(LogReg(dataset=str(tmp_path / name), lr=0.5), code, batch_size=20,
                    batch_seed=3)
        assert job.remote == name.endswith(".npy")
        theta = np.zeros(6)
        for step in range(6):  # into the second pass
            blocks = step_rows_of(job, step)
            dec = job.code.decoder()
            for task in range(job.code.n_tasks):
                value, _, _ = run_task(job.kernel, blocks, job.terms(task), theta,
                                       job.result_size)
                if dec.add(task, value):
                    break
            theta = job.update(theta, dec.result(), dec.missing_partitions, step)
        thetas.append(theta)
    for theta in thetas[1:]:
        np.testing.assert_allclose(theta, thetas[0], rtol=1e-12, atol=1e-15)
