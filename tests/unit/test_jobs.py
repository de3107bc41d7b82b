"""Jobs: coded tasks combine to the true gradient, training learns, bad datasets are refused."""

from __future__ import annotations

import numpy as np
import pytest

from mpicoded.codes import make_code
from mpicoded.jobs import DatasetError, load, make_job, synthetic


def true_gradient(job, theta, rows=None):
    """Full-batch gradient (over ``rows``, default all) computed directly from the data."""
    rows = np.arange(job.data.n_samples) if rows is None else rows
    X, y, n = job.data.X[rows], job.data.y[rows], len(rows)
    if job.name == "logreg":
        from mpicoded.jobs.logreg import REG
        return X.T @ (1 / (1 + np.exp(-X @ theta)) - y) / n + REG * theta
    return X.T @ (X @ theta - y) / n


def decode(job, code, theta, skip=()):
    dec = code.decoder()
    for t in range(code.n_tasks):
        if t not in skip and dec.add(t, job.compute(t, theta)):
            break
    return dec


CODES = [("frc", {"stragglers": 1}), ("gfrc", {"stragglers": 3}), ("cyclic", {"stragglers": 2}),
         ("uncoded", {}), ("uncoded", {"target": "each"}), ("cpgc", {"load": 2}),
         ("ucmmc", {"load": 2}), ("mcc", {"load": 2}), ("mds", {"stragglers": 2}),
         ("sparse", {"partitions": 6, "redundancy": 1.5})]


@pytest.mark.parametrize("jobname", ["logreg", "linreg"])
@pytest.mark.parametrize(("codename", "params"), CODES)
def test_decoded_gradient_is_the_full_gradient(jobname, codename, params):
    code = make_code(codename, 6, **params)
    job = make_job(jobname, synthetic(jobname, 300, 8, seed=1), code)
    theta = np.random.default_rng(0).standard_normal(8) * 0.3
    skip = (0, 1)[: code.params.get("stragglers", 0)] if code.name != "sparse" else ()
    dec = decode(job, code, theta, skip)
    got = job.gradient(theta, dec.result(), dec.missing_partitions)
    assert np.allclose(got, true_gradient(job, theta), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("jobname", ["logreg", "linreg"])
def test_training_learns(jobname):
    code = make_code("frc", 4, stragglers=1)
    job = make_job(jobname, synthetic(jobname, 400, 6, seed=2), code)
    theta = np.zeros(6)
    start = job.loss(theta)
    for _ in range(60):
        dec = decode(job, code, theta)
        theta = job.update(theta, dec.result(), dec.missing_partitions)
    assert job.loss(theta) < 0.5 * start
    if jobname == "logreg":
        assert job.accuracy(theta) > 0.85


@pytest.mark.parametrize("jobname", ["logreg", "linreg"])
def test_partial_sum_gradient_covers_the_samples_present(jobname):
    """FRC with a tolerance: the update is the gradient of the partitions recovered."""
    code = make_code("frc", 4, stragglers=1)  # groups [0, 2) and [2, 4)
    job = make_job(jobname, synthetic(jobname, 80, 5, seed=4), code)
    theta = np.full(5, 0.2)
    dec = code.decoder(tolerance=2)
    assert dec.add(2, job.compute(2, theta))
    assert list(dec.missing_partitions) == [0, 1]
    rows = np.concatenate(job.partitions[2:])
    assert np.allclose(job.gradient(theta, dec.result(), dec.missing_partitions),
                       true_gradient(job, theta, rows))


def test_task_cost_counts_partitions_except_precoded_blocks():
    data = synthetic("linreg", 60, 6, seed=0)
    cpgc = make_code("cpgc", 4, load=2)
    assert list(make_job("logreg", synthetic("logreg", 60, 6, seed=0), cpgc).task_cost()) == \
        [1, 1, 1, 1, 2, 2, 2, 2]
    assert list(make_job("linreg", data, cpgc).task_cost()) == [1] * 8
    assert list(make_job("linreg", data, make_code("frc", 6, stragglers=2)).task_cost()) == [3] * 6


def test_linreg_each_leaves_missing_blocks_out():
    code = make_code("uncoded", 3, target="each")
    job = make_job("linreg", synthetic("linreg", 90, 6, seed=0), code)
    theta = np.ones(6)
    dec = code.decoder(tolerance=1)
    for t in (0, 2):
        dec.add(t, job.compute(t, theta))
    grad = job.gradient(theta, dec.result(), dec.missing_partitions)
    full = true_gradient(job, theta)
    assert np.array_equal(grad[2:4], np.zeros(2))
    assert np.allclose(grad[[0, 1, 4, 5]], full[[0, 1, 4, 5]])


def test_load_npz_and_csv(tmp_path):
    X = np.arange(12.0).reshape(4, 3)
    y = np.array([0.0, 1.0, 1.0, 0.0])
    np.savez(tmp_path / "d.npz", X=X, y=y)
    assert np.array_equal(load(tmp_path / "d.npz").X, X)
    np.savetxt(tmp_path / "d.csv", np.column_stack([X, y]), delimiter=",", header="a,b,c,y",
               comments="")
    got = load(tmp_path / "d.csv")
    assert np.array_equal(got.X, X) and np.array_equal(got.y, y)


@pytest.mark.parametrize(("content", "name", "message"), [
    (None, "missing.npz", "no such file"),
    (b"a,b\n1,x\n", "bad.csv", "NaN, infinite or non-numeric"),
    (b"hello", "bad.npz", "cannot be read"),
    (b"1,2\n", "d.txt", "unknown format"),
])
def test_bad_datasets(tmp_path, content, name, message):
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(DatasetError, match=message):
        load(path)


def test_npz_without_arrays(tmp_path):
    np.savez(tmp_path / "d.npz", A=np.ones(3))
    with pytest.raises(DatasetError, match="needs arrays 'X' and 'y'"):
        load(tmp_path / "d.npz")


def test_logreg_refuses_non_binary_labels():
    data = synthetic("linreg", 20, 2, seed=0)
    with pytest.raises(DatasetError, match="labels 0/1"):
        make_job("logreg", data, make_code("uncoded", 2))


def test_too_many_partitions_for_the_data():
    with pytest.raises(DatasetError, match="need at least 8 rows"):
        make_job("linreg", synthetic("linreg", 5, 2, seed=0), make_code("uncoded", 8))
