"""Running a task in row chunks (no MPI): the same value as whole blocks up to reassociation,
interruptible between chunks, and a compute-bound slow worker returns the same value."""

from __future__ import annotations

import numpy as np
import pytest

from mpicoded.codes import make_code
from mpicoded.jobs import BUILTINS, coded
from mpicoded.jobs.task import CHUNK_ELEMENTS, Kernel, default_chunk_rows, run_task

CASES = [("logreg", "frc", {"stragglers": 1}), ("logreg", "mds", {"stragglers": 2}),
         ("linreg", "gfrc", {"stragglers": 2}), ("linreg", "uncoded", {"target": "each"})]


def job_for(jobname, codename, params, samples=997, features=7):
    code = make_code(codename, 6, **params)
    return coded(BUILTINS[jobname](samples=samples, features=features, seed=5), code)


@pytest.mark.parametrize(("jobname", "codename", "params"), CASES)
@pytest.mark.parametrize("chunk_rows", [1, 13, 100, 10**6])
def test_chunked_equals_whole_up_to_reassociation(jobname, codename, params, chunk_rows):
    job = job_for(jobname, codename, params)
    theta = np.random.default_rng(1).standard_normal(job.dim)
    for task in range(job.code.n_tasks):
        whole = job.compute(task, theta)
        chunked = job.compute(task, theta, chunk_rows=chunk_rows)
        assert np.allclose(chunked, whole, rtol=1e-12, atol=1e-12 * np.abs(whole).max())


def test_stop_between_chunks_reports_the_fraction_done():
    job = job_for("logreg", "frc", {"stragglers": 1}, samples=600)  # a task: 2 x 100 rows
    blocks, terms = job.placement([0])
    calls = []

    def stop() -> bool:
        calls.append(1)
        return len(calls) == 3

    value, fraction, chunks = run_task(job.kernel, blocks, terms[0], np.zeros(job.dim),
                                       job.result_size, chunk_rows=40, stop=stop)
    assert value is None and fraction == pytest.approx(100 / 200)  # chunks of 40, 40, 20
    assert chunks == 3
    value, fraction, chunks = run_task(job.kernel, blocks, terms[0], np.zeros(job.dim),
                                       job.result_size, chunk_rows=40, stop=lambda: False)
    assert value is not None and fraction == 1.0 and chunks == 6  # 2 blocks: 40, 40, 20 rows each
    assert np.array_equal(value, job.compute(0, np.zeros(job.dim), chunk_rows=40))


@pytest.mark.parametrize(("repeat", "chunk_rows"), [(1.0, 50), (2.0, 50), (3.5, 50), (1.5, 1)])
def test_repeated_compute_burns_that_many_rows_and_returns_the_same_value(repeat, chunk_rows):
    job = job_for("logreg", "frc", {"stragglers": 1})
    blocks, terms = job.placement([2])
    rows_done = []

    def accumulate(block, theta, start, stop, coef, out):
        rows_done.append(stop - start)
        job.kernel.accumulate(block, theta, start, stop, coef, out)

    counting = Kernel(job.kernel.rows, accumulate)
    theta = np.full(job.dim, 0.1)
    value, _, _ = run_task(counting, blocks, terms[2], theta, job.result_size, chunk_rows,
                           repeat)
    assert np.array_equal(value, job.compute(2, theta, chunk_rows=chunk_rows))
    rows = sum(job.kernel.rows(blocks[k]) for k, _ in terms[2])
    assert sum(rows_done) == pytest.approx(repeat * rows, abs=1)


def test_whole_tasks_are_never_interrupted():
    job = job_for("logreg", "frc", {"stragglers": 1})
    blocks, terms = job.placement([0])
    value, fraction, chunks = run_task(job.kernel, blocks, terms[0], np.zeros(job.dim),
                                       job.result_size, chunk_rows=0, stop=lambda: True)
    assert value is not None and fraction == 1.0 and chunks == len(terms[0])


def test_chunked_runs_check_between_chunks_only():
    job = job_for("linreg", "uncoded", {"target": "each"}, features=12)
    blocks, terms = job.placement([0])
    rows = job.kernel.rows(blocks[0])
    checks = []
    run_task(job.kernel, blocks, terms[0], np.ones(12), job.result_size, 1,
             stop=lambda: checks.append(1) or False)
    assert len(checks) == rows - 1  # not before the first chunk, nor after the last


def test_default_chunk_is_fixed_by_the_shape():
    assert default_chunk_rows(100) == CHUNK_ELEMENTS // 100
    assert default_chunk_rows(10**9) == 1
    # a block of known rows is cut evenly, into the nearest whole number of nominal chunks
    assert default_chunk_rows(101, 10000) == 2500  # 2475 nominal: four, no 100-row fifth
    assert default_chunk_rows(101, 3000) == 3000  # 1.2 nominal chunks: one
    assert default_chunk_rows(100, 5) == 5
    job = job_for("logreg", "frc", {"stragglers": 1}, features=50)  # 997 rows, 6 partitions
    assert job.default_chunk_rows() == 167  # a row of X (50) and of y: 4901 nominal, one chunk
    wide = job_for("logreg", "uncoded", {}, samples=60000, features=100)  # 10000 rows of 101
    assert wide.default_chunk_rows() == 2500
    blocks, terms = wide.placement([0])
    theta = np.zeros(100)
    assert run_task(wide.kernel, blocks, terms[0], theta, wide.result_size,
                    wide.default_chunk_rows())[2] == 4


def test_placement_holds_each_partition_once():
    job = job_for("logreg", "gfrc", {"stragglers": 2})
    tasks = range(job.code.n_tasks)
    blocks, terms = job.placement(tasks)
    assert sorted(blocks) == list(range(job.code.n_partitions))
    assert all(set(k for k, _ in terms[t]) == set(np.flatnonzero(job.code.B[t])) for t in tasks)
    from mpicoded.jobs import Power, coded

    power = coded(Power(features=12), make_code("mds", 6, stragglers=2))
    blocks, terms = power.placement([1, 4])
    assert sorted(blocks) == [1, 4] and terms[4] == ((4, 1.0),)  # pre-coded: a block a task
