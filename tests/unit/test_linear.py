"""Which side B goes on: a job linear in theta is coded on its data (one coded block a task,
whatever the code's density), a nonlinear one on its results; the costs are stated."""

from __future__ import annotations

import numpy as np
import pytest

from mpicoded import GradientJob
from mpicoded.codes import make_code
from mpicoded.jobs import LinReg, LogReg, coded, kernel_for
from mpicoded.jobs.coded_data import CodedLinear
from mpicoded.jobs.coded_results import CodedGradient
from mpicoded.jobs.task import Kernel, run_task
from mpicoded.plan import cost_warning


def rows_touched(job, task: int, theta: np.ndarray) -> dict[int, int]:
    """Rows of each block the worker's kernel reads for ``task`` (a kernel that counts)."""
    touched: dict[int, int] = {}
    inner = job.kernel

    def counting(block, th, start, stop, coef, out):
        key = next(k for k, b in blocks.items() if b is block)
        touched[key] = touched.get(key, 0) + stop - start
        inner.accumulate(block, th, start, stop, coef, out)

    terms = job.terms(task)
    blocks = {key: job.local_block(key) for key, _ in terms}
    run_task(Kernel(inner.rows, counting), blocks, terms, theta, job.result_size, 3)
    return touched


@pytest.mark.parametrize(("name", "params"), [("cpgc", {"load": 3}), ("mcc", {"load": 3}),
                                              ("mds", {"partitions": 40, "redundancy": 1.1}),
                                              ("frc", {"stragglers": 3})])
def test_a_linreg_task_multiplies_exactly_one_block(name, params):
    user = LinReg(samples=2000, features=12, seed=1)
    job = coded(user, make_code(name, 20, **params))
    assert isinstance(job, CodedLinear) and job.data_coded
    assert list(job.task_cost()) == [1.0] * job.code.n_tasks
    theta = np.linspace(-1, 1, 12)
    for task in range(job.code.n_tasks):
        assert rows_touched(job, task, theta) == {task: 12}  # its own d x d block, once
    facts = job.describe()
    assert facts["coded_on"] == "data" and facts["task_cost_ratio"] == 1.0
    assert cost_warning(job, job.code) is None


def test_logreg_under_mds_computes_every_partition_and_is_warned_about():
    """The trap: a nonlinear gradient coded on its results over a dense code."""
    user = LogReg(samples=1200, features=5, seed=1)
    job = coded(user, make_code("mds", 6, partitions=12, redundancy=1))
    assert not job.data_coded
    touched = rows_touched(job, 0, np.zeros(5))
    assert sorted(touched) == list(range(12)) and sum(touched.values()) == 1200
    assert job.describe()["task_cost_ratio"] == pytest.approx(12.0)
    warning = cost_warning(job, job.code)
    assert warning is not None and "12x a plain partition" in warning
    light = coded(user, make_code("frc", 6, stragglers=1))  # two partitions a task: allowed
    assert light.describe()["task_cost_ratio"] == pytest.approx(2.0)
    assert cost_warning(light, light.code) is None
    uneven = coded(LogReg(samples=1201, features=5, seed=1), make_code("frc", 6, stragglers=1))
    assert uneven.describe()["task_cost_ratio"] > 2.0  # 402 rows against 200.2: still two
    assert cost_warning(uneven, uneven.code) is None  # partitions, the code recommended


CODES = [("uncoded", {}), ("uncoded", {"partitions": 9, "target": "each"}),
         ("frc", {"stragglers": 2}), ("gfrc", {"stragglers": 2}), ("cyclic", {"stragglers": 2}),
         ("mds", {"stragglers": 2}), ("mds", {"partitions": 15, "redundancy": 1.2}),
         ("sparse", {"partitions": 12, "redundancy": 1.5}), ("cpgc", {"load": 2}),
         ("ucmmc", {"load": 3}), ("mcc", {"load": 2})]


@pytest.mark.parametrize(("name", "params"), CODES)
def test_linreg_theta_under_every_code_is_serial_descent(name, params):
    """Stragglers skipped where the code allows: 15 decoded steps equal plain gradient descent
    on all the data within 1e-9 relative."""
    user = LinReg(samples=600, features=7, seed=4)
    code = make_code(name, 6, **params)
    job = coded(user, code)
    assert job.data_coded
    skip = set(range(params.get("stragglers", 0)))
    if name == "sparse":  # its decodability is sampled: skip nothing
        skip = set()
    theta = serial = job.theta0()
    X, y = user.data.X, user.data.y
    for _ in range(15):
        dec = code.decoder(0)
        for t in range(code.n_tasks):
            ran = not any(t in code.schedule[w] for w in skip)
            if ran and dec.add(t, job.compute(t, theta, 2)):
                break
        assert dec.ready
        theta = job.update(theta, dec.result(), dec.missing_partitions, 0)
        serial = serial - user.step_size * X.T @ (X @ serial - y) / len(y)
    assert np.linalg.norm(theta - serial) <= 1e-9 * np.linalg.norm(serial)


def test_the_decoded_loss_of_a_data_coded_job_is_the_full_data_loss():
    user = LinReg(samples=500, features=6, seed=3)
    job = coded(user, make_code("mds", 6, stragglers=2))
    assert job.data_coded and job.free_loss and job.result_size == 7
    theta = np.random.default_rng(1).standard_normal(6)
    dec = job.code.decoder(0)
    for t in (5, 3, 2, 4):  # any 4 of 6
        dec.add(t, job.compute(t, theta, 4))
    job.update(theta, dec.result(), dec.missing_partitions, 0)
    assert job.decoded_loss == pytest.approx(user.loss(theta), rel=1e-12)


class Ridge(GradientJob):
    """A user's least squares declared linear, with the default (probed) linear form."""

    linear = True

    def __init__(self, n=240, d=5):
        rng = np.random.default_rng(2)
        self.X, self.y, self.dim = rng.standard_normal((n, d)), rng.standard_normal(n), d

    def blocks(self, k):
        return [(self.X[r], self.y[r]) for r in np.array_split(np.arange(len(self.y)), k)]

    def compute(self, block, theta):
        X, y = block
        return X.T @ (X @ theta - y)

    def block_loss(self, block, theta):
        X, y = block
        return 0.5 * float(np.sum((X @ theta - y) ** 2))

    def step(self, theta, total, covered):
        return theta - 0.002 * total


def test_a_user_job_declaring_linear_is_coded_on_its_data_with_a_probed_form():
    user = Ridge()
    code = make_code("mds", 6, stragglers=3)
    job = coded(user, code)
    assert isinstance(job, CodedLinear)
    theta = np.arange(5.0)
    dec = code.decoder(0)
    for t in (1, 2, 5):
        dec.add(t, job.compute(t, theta))
    total = dec.result().sum(axis=0)  # mds decodes each partition's value
    r = user.X @ theta - user.y
    assert np.allclose(total[:-1], user.X.T @ r, rtol=1e-10)
    assert total[-1] == pytest.approx(0.5 * r @ r, rel=1e-10)
    # the same job undeclared is coded on its results: each mds task computes 3 partitions
    Ridge.linear = False
    try:
        plain = coded(Ridge(), code)
    finally:
        Ridge.linear = True
    assert type(plain) is CodedGradient and plain.describe()["task_cost_ratio"] == 3.0


def test_a_job_that_is_not_linear_cannot_declare_it():
    class NotLinear(LogReg):
        linear = True

        def linear_form(self, block):
            return GradientJob.linear_form(self, block)

    with pytest.raises(ValueError, match="declares linear = True, but compute"):
        coded(NotLinear(samples=200, features=4), make_code("uncoded", 2))


def test_a_linear_job_whose_block_loss_is_not_its_gradients_is_refused():
    class WrongLoss(Ridge):
        def block_loss(self, block, theta):
            return super().block_loss(block, theta) + float(theta @ theta)

    with pytest.raises(ValueError, match="block_loss is not the loss whose gradient"):
        coded(WrongLoss(), make_code("uncoded", 2))


def test_results_coding_is_kept_where_it_is_cheaper():
    """10 rows a partition and 40 features: a 40 x 40 coded block costs more than the rows."""
    user = LinReg(samples=60, features=40, seed=1)
    job = coded(user, make_code("uncoded", 6))
    assert type(job) is CodedGradient and not job.data_coded
    dense = coded(user, make_code("mds", 6, stragglers=2))  # 4 partitions a task: data wins
    assert dense.data_coded


def test_wide_data_is_coded_on_its_results_without_building_a_form():
    """30 rows of 4000 features: each partition's XᵀX would be 128 MB, more than the rows'
    work whatever the code; it is never built."""
    import tracemalloc

    user = LinReg(samples=30, features=4000, seed=1, lr=0.1)
    _ = user.data
    tracemalloc.start()
    try:
        job = coded(user, make_code("mds", 6, stragglers=2))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert not job.data_coded and peak < 16 * 2**20


def test_a_recode_chooses_the_side_again_and_the_worker_kernel_follows():
    user = LinReg(samples=600, features=5, seed=2)
    job = coded(user, make_code("frc", 6, stragglers=1))
    again = job.recoded(make_code("gfrc", 5, stragglers=1))
    assert isinstance(again, CodedLinear) and again.code.n_workers == 5
    worker_copy = LinReg(samples=600, features=5, seed=2)  # what a worker builds, data unread
    kernel = kernel_for(worker_copy, data_coded=True)
    block = again.block(0)
    out = np.zeros(6)
    kernel.accumulate(block, np.ones(5), 0, 5, 1.0, out)
    assert np.allclose(out, again.compute(0, np.ones(5)))


def test_uncoded_over_more_partitions_than_workers():
    code = make_code("uncoded", 4, partitions=10)
    assert code.n_tasks == code.n_partitions == 10
    assert sorted(t for ts in code.schedule for t in ts) == list(range(10))
    assert max(len(ts) for ts in code.schedule) - min(len(ts) for ts in code.schedule) <= 1
    with pytest.raises(ValueError, match="partitions=3 is out of range: allowed >= 4"):
        make_code("uncoded", 4, partitions=3)
