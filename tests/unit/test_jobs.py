"""Jobs: coded tasks decode to the exact value the job asks for, for every code; training and
PageRank/power converge; bad jobs, codes and datasets are refused with clear messages."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from mpicoded import GradientJob, MatVecJob
from mpicoded.codes import make_code
from mpicoded.jobs import (
    DatasetError,
    JobSpecError,
    LinReg,
    LogReg,
    PageRank,
    Power,
    build_job,
    coded,
    load,
    sample,
    synthetic,
)
from mpicoded.jobs.logreg import REG
from mpicoded.jobs.pagerank import read_edges


def true_gradient(job, theta, rows=None):
    """Full-batch gradient (over ``rows``, default all) computed directly from the data."""
    rows = np.arange(job.data.n_samples) if rows is None else rows
    X, y, n = job.data.X[rows], job.data.y[rows], len(rows)
    if job.name == "logreg":
        return X.T @ (1 / (1 + np.exp(-X @ theta)) - y) / n + REG * theta
    return X.T @ (X @ theta - y) / n


def decode(job, theta, skip=(), tolerance=0, chunk_rows=0):
    dec = job.code.decoder(tolerance)
    for t in range(job.code.n_tasks):
        if t not in skip and dec.add(t, job.compute(t, theta, chunk_rows)):
            break
    return dec


def step_of(job, theta, dec):
    return job.update(theta, dec.result(), dec.missing_partitions, 0)


CODES = [("frc", {"stragglers": 1}), ("gfrc", {"stragglers": 3}), ("cyclic", {"stragglers": 2}),
         ("uncoded", {}), ("uncoded", {"target": "each"}), ("cpgc", {"load": 2}),
         ("ucmmc", {"load": 2}), ("mcc", {"load": 2}), ("mds", {"stragglers": 2}),
         ("sparse", {"partitions": 6, "redundancy": 1.5})]


@pytest.mark.parametrize("cls", [LogReg, LinReg])
@pytest.mark.parametrize(("codename", "params"), CODES)
def test_one_step_is_the_full_gradient_step(cls, codename, params):
    code = make_code(codename, 6, **params)
    user = cls(samples=300, features=8, seed=1)
    job = coded(user, code)
    theta = np.random.default_rng(0).standard_normal(8) * 0.3
    skip = (0, 1)[: code.params.get("stragglers", 0)] if code.name != "sparse" else ()
    got = step_of(job, theta, decode(job, theta, skip))
    expected = theta - user.step_size * true_gradient(user, theta)
    assert np.allclose(got, expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("cls", [LogReg, LinReg])
@pytest.mark.parametrize("codename", ["frc", "mds"])  # coded on results, and on data (linreg)
def test_the_default_step_is_found_before_the_first_update(cls, codename):
    """λ_max(XᵀX) over every row is rank 0's one-off work: ``prepare_update`` (while the
    set-ups travel) does it, so the first update does not stall the workers for it."""
    user = cls(samples=300, features=8, seed=1)
    job = coded(user, make_code(codename, 6, stragglers=1))
    assert "step_size" not in vars(user)
    job.prepare_update()
    assert vars(user)["step_size"] == user.default_lr()


@pytest.mark.parametrize("cls", [LogReg, LinReg])
def test_training_learns(cls):
    user = cls(samples=400, features=6, seed=2)
    job = coded(user, make_code("frc", 4, stragglers=1))
    theta = job.theta0()
    start = user.loss(theta)
    for _ in range(60):
        theta = step_of(job, theta, decode(job, theta))
    assert user.loss(theta) < 0.5 * start
    if cls is LogReg:
        assert user.accuracy(theta) > 0.85


@pytest.mark.parametrize("cls", [LogReg, LinReg])
def test_partial_sum_step_covers_the_samples_present(cls):
    """FRC with a tolerance: the update is the gradient of the partitions recovered."""
    user = cls(samples=80, features=5, seed=4)
    job = coded(user, make_code("frc", 4, stragglers=1))  # groups [0, 2) and [2, 4)
    theta = np.full(5, 0.2)
    dec = job.code.decoder(tolerance=2)
    assert dec.add(2, job.compute(2, theta))
    assert list(dec.missing_partitions) == [0, 1]
    rows = np.arange(40, 80)  # partitions 2 and 3 of 4 equal ones
    expected = theta - user.step_size * true_gradient(user, theta, rows)
    assert np.allclose(step_of(job, theta, dec), expected)


def test_task_cost_counts_partitions_except_precoded_blocks():
    cpgc = make_code("cpgc", 4, load=2)
    assert list(coded(LogReg(samples=60, features=6), cpgc).task_cost()) == [1, 1, 1, 1, 2, 2, 2, 2]
    assert list(coded(Power(features=8), cpgc).task_cost()) == [1] * 8


class Ridge(GradientJob):
    """A user job defined here only: ridge regression on blocks (X, y), a plain array block for
    the chunking test."""

    def __init__(self, n=120, d=4, additive=True):
        rng = np.random.default_rng(9)
        self.X, self.y = rng.standard_normal((n, d)), rng.standard_normal(n)
        self.dim, self.additive = d, additive
        self.calls = 0

    def blocks(self, k):
        return [(self.X[r], self.y[r]) for r in np.array_split(np.arange(len(self.y)), k)]

    def compute(self, block, theta):
        self.calls += 1
        X, y = block
        return X.T @ (X @ theta - y)

    def step(self, theta, total, covered):
        return theta - 0.01 * (total + 0.1 * theta)


def test_chunking_applies_to_additive_jobs_only():
    code = make_code("uncoded", 3)
    theta = np.ones(4)
    whole = coded(Ridge(), code).compute(0, theta)
    additive, other = coded(Ridge(), code), coded(Ridge(additive=False), code)
    assert np.allclose(additive.compute(0, theta, chunk_rows=7), whole, rtol=1e-12)
    assert additive.job.calls == 6  # 40 rows in chunks of 7
    assert np.array_equal(other.compute(0, theta, chunk_rows=7), whole)
    assert other.job.calls == 1


def test_compute_of_the_wrong_size_is_named():
    class Bad(Ridge):
        def compute(self, block, theta):
            return np.ones(3)

    with pytest.raises(ValueError, match=r"Bad.compute returned 3 values; expected dim = 4"):
        coded(Bad(), make_code("uncoded", 2)).compute(0, np.zeros(4))


def test_blocks_must_match_the_partitions():
    class Short(Ridge):
        def blocks(self, k):
            return super().blocks(k)[:-1]

    with pytest.raises(ValueError, match=r"Short.blocks\(3\) returned 2 blocks; expected 3"):
        coded(Short(), make_code("uncoded", 3))


def test_a_job_without_data_is_refused():
    class NoData(GradientJob):
        dim = 2

    with pytest.raises(ValueError, match="defines neither blocks"):
        coded(NoData(), make_code("uncoded", 2))
    with pytest.raises(TypeError, match="is not a job"):
        coded(object(), make_code("uncoded", 2))


def test_each_kind_of_job_is_registered_once_with_its_code_defaults():
    from mpicoded.jobs import JOB_KINDS, job_kind

    assert [k.base for k in JOB_KINDS] == [GradientJob, MatVecJob]
    assert job_kind(Ridge()).code_defaults == {}
    assert job_kind(MatVecJob.__new__(MatVecJob)).code_defaults == {"target": "each"}
    assert (Ridge.measured_as, MatVecJob.measured_as) == ("gradient", "matvec")
    with pytest.raises(TypeError, match=r"^int is not a job: subclass mpicoded.GradientJob or "
                       r"mpicoded.MatVecJob$"):
        job_kind(3)


class Remote(Ridge):
    """Partitions loaded where they are needed, from the generating seed."""

    blocks = GradientJob.blocks  # no blocks(k): the master ships ids only

    def load_block(self, j, k):
        return Ridge.blocks(self, k)[j]


def test_remote_blocks_are_placed_as_ids_only():
    code = make_code("gfrc", 4, stragglers=1)
    job = coded(Remote(), code)
    blocks, terms = job.placement(code.schedule[0])
    assert job.remote and blocks == {} and terms
    reference = coded(Ridge(), code)
    theta = np.full(4, 0.5)
    for t in range(code.n_tasks):
        assert np.allclose(job.compute(t, theta), reference.compute(t, theta), rtol=1e-12)


def serial_pagerank(user, iterations):
    P = user.transition
    x = user.start()
    for _ in range(iterations):
        x = user.step(x, P @ x)
    return x


@pytest.mark.parametrize(("codename", "params"), [
    ("mds", {"stragglers": 2}), ("sparse", {"partitions": 6, "target": "each"}),
    ("uncoded", {"target": "each"}), ("cpgc", {"load": 2}),
    ("spread", {"stragglers": 2, "target": "each"})])
def test_pagerank_matches_a_serial_power_iteration(codename, params):
    user = PageRank(nodes=500, seed=3)
    job = coded(user, make_code(codename, 6, **params))
    x = job.theta0()
    skip = (0,) if job.code.n_tasks > job.code.n_partitions else ()  # a straggler, if it can
    for _ in range(20):
        x = step_of(job, x, decode(job, x, skip=skip, chunk_rows=37))
    expected = serial_pagerank(user, 20)
    assert np.allclose(x, expected, rtol=1e-10, atol=1e-14)
    assert x.sum() == pytest.approx(1.0) and user.loss(x) < 1e-3


def test_sparse_stays_sparse_and_mds_fills_in():
    user = PageRank(nodes=600, seed=1)
    sparse = coded(user, make_code("sparse", 6, target="each"))
    mds = coded(user, make_code("mds", 6, stragglers=1))
    assert sp.issparse(sparse.block(0)) and sp.issparse(mds.block(0))
    s_coded, plain = sparse.entries()
    m_coded, _ = mds.entries()
    assert s_coded.mean() <= 3 * plain * 1.01  # degree 3: three partitions a row
    assert m_coded.mean() > 4 * plain  # any 5 of 6: a block mixes all 5 partitions
    spread = coded(user, make_code("spread", 6, stragglers=2, target="each"))
    r_coded, r_plain = spread.entries()
    assert r_coded.mean() == pytest.approx(r_plain)  # repetition: a block is a partition


def test_a_sum_code_is_refused_for_a_matvec_job():
    with pytest.raises(ValueError, match="MatVecJob: it needs a code whose target is 'each'"):
        coded(Power(features=6), make_code("frc", 4, stragglers=1))


def test_power_finds_the_leading_eigenvector():
    user = Power(features=30, seed=2)
    job = coded(user, make_code("mds", 5, stragglers=2))
    x = job.theta0()
    for _ in range(80):
        x = step_of(job, x, decode(job, x, skip=(1, 3)))
    w, V = np.linalg.eigh(user.A)
    assert abs(x @ V[:, -1]) == pytest.approx(1.0, abs=1e-9)
    assert user.eigenvalue(x) == pytest.approx(w[-1], abs=1e-9)


def test_missed_blocks_reach_step_as_nan():
    user = Power(features=12, seed=0)
    job = coded(user, make_code("uncoded", 3, target="each"))
    x = job.theta0()
    dec = decode(job, x, skip=(1,), tolerance=1)
    seen = []
    user.step = lambda x, y: seen.append(y) or x  # type: ignore[method-assign]
    job.update(x, dec.result(), dec.missing_partitions, 0)
    assert np.isnan(seen[0][4:8]).all() and np.allclose(seen[0][:4], (user.A @ x)[:4])


def test_snap_edge_lists(tmp_path):
    path = tmp_path / "g.txt"
    path.write_text("# Directed graph\n# FromNodeId\tToNodeId\n0\t3\n3\t0\n3 5\n")
    src, dst = read_edges(path)
    assert list(src) == [0, 3, 3] and list(dst) == [3, 0, 5]
    user = PageRank(graph=str(path))
    x = serial_pagerank(user, 200)
    assert len(x) == 6 and x.sum() == pytest.approx(1.0)  # ids 1, 2, 4 have no edges at all
    assert x[1] == pytest.approx(x[2]) and x[5] > x[1]  # 5 is dangling, linked from 3


@pytest.mark.parametrize(("text", "message"), [("", "no edges"), ("1 x\n", "integer node ids"),
                                               ("1 -2\n", ">= 0")])
def test_bad_edge_lists(tmp_path, text, message):
    path = tmp_path / "g.txt"
    path.write_text(text)
    with pytest.raises(DatasetError, match=message):
        read_edges(path)


def test_job_specs(tmp_path):
    path = tmp_path / "myjob.py"
    path.write_text("from mpicoded.jobs import LinReg\n"
                    "def small():\n    return LinReg(samples=50, features=3)\n"
                    "NOT_A_JOB = 3\n")
    assert isinstance(build_job(f"{path}:small"), LinReg)
    assert isinstance(build_job("mpicoded.jobs:PageRank"), PageRank)
    for spec, message in [(f"{path}:nope", "has no attribute 'nope'"),
                          (f"{path}:NOT_A_JOB", "not a job class or a function"),
                          ("no.such.module:X", "no module named"),
                          (str(tmp_path / "missing.py") + ":X", "no such file"),
                          ("logreg2", "expected a built-in job name")]:
        with pytest.raises(JobSpecError, match=message):
            build_job(spec)


def test_a_factory_must_return_a_job(tmp_path):
    path = tmp_path / "f.py"
    path.write_text("def make():\n    return 'ridge'\n")
    with pytest.raises(JobSpecError, match=r"make\(\) returned a str, not a job"):
        build_job(f"{path}:make")


def test_matvec_job_from_a_plain_matrix_needs_only_three_methods():
    class Scale(MatVecJob):
        def matrix(self):
            return np.diag([2.0, 1.0, 0.5, 0.25])

        def start(self):
            return np.ones(4)

        def step(self, x, y):
            return y

    job = coded(Scale(), make_code("mds", 4, stragglers=1))
    x = job.theta0()
    x = step_of(job, x, decode(job, x, skip=(2,)))
    assert np.allclose(x, [2.0, 1.0, 0.5, 0.25], rtol=1e-10)


def test_load_npz_and_csv(tmp_path):
    X = np.arange(12.0).reshape(4, 3)
    y = np.array([0.0, 1.0, 1.0, 0.0])
    np.savez(tmp_path / "d.npz", X=X, y=y)
    assert np.array_equal(load(tmp_path / "d.npz").X, X)
    np.savetxt(tmp_path / "d.csv", np.column_stack([X, y]), delimiter=",", header="a,b,c,y",
               comments="")
    got = load(tmp_path / "d.csv")
    assert np.array_equal(got.X, X) and np.array_equal(got.y, y)


@pytest.mark.parametrize(("content", "message"), [
    (b"a,b,y\n" + b"1,2,3\n" * 57 + b"1,x,3\n", "line 59, column 2: 'x' is not a number"),
    (b"# made by hand\n" + b"1,2,3\n" * 10 + b"\n1,2\n", "line 13 has 2 values, the lines before 3"),
])
def test_a_bad_csv_line_is_named_by_the_files_own_numbering(tmp_path, content, message):
    path = tmp_path / "d.csv"
    path.write_bytes(content)
    with pytest.raises(DatasetError, match=message) as raised:
        load(path)
    assert "usecols" not in str(raised.value)


@pytest.mark.parametrize(("content", "name", "message"), [
    (None, "missing.npz", "no such file"),
    (b"a,b\n1,x\n", "bad.csv", "non-numeric values or rows of unequal length"),
    (b"1,2\n3\n", "ragged.csv", "non-numeric values or rows of unequal length"),
    (b"hello", "bad.npz", "cannot be read"),
    (b"1,2\n", "d.txt", "unknown format"),
])
def test_bad_datasets(tmp_path, content, name, message):
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(DatasetError, match=message):
        load(path)


def write_svmlight(path, X, y):
    """A LIBSVM file by hand: ``label index:value ...`` with 1-based indices, zeros left out."""
    lines = ["# written by the test"]
    for row, label in zip(X, y, strict=True):
        fields = [f"{j + 1}:{v:.17g}" for j, v in enumerate(row) if v != 0]
        lines.append(" ".join([f"{label:+g}", *fields]))
    path.write_text("\n".join(lines) + "\n")


def test_libsvm_stays_sparse_and_trains_like_the_dense_data(tmp_path):
    """A LIBSVM file loads as CSR with -1/+1 labels mapped to 0/1 for logreg; every code decodes
    the exact gradient from the sparse partitions, and the default step size (from X's top
    singular value, no dense XᵀX) equals the dense one."""
    rng = np.random.default_rng(4)
    X = rng.standard_normal((60, 8)) * (rng.random((60, 8)) < 0.3)
    y = np.where(X @ np.linspace(-1, 1, 8) > 0, 1.0, -1.0)
    write_svmlight(tmp_path / "d.svm", X, y)
    got = load(tmp_path / "d.svm")
    assert sp.issparse(got.X) and got.X.format == "csr" and got.X.shape[0] == 60
    np.testing.assert_array_equal(got.X.toarray(), X[:, :got.X.shape[1]])
    np.testing.assert_array_equal(got.y, y)
    np.savez(tmp_path / "d.npz", X=X[:, :got.X.shape[1]], y=(y > 0).astype(float))
    sparse, dense = LogReg(dataset=str(tmp_path / "d.svm")), LogReg(dataset=str(tmp_path / "d.npz"))
    np.testing.assert_array_equal(sparse.data.y, dense.data.y)
    assert sparse.step_size == pytest.approx(dense.step_size, rel=1e-9)
    for name, params in [("gfrc", {"stragglers": 1}), ("frc", {"stragglers": 1}), ("uncoded", {})]:
        code = make_code(name, 4, **params)
        job, reference = coded(sparse, code), coded(dense, code)
        assert all(sp.issparse(block[0]) for block in job.parts)
        theta = np.linspace(-0.5, 0.5, dense.dim)
        np.testing.assert_allclose(step_of(job, theta, decode(job, theta, chunk_rows=7)),
                                   step_of(reference, theta, decode(reference, theta)),
                                   rtol=1e-12)
    linear = coded(LinReg(dataset=str(tmp_path / "d.svm")), make_code("gfrc", 4, stragglers=1))
    theta = np.ones(dense.dim)
    np.testing.assert_allclose(step_of(linear, theta, decode(linear, theta)),
                               theta - linear.job.step_size * got.X.T @ (got.X @ theta - y) / 60,
                               rtol=1e-12)


@pytest.mark.parametrize(("text", "message"), [
    ("+1 1:0.5 3:2\n-1 2:x\n", "line 2: '2:x' is not index:value"),
    ("# header\n+1 1:0.5\nyes 1:2\n", "line 3: the label 'yes' is not a number"),
    ("+1 1:0.5\n+1 1 2\n", "line 2: '1' is not index:value"),
])
def test_malformed_libsvm_lines_are_named(tmp_path, text, message):
    path = tmp_path / "bad.libsvm"
    path.write_text(text)
    with pytest.raises(DatasetError, match=f"dataset {path}: {message}"):
        load(path)


@pytest.mark.parametrize("shape", [(40, 12), (12, 40), (30, 30)])
def test_the_default_step_is_the_same_from_either_side(tmp_path, monkeypatch, shape):
    """λ_max(XᵀX) from XᵀX, from XXᵀ (many columns) and by Lanczos (both sides large, a wide
    memory map, sparse data) agree with ‖X‖₂²."""
    X = np.random.default_rng(5).standard_normal(shape)
    np.save(tmp_path / "x.npy", X)
    for dense_gram in (40, 12, 1):
        monkeypatch.setattr(sample, "DENSE_GRAM", dense_gram)
        for form in (X, np.load(tmp_path / "x.npy", mmap_mode="r"), sp.csr_matrix(X)):
            assert sample.gram_top_eigenvalue(form) == pytest.approx(np.linalg.norm(X, 2) ** 2,
                                                                     rel=1e-10)


def test_the_default_step_of_wide_data_needs_no_d_by_d_gram():
    """20 rows of 5000 features (0.8 MB): XᵀX would take 200 MB, XXᵀ takes 3 kB."""
    import tracemalloc

    X = np.random.default_rng(6).standard_normal((20, 5000))
    tracemalloc.start()
    try:
        value = sample.gram_top_eigenvalue(X)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert value == pytest.approx(np.linalg.norm(X, 2) ** 2, rel=1e-10)
    assert peak < 8 * 2**20


def test_a_npy_dataset_is_memory_mapped_and_read_by_the_workers(tmp_path):
    """A .npy (last column the target) is memory-mapped: rank 0 places partition ids only,
    each worker reads its own rows (load_block), and decoding is that of the data in memory."""
    data = synthetic("logreg", 90, 4, seed=2)
    np.save(tmp_path / "d.npy", np.column_stack([data.X, data.y]))
    np.savez(tmp_path / "d.npz", X=data.X, y=data.y)
    mapped, plain = LogReg(dataset=str(tmp_path / "d.npy")), LogReg(dataset=str(tmp_path / "d.npz"))
    assert mapped.data.mapped and not plain.data.mapped
    assert mapped.step_size == pytest.approx(plain.step_size, rel=1e-12)
    code = make_code("gfrc", 3, stragglers=1)
    job, reference = coded(mapped, code), coded(plain, code)
    blocks, terms = job.placement(code.schedule[0])
    assert job.remote and blocks == {} and terms
    theta = np.linspace(-1, 1, 4)
    np.testing.assert_allclose(step_of(job, theta, decode(job, theta)),
                               step_of(reference, theta, decode(reference, theta)), rtol=1e-12)
    worker = LogReg(dataset=str(tmp_path / "d.npy"))  # another rank's copy: no data loaded
    X, y = worker.load_block(1, 3)
    assert "data" not in vars(worker) and X.flags.c_contiguous and not isinstance(X, np.memmap)
    np.testing.assert_array_equal(X, data.X[30:60])
    np.testing.assert_array_equal(y, data.y[30:60])
    np.save(tmp_path / "f.npy", np.ones((3, 2), dtype=np.float32))
    with pytest.raises(DatasetError, match="must hold float64"):
        load(tmp_path / "f.npy")


def test_npz_without_arrays(tmp_path):
    np.savez(tmp_path / "d.npz", A=np.ones(3))
    with pytest.raises(DatasetError, match="needs arrays 'X' and 'y'"):
        load(tmp_path / "d.npz")


def test_logreg_refuses_non_binary_labels(tmp_path):
    data = synthetic("linreg", 20, 2, seed=0)
    np.savez(tmp_path / "d.npz", X=data.X, y=data.y)
    with pytest.raises(DatasetError, match="labels 0/1 or -1/\\+1"):
        coded(LogReg(dataset=str(tmp_path / "d.npz")), make_code("uncoded", 2))


def test_too_many_partitions_for_the_data():
    with pytest.raises(DatasetError, match="need at least 8 rows"):
        coded(LinReg(samples=5, features=2), make_code("uncoded", 8))


@pytest.mark.parametrize("cls", [LogReg, LinReg])
@pytest.mark.parametrize(("codename", "params"), [("frc", {"stragglers": 1}),
                                                  ("mds", {"stragglers": 2}),
                                                  ("cpgc", {"load": 2})])
def test_the_decoded_loss_is_rank_0s_full_data_loss(cls, codename, params):
    """Workers return each partition's loss beside its gradient: decoded, it equals the loss
    rank 0 would compute over all the data (chunked or not)."""
    user = cls(samples=500, features=6, seed=3)
    job = coded(user, make_code(codename, 6, **params))
    assert job.free_loss and job.result_size == 7
    theta = np.random.default_rng(1).standard_normal(6) * 0.2
    job.update(theta, *(lambda d: (d.result(), d.missing_partitions))(
        decode(job, theta, chunk_rows=17)), 0)
    assert job.decoded_loss == pytest.approx(user.loss(theta), rel=1e-12)


def test_under_a_tolerance_the_loss_covers_the_partitions_decoded():
    user = LinReg(samples=80, features=5, seed=4)
    job = coded(user, make_code("frc", 4, stragglers=1))  # groups [0, 2) and [2, 4)
    theta = np.full(5, 0.2)
    dec = job.code.decoder(tolerance=2)
    assert dec.add(2, job.compute(2, theta))
    job.update(theta, dec.result(), dec.missing_partitions, 0)
    X, y = user.data.X[40:], user.data.y[40:]
    assert job.decoded_loss == pytest.approx(0.5 * np.mean((X @ theta - y) ** 2), rel=1e-12)


@pytest.mark.parametrize("cls", [LogReg, LinReg])
@pytest.mark.parametrize("scale", [0.1, 30.0, 1000.0])  # up to margins far past exp's range
def test_the_fused_gradient_and_loss_equal_the_two_apart(cls, scale):
    """``compute_with_loss`` shares X θ between the two; it must agree with ``compute`` and
    ``block_loss`` (finite, to rounding) however large the margins."""
    user = cls(samples=300, features=4, seed=5)
    block = user.blocks(3)[1]
    theta = np.random.default_rng(2).standard_normal(4) * scale
    value, loss = user.compute_with_loss(block, theta)
    expected = user.compute(block, theta)
    assert np.isfinite(loss) and np.all(np.isfinite(value))
    assert np.allclose(value, expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())
    assert loss == pytest.approx(user.block_loss(block, theta), rel=1e-12)


def test_a_subclass_redefining_compute_is_not_given_its_parents_fused_gradient():
    """LogReg fuses gradient and loss; a subclass that changes compute alone must get its own
    compute (and the parent's block_loss) on the workers, not the parent's fused pair."""

    class Scaled(LogReg):
        def compute(self, block, theta):
            return 2.0 * super().compute(block, theta)

    user = Scaled(samples=120, features=3, seed=1)
    job = coded(user, make_code("uncoded", 3))
    theta = np.full(3, 0.3)
    value = job.compute(0, theta)
    block = user.blocks(3)[0]
    assert np.allclose(value[:-1], 2.0 * LogReg.compute(user, block, theta), rtol=1e-12)
    assert value[-1] == pytest.approx(user.block_loss(block, theta), rel=1e-12)


@pytest.mark.parametrize(("start", "stop"), [(0, 7), (3, 11), (5, 40), (12, 12), (25, 30)])
def test_a_csr_matrixs_rows_are_taken_without_copying_its_entries(start, stop):
    """take_rows of a CSR matrix: the same rows as scipy's slice (clipped at the end), over
    the matrix's own data and indices; arrays and other formats slice as numpy and scipy do."""
    from mpicoded.jobs.rows import take_rows

    M = sp.random(20, 9, density=0.4, format="csr", random_state=1)
    got = take_rows(M, start, stop)
    assert sp.isspmatrix_csr(got) and got.shape == M[start:stop].shape
    assert (got != M[start:stop]).nnz == 0
    if got.nnz:
        assert np.shares_memory(got.data, M.data) and np.shares_memory(got.indices, M.indices)
    X, y = np.arange(60.0).reshape(20, 3), np.arange(20.0)
    Xs, ys = take_rows((X, y), start, stop)
    assert np.array_equal(Xs, X[start:stop]) and np.array_equal(ys, y[start:stop])
    assert np.shares_memory(Xs, X) or not len(Xs)
    C = M.tocsc()
    assert (take_rows(C, start, stop) != C[start:stop]).nnz == 0


def test_a_dense_run_starts_without_scipy():
    """Every rank imports the runtime and the built-in jobs; SciPy (0.15 s of a rank's 0.29 s
    import) comes in only with sparse data, which has imported it already."""
    import subprocess
    import sys

    code = ("import sys, mpicoded.train, mpicoded.runtime.api, mpicoded.jobs.logreg; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]", done.stdout


def test_is_sparse_names_scipy_matrices_and_arrays_only():
    from mpicoded.jobs.rows import is_sparse

    assert is_sparse(sp.csr_matrix(np.eye(3))) and is_sparse(sp.csc_array(np.eye(3)))
    assert not is_sparse(np.eye(3)) and not is_sparse([[1.0]]) and not is_sparse(None)


def test_the_sigmoid_is_scipys_expit_to_two_ulps():
    """Where expit is not 0 (z > -709: below, ours goes on in subnormals), to the last bits."""
    from scipy.special import expit

    from mpicoded.jobs.logreg import sigmoid

    z = np.concatenate([np.linspace(-700, 800, 40001), [0.0, -0.0, 1e-300, -1e-300, 37.0]])
    sigma, e = sigmoid(z)
    assert np.allclose(sigma, expit(z), rtol=2 * np.spacing(1.0), atol=0)
    assert np.array_equal(e, np.exp(-np.abs(z)))
    tail, _ = sigmoid(np.array([-1e4, 1e4]))
    assert tail.tolist() == [0.0, 1.0]


def test_eval_every_without_an_evaluation_is_refused_with_the_fix():
    from mpicoded.options import RunOptions, UsageError
    from mpicoded.plan import plan_run

    with pytest.raises(UsageError, match="--eval-every: logreg has no evaluation.*drop it"):
        plan_run(LogReg(samples=300, features=4), RunOptions(eval_every=5), 4)
