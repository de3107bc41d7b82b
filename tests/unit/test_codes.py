"""Every code, every straggler set: decodable, and exactly the uncoded result."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpicoded.codes import Code, GenericDecoder, available_codes, code_parameters, make_code

RTOL = 1e-10


def partition_values(k: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((k, 7))


def finished_tasks(code: Code, stragglers) -> list[int]:
    """Every task of the workers outside the straggler set, in a shuffled arrival order."""
    tasks = [t for w in range(code.n_workers) if w not in stragglers for t in code.schedule[w]]
    np.random.default_rng(len(tasks)).shuffle(tasks)
    return tasks


def decode(code: Code, tasks, f: np.ndarray, tolerance: int = 0):
    dec = code.decoder(tolerance)
    for t in tasks:
        if dec.add(t, code.B[t] @ f):
            break
    return dec


def assert_exact(code: Code, dec, f: np.ndarray, rtol: float = RTOL) -> None:
    assert dec.ready
    got = dec.result()
    if code.target == "sum":
        keep = np.setdiff1d(np.arange(code.n_partitions), dec.missing_partitions)
        true = f[keep].sum(axis=0)
        assert np.linalg.norm(got - true) <= rtol * np.linalg.norm(true)
    else:
        missing = dec.missing_partitions
        assert np.isnan(got[missing]).all()
        keep = np.setdiff1d(np.arange(code.n_partitions), missing)
        assert np.linalg.norm(got[keep] - f[keep]) <= rtol * np.linalg.norm(f[keep])


def sum_code_cases(name: str, n_max: int = 12):
    for n in range(1, n_max + 1):
        for s in range(n):
            if name == "frc" and n % (s + 1):
                continue
            yield n, s


@pytest.mark.parametrize("name", ["frc", "gfrc", "cyclic"])
def test_every_straggler_set_decodes_exactly(name):
    for n, s in sum_code_cases(name):
        code = make_code(name, n, stragglers=s)
        f = partition_values(code.n_partitions)
        for stragglers in itertools.combinations(range(n), s):
            dec = decode(code, finished_tasks(code, stragglers), f)
            assert dec.ready, (n, s, stragglers)
            assert len(dec.missing_partitions) == 0
            assert_exact(code, dec, f)


@pytest.mark.parametrize("target", ["sum", "each"])
def test_uncoded_needs_everyone(target):
    code = make_code("uncoded", 5, target=target)
    f = partition_values(5)
    dec = decode(code, [0, 1, 2, 3], f)
    assert not dec.ready
    dec.add(4, f[4])
    assert_exact(code, dec, f)


def test_mds_every_straggler_set_decodes_exactly():
    worst = 0.0
    for n in range(1, 13):
        for s in range(n):
            code = make_code("mds", n, stragglers=s)
            worst = max(worst, code.params["worst_condition"])
            f = partition_values(code.n_partitions)
            for stragglers in itertools.combinations(range(n), s):
                dec = decode(code, finished_tasks(code, stragglers), f)
                assert dec.ready and dec.results_used == n - s, (n, s, stragglers)
                assert_exact(code, dec, f, rtol=1e-8)
    assert worst < 1e6


@pytest.mark.parametrize("n", [20, 25, 30])
def test_mds_up_to_30_workers_within_1e8(n):
    rng = np.random.default_rng(n)
    for s in (1, n // 4, n // 2):
        code = make_code("mds", n, stragglers=s)
        f = partition_values(code.n_partitions)
        for _ in range(30):
            stragglers = tuple(rng.choice(n, size=s, replace=False))
            assert_exact(code, decode(code, finished_tasks(code, stragglers), f), f, rtol=1e-8)


def test_mds_with_partitions_and_redundancy():
    code = make_code("mds", 6, partitions=10, redundancy=1.5)
    assert code.B.shape == (15, 10) and sum(code.loads) == 15
    assert max(code.loads) - min(code.loads) <= 1
    f = partition_values(10)
    order = np.random.default_rng(0).permutation(15)
    dec = decode(code, order, f)
    assert dec.results_used == 10
    assert_exact(code, dec, f, rtol=1e-8)


# ---- GFRC (paper 003) ---------------------------------------------------------------------------


def class_of(code: Code) -> list[int]:
    s = code.params["stragglers"]
    return [w % (s + 1) for w in range(code.n_workers)]


@pytest.mark.parametrize(("n", "s"), [(7, 2), (10, 3), (11, 4), (12, 4), (9, 7)])
def test_gfrc_structure_when_s_plus_1_does_not_divide_n(n, s):
    code = make_code("gfrc", n, stragglers=s)
    B = code.B
    assert set(np.unique(B)) <= {0.0, 1.0}
    assert (B.sum(axis=0) == s + 1).all()  # every partition in exactly s + 1 tasks
    assert code.params["total_load"] == n * (s + 1)  # Lemma 5's minimum, k(s+1) with k = n
    sizes = np.bincount(class_of(code))
    assert sizes.max() - sizes.min() <= 1
    for c in range(s + 1):
        members = [w for w in range(n) if class_of(code)[w] == c]
        assert (B[members].sum(axis=0) == 1).all()  # each class covers the data exactly once
        loads = B[members].sum(axis=1)
        assert loads.max() - loads.min() <= 1


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 60), data=st.data())
def test_gfrc_random_n_s_k(n, data):
    s = data.draw(st.integers(0, n - 1))
    k = data.draw(st.integers(-(-n // (s + 1)), 3 * n))
    code = make_code("gfrc", n, stragglers=s, partitions=k)
    assert code.B.shape == (n, k) and code.params["total_load"] == k * (s + 1)
    stragglers = data.draw(st.sets(st.integers(0, n - 1), min_size=s, max_size=s))
    f = partition_values(k, seed=n)
    dec = decode(code, finished_tasks(code, stragglers), f)
    assert dec.ready and set(np.unique(code.B[dec._path].sum(axis=0))) == {1.0}
    assert_exact(code, dec, f)


def test_gfrc_speeds_give_fast_workers_more_and_stay_decodable():
    speeds = [4.0, 1, 1, 1, 4, 1, 1, 1, 2, 2]
    code = make_code("gfrc", 10, stragglers=2, partitions=40, speeds=speeds)
    loads = code.B.sum(axis=1)
    assert loads[0] > loads[1] and loads[4] > loads[5] and loads[8] > loads[1]
    f = partition_values(40)
    for stragglers in itertools.combinations(range(10), 2):
        assert_exact(code, decode(code, finished_tasks(code, stragglers), f), f)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 30), data=st.data())
def test_cyclic_random_n_s(n, data):
    s = data.draw(st.integers(0, n - 1))
    stragglers = data.draw(st.sets(st.integers(0, n - 1), min_size=s, max_size=s))
    code = make_code("cyclic", n, stragglers=s)
    f = partition_values(n, seed=n)
    dec = decode(code, finished_tasks(code, stragglers), f)
    assert dec.ready
    assert np.allclose(dec.result(), f.sum(axis=0), rtol=1e-8, atol=1e-8)


def test_interval_decoder_chains_across_classes():
    """Runs of different classes that meet at a shared boundary also decode: beyond s stragglers."""
    code = make_code("gfrc", 7, stragglers=2, partitions=12)  # classes {0,3,6} {1,4} {2,5}
    runs = [(int(np.flatnonzero(row)[0]), int(np.flatnonzero(row)[-1]) + 1) for row in code.B]
    assert runs == [(0, 4), (0, 6), (0, 6), (4, 8), (6, 12), (6, 12), (8, 12)]
    f = partition_values(12)
    dec = decode(code, [3, 6, 1], f)  # workers 0, 2 and 4 straggle: no class is complete
    assert not dec.ready
    dec.add(5, code.B[5] @ f)  # [0, 6) from class 1 and [6, 12) from class 2
    assert dec.results_used == 2
    assert_exact(code, dec, f)


def test_interval_decoder_tolerance_skips_fewest_partitions():
    code = make_code("frc", 6, stragglers=1)  # groups [0,2) [2,4) [4,6)
    f = partition_values(6)
    dec = decode(code, [0, 5], f, tolerance=2)
    assert list(dec.missing_partitions) == [2, 3] and dec.results_used == 2
    assert_exact(code, dec, f)


# ---- paper 001: UC-MMC, CPGC, MCC ---------------------------------------------------------------


def test_section_2_example_matrices():
    """A_u, A_c, A_m of paper 001, Section 2 (0-based partitions)."""
    def schedule_of(code):
        return [[tuple(np.flatnonzero(code.B[t])) for t in tasks] for tasks in code.schedule]

    ucmmc = make_code("ucmmc", 4, load=2)
    assert schedule_of(ucmmc) == [[(0,), (1,)], [(1,), (2,)], [(2,), (3,)], [(3,), (0,)]]
    cpgc = make_code("cpgc", 4, load=2)
    assert schedule_of(cpgc) == [[(0,), (2, 3)], [(1,), (0, 2)], [(2,), (1, 3)], [(3,), (0, 1)]]
    mcc = make_code("mcc", 4, load=2)
    assert mcc.messages == "single"
    for w, (first, second) in enumerate(mcc.schedule):
        assert list(mcc.B[first]) == [1, 0, 2.0**w, 0] and list(mcc.B[second]) == [0, 1, 0, 2.0**w]


# (N2, N1, N0) -> (MCC, UC-MMC, CPGC): paper 001, Table 1 (full gradient) and Table 2 (partial).
# Table 1's last row prints N0 = 1, which makes five workers; N0 = 0 is the only reading that fits.
TABLE_1 = {(4, 0, 0): (1, 1, 1), (3, 1, 0): (4, 4, 4), (3, 0, 1): (4, 4, 4), (2, 2, 0): (6, 6, 6),
           (2, 1, 1): (12, 8, 12), (2, 0, 2): (6, 2, 6), (1, 3, 0): (0, 4, 4),
           (1, 2, 1): (0, 4, 8), (0, 4, 0): (0, 1, 1)}
TABLE_2 = {(4, 0, 0): (1, 1, 1), (3, 1, 0): (4, 4, 4), (3, 0, 1): (4, 4, 4), (2, 2, 0): (6, 6, 6),
           (2, 1, 1): (12, 12, 12), (2, 0, 2): (6, 6, 6), (1, 3, 0): (0, 4, 4),
           (1, 2, 1): (0, 12, 12), (1, 1, 2): (0, 8, 8), (0, 4, 0): (0, 1, 1),
           (0, 3, 1): (0, 4, 4)}


def score_vector_counts(tolerance: int) -> dict[tuple[int, int, int], tuple[int, int, int]]:
    """For each cumulative computation type, the score vectors from which each scheme decodes.

    Worker i has finished the first c_i of its two computations; MCC sends nothing until both
    are done, so only workers with c_i = 2 count for it.
    """
    codes = [make_code(name, 4, load=2) for name in ("mcc", "ucmmc", "cpgc")]
    counts: dict = {}
    for score in itertools.product(range(3), repeat=4):
        kind = (score.count(2), score.count(1), score.count(0))
        row = counts.setdefault(kind, [0, 0, 0])
        for i, code in enumerate(codes):
            done = [code.schedule[w][j] for w in range(4) for j in range(score[w])
                    if code.messages == "multi" or score[w] == 2]
            dec = code.decoder(tolerance)
            for t in done:
                dec.add(t)
            row[i] += dec.ready
    return {kind: tuple(row) for kind, row in counts.items() if any(row)}


def test_table_1_full_gradient_counts():
    assert score_vector_counts(tolerance=0) == TABLE_1


def test_table_2_partial_gradient_counts():
    assert score_vector_counts(tolerance=1) == TABLE_2


def test_section_4_1_construction():
    code = make_code("cpgc", 20, load=3)
    assert code.params["rows"] == "v1:-1,v2:-1,v3:3,v4:-2"
    second = [tuple(np.flatnonzero(code.B[code.schedule[w][1]]) + 1) for w in range(20)]
    third = [tuple(np.flatnonzero(code.B[code.schedule[w][2]]) + 1) for w in range(20)]
    v1 = [(2 * i + 1, 2 * i + 2) for i in range(10)]
    v2 = [(a, a + 2) for a in range(1, 19) if a % 4 in (1, 2)]
    v3 = [(i, 21 - i) for i in range(1, 11)]
    v4 = [(i, 10 + i) for i in range(1, 11)]
    roll = lambda v, d: v[-d % len(v):] + v[:-d % len(v)]  # circshift: d right shifts  # noqa: E731
    assert second == roll(v1, -1) + roll(v2, -1)
    assert third == roll(v3, 3) + roll(v4, -2)


@pytest.mark.parametrize(("n", "load"), [(4, 2), (8, 3), (12, 4), (20, 3), (20, 6), (40, 4),
                                         (100, 3), (1000, 3)])
def test_cpgc_structure(n, load):
    code = make_code("cpgc", n, load=load)
    degrees = np.count_nonzero(code.B, axis=1)
    assert code.B.shape == (n * load, n) and degrees.max() <= 2
    for w, tasks in enumerate(code.schedule):
        assert len(tasks) == load and degrees[tasks[0]] == 1 and code.B[tasks[0], w] == 1
        touched = np.concatenate([np.flatnonzero(code.B[t]) for t in tasks])
        assert len(touched) == len(set(touched)), f"worker {w} computes a partition twice"


@pytest.mark.parametrize("name", ["cpgc", "ucmmc", "mcc"])
def test_paper_001_codes_decode_exactly_with_and_without_tolerance(name):
    code = make_code(name, 20, load=3)
    f = partition_values(20)
    rng = np.random.default_rng(1)
    for tolerance in (0, 1, 2):
        for _ in range(20):
            done = [t for w in range(20) for t in code.schedule[w][: rng.integers(0, 4)]
                    if code.messages == "multi" or rng.random() < 0.5]
            dec = decode(code, list(rng.permutation(done)), f, tolerance)
            if dec.ready:
                assert len(dec.missing_partitions) <= tolerance
                assert_exact(code, dec, f, rtol=1e-8)


# ---- sparse (paper 000, appendix) ---------------------------------------------------------------


def test_sparse_shape_degree_and_measured_probability():
    code = make_code("sparse", 10, partitions=40, redundancy=1.25, degree=3)
    assert code.B.shape == (50, 40) and (np.count_nonzero(code.B, axis=1) == 3).all()
    assert sum(code.loads) == 50 and code.target == "sum"
    column_use = np.count_nonzero(code.B, axis=0)
    assert column_use.max() - column_use.min() <= 2
    p = code.params["decode_probability"]
    assert 0.8 <= p <= 1.0
    # the measured probability is what random sets of K results really achieve
    rng = np.random.default_rng(5)
    f = partition_values(40)
    hits = 0
    for _ in range(200):
        dec = decode(code, rng.choice(50, size=40, replace=False), f)
        hits += dec.ready
        if dec.ready:
            assert_exact(code, dec, f, rtol=1e-8)
    assert abs(hits / 200 - p) < 0.1


def test_sparse_all_tasks_decode():
    code = make_code("sparse", 4, partitions=12, redundancy=1.5, degree=2)
    f = partition_values(12)
    assert_exact(code, decode(code, range(18), f), f, rtol=1e-8)


# ---- decoders in general ------------------------------------------------------------------------


def test_peeling_partial_recovery_marks_missing_rows():
    code = make_code("cpgc", 4, load=2)  # W1, W3+W4 | W2, W1+W3 | W3, W2+W4 | W4, W1+W2
    f = partition_values(4)
    dec = decode(code, [0, 5, 1], f, tolerance=1)  # W1, W1+W3 -> W3, W2
    assert dec.ready and list(dec.missing_partitions) == [3]
    assert_exact(code, dec, f)


def test_generic_decoder_each_target():
    B = np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0], [1.0, 0.0, 1.0], [1.0, 2.0, 3.0]])
    code = Code("test", B, ((0, 1), (2, 3)), "each", GenericDecoder)
    f = partition_values(3)
    dec = code.decoder()
    assert not dec.add(0, B[0] @ f)
    assert not dec.add(1, B[1] @ f)
    assert list(dec.missing_partitions) == [0, 1, 2]
    assert dec.add(3, B[3] @ f)
    assert_exact(code, dec, f)


@pytest.mark.parametrize("name", ["frc", "cyclic", "cpgc"])
def test_duplicates_and_results_after_ready_are_ignored(name):
    code = make_code(name, 6, **({"load": 2} if name == "cpgc" else {"stragglers": 1}))
    f = partition_values(6)
    dec = code.decoder()
    dec.add(0, code.B[0] @ f)
    dec.add(0, code.B[0] @ f)
    assert dec.tasks == [0]
    for t in range(1, code.n_tasks):
        if dec.add(t, code.B[t] @ f):
            break
    used, before = dec.results_used, list(dec.tasks)
    assert dec.add(code.n_tasks - 1, np.full(7, 1e9))  # a late result changes nothing
    assert dec.tasks == before and dec.results_used == used
    assert_exact(code, dec, f)


def test_result_before_ready_raises():
    dec = make_code("frc", 4, stragglers=1).decoder()
    dec.add(0, np.ones(3))
    with pytest.raises(RuntimeError, match="not ready"):
        dec.result()


def test_task_out_of_range():
    with pytest.raises(ValueError, match=r"task=9 is out of range: allowed \[0, 3\]"):
        make_code("frc", 4, stragglers=1).decoder().add(9)


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("nope", {}, "code='nope' is unknown"),
        ("frc", {"stragglers": 2}, "stragglers=2: frc needs"),
        ("frc", {"stragglers": 4}, r"stragglers=4 is out of range: allowed in \[0, 3\]"),
        ("gfrc", {"stragglers": 4}, r"stragglers=4 is out of range: allowed in \[0, 3\]"),
        ("gfrc", {"stragglers": 1, "partitions": 1}, "partitions=1 is out of range: allowed >= 2"),
        ("gfrc", {"speeds": [1, 2]}, "speeds must be 4 positive numbers"),
        ("cyclic", {"stragglers": -1}, "stragglers=-1 is out of range"),
        ("cyclic", {"stragglers": 1.5}, "stragglers must be an integer"),
        ("cyclic", {"load": 2}, "takes no parameter"),
        ("uncoded", {"target": "all"}, "target='all' is not allowed"),
        ("cpgc", {"load": 0}, r"load=0 is out of range: allowed in \[1, 4\]"),
        ("cpgc", {"load": 3}, r"load=3: cpgc on 4 workers places only 2 .* allowed load in \[1, 2\]"),
        ("ucmmc", {"load": 5}, r"load=5 is out of range: allowed in \[1, 4\]"),
        ("mcc", {"load": 0}, "load=0 is out of range"),
        ("mds", {"stragglers": 4}, r"stragglers=4 is out of range: allowed in \[0, 3\]"),
        ("mds", {"stragglers": 1, "partitions": 3}, "either stragglers or partitions"),
        ("mds", {"redundancy": 2.0}, "redundancy needs partitions"),
        ("mds", {"partitions": 3, "redundancy": 0.5}, "redundancy=0.5 is out of range"),
        ("sparse", {"partitions": 0}, "partitions=0 is out of range"),
        ("sparse", {"partitions": 8, "degree": 9}, r"degree=9 is out of range: allowed in \[1, 8\]"),
        ("sparse", {"partitions": 8, "redundancy": 0.9}, "redundancy=0.9 is out of range"),
        ("sparse", {"partitions": 8, "redundancy": 1.0, "degree": 0}, "degree=0 is out of range"),
    ],
)
def test_invalid_parameters_name_the_parameter(name, params, message):
    with pytest.raises(ValueError, match=message):
        make_code(name, 4, **params)


def test_cpgc_needs_even_workers():
    with pytest.raises(ValueError, match="n_workers=5: cpgc pairs partitions and needs an even"):
        make_code("cpgc", 5, load=2)


def test_invalid_n_workers():
    with pytest.raises(ValueError, match="n_workers=0 is out of range"):
        make_code("frc", 0)


def test_invalid_tolerance():
    with pytest.raises(ValueError, match="tolerance=9 is out of range"):
        make_code("frc", 4, stragglers=1).decoder(tolerance=9)
    with pytest.raises(ValueError, match="allowed tolerance 0"):
        make_code("cyclic", 4, stragglers=1).decoder(tolerance=1)


def test_registry_lists_every_code():
    assert available_codes() == ["cpgc", "cyclic", "frc", "gfrc", "mcc", "mds", "sparse", "spread",
                                 "ucmmc", "uncoded"]


def test_rebuild_keeps_the_family_and_its_parameters_for_the_survivors():
    from mpicoded.codes import rebuild

    frc = make_code("frc", 6, stragglers=1)
    assert (rebuild(frc, 4).name, rebuild(frc, 4).built_with) == ("frc", {"stragglers": 1})
    # frc s=2 needs 3 | n: on 4 workers the family remains with s lowered to 1
    assert rebuild(make_code("frc", 6, stragglers=2), 4).built_with == {"stragglers": 1}
    cpgc = rebuild(make_code("cpgc", 10, load=3), 8)
    assert (cpgc.name, cpgc.n_workers, cpgc.built_with) == ("cpgc", 8, {"load": 3})
    # cpgc with r = 3 does not exist on 6 workers: the family remains with r lowered to 2
    assert rebuild(make_code("cpgc", 8, load=3), 6).built_with == {"load": 2}
    mds = rebuild(make_code("mds", 10, partitions=8, redundancy=1.25), 7)
    assert (mds.name, mds.n_partitions, mds.n_tasks) == ("mds", 8, 10)
    # cpgc needs an even number of workers: none with 5, so GFRC
    assert rebuild(make_code("cpgc", 6, load=2), 5).name == "gfrc"
    # as many workers as before (the code itself could not decode): GFRC, not the same code
    same = rebuild(make_code("frc", 6, stragglers=1), 6)
    assert (same.name, same.params["stragglers"]) == ("gfrc", 1)


def test_tolerance_is_rescaled_as_the_same_fraction():
    from mpicoded.codes import rescaled_tolerance

    old, new = make_code("cpgc", 20, load=3), make_code("cpgc", 10, load=3)
    assert rescaled_tolerance(2, old, new) == 1  # 10% of 20 partitions, 10% of 10
    assert rescaled_tolerance(1, old, new) == 0  # 5% of 10 is less than one partition
    assert rescaled_tolerance(2, old, make_code("cyclic", 10, stragglers=1)) == 0  # none allowed


@pytest.mark.parametrize("n", range(1, 9))
def test_spread_every_straggler_set_decodes_exactly(n):
    for s in range(n):
        code = make_code("spread", n, stragglers=s)
        f = partition_values(code.n_partitions)
        for stragglers in itertools.combinations(range(n), s):
            dec = decode(code, finished_tasks(code, stragglers), f)
            assert dec.ready and len(dec.missing_partitions) == 0, (n, s, stragglers)
            assert_exact(code, dec, f)


@pytest.mark.parametrize(("n", "s"), [(6, 1), (6, 2), (7, 2), (9, 1)])
def test_spread_gives_every_set_of_s_plus_1_workers_one_partition(n, s):
    """C(n, s+1) partitions (up to MAX_PARTITIONS), each held by exactly one set of s+1
    workers, every set once: a worker holds C(n-1, s), (s+1)/n of the data, as GFRC.
    Statically a pair's shared partition comes early in one holder's list and late in the
    other's (s=1: positions add to n-2)."""
    from math import comb

    code = make_code("spread", n, stragglers=s)
    held = [frozenset(w for w, tasks in enumerate(code.schedule) if j in tasks)
            for j in range(code.n_partitions)]
    assert len(set(held)) == comb(n, s + 1) == code.n_partitions
    assert all(len(h) == s + 1 for h in held)
    assert code.loads == [comb(n - 1, s)] * n
    if s == 1:
        position = [{j: i for i, j in enumerate(tasks)} for tasks in code.schedule]
        for j, (a, b) in enumerate(sorted(h) for h in held):
            assert position[a][j] + position[b][j] == n - 2


@pytest.mark.parametrize(("n", "s", "k"), [(20, 1, 40), (20, 2, 40), (30, 3, 30), (8, 3, 18)])
def test_spread_past_the_partition_budget_takes_cyclic_steps(n, s, k):
    """Past MAX_PARTITIONS (C(20, 2) = 190 partitions made partial work 3.7x slower than gfrc),
    the partitions are cyclic sets {j, j+d, ..., j+s*d} of a few steps d: k of them, distinct,
    each on s+1 workers, every worker the same load and 2 s partners a step (all n - 1 at
    most): steps whose partners are new are taken first."""
    from mpicoded.codes.spread import MAX_PARTITIONS

    code = make_code("spread", n, stragglers=s)
    held = [frozenset(w for w, tasks in enumerate(code.schedule) if j in tasks)
            for j in range(code.n_partitions)]
    assert code.n_partitions == k <= max(MAX_PARTITIONS, n) and len(set(held)) == k
    assert all(len(h) == s + 1 for h in held)
    assert len(set(code.loads)) == 1 and code.loads[0] * n == k * (s + 1)
    partners = [set().union(*(h for h in held if w in h)) - {w} for w in range(n)]
    want = min(n - 1, 2 * s * len(code.params["steps"]))
    assert all(len(p) == want for p in partners), (code.params["steps"], partners)


@pytest.mark.parametrize("name", ["uncoded", "gfrc", "cyclic"])
def test_float32_results_are_summed_in_float64(name):
    """Results that travel as float32 are kept as they came and widened as they are added: the
    decoded sum is the float64 sum of their float32 values, not a float32 sum."""
    code = make_code(name, n_workers=6, **({} if name == "uncoded" else
                                           {"stragglers": 1}))
    f = (partition_values(code.n_partitions) * 1e4 + 1e8).astype(np.float32)
    dec = code.decoder()
    for t in finished_tasks(code, set()):
        value = (code.B[t] @ f.astype(np.float64)).astype(np.float32)
        if dec.add(t, value):
            break
    got = dec.result()
    assert got.dtype == np.float64
    kept = [dec.values[t] for t in dec.used]
    assert all(v.dtype == np.float32 for v in kept)
    if name in ("uncoded", "gfrc"):  # a sum of the values used, each once, unrounded
        np.testing.assert_array_equal(got, np.sum([v.astype(np.float64) for v in kept], axis=0))
    np.testing.assert_allclose(got, f.astype(np.float64).sum(axis=0), rtol=1e-6)


SUM_CODES = [("uncoded", {}), ("frc", {"stragglers": 1}), ("gfrc", {"stragglers": 2}),
             ("cyclic", {"stragglers": 2}), ("spread", {"stragglers": 2}),
             ("sparse", {})]  # every code whose target can be a sum


@pytest.mark.parametrize(("name", "params"), SUM_CODES)
def test_the_combination_from_ids_alone_is_the_decoded_sum(name, params):
    """``combination()`` names each received value's coefficient in the decoded sum: the same
    from ids alone as with the values, and the values combined so are ``result()`` and the
    exact sum (tolerated partitions left out). This is what lets the workers that hold the
    values form the sum among themselves."""
    n = 6
    code = make_code(name, n, **params, **({"target": "sum"} if "target" in code_parameters(name)
                                           else {}))
    assert code.target == "sum"
    f = partition_values(code.n_partitions, seed=3)
    rng = np.random.default_rng(0)
    for tolerance in (0, 1) if code.decoder_cls.__name__ != "GenericDecoder" else (0,):
        for late in [(), (int(rng.integers(n)),), tuple(rng.choice(n, 2, replace=False))]:
            with_values, ids = code.decoder(tolerance), code.decoder(tolerance)
            for t in finished_tasks(code, set(late)):
                ids.add(t)
                if with_values.add(t, code.B[t] @ f):
                    break
            if not with_values.ready:
                continue
            assert ids.ready and ids.combination() == with_values.combination()
            coef = with_values.combination()
            by_hand = sum(c * (code.B[t] @ f) for t, c in coef.items())
            np.testing.assert_allclose(with_values.result(), by_hand, rtol=1e-12, atol=1e-12)
            assert_exact(code, with_values, f)


@pytest.mark.parametrize(("name", "params"), [("uncoded", {}), ("frc", {"stragglers": 1}),
                                              ("gfrc", {"stragglers": 2})])
def test_the_decoded_sum_is_the_same_bits_whatever_the_arrival_order(name, params):
    """Two runs whose results arrive in other orders decode the same bits: a float sum depends
    on its order, and a run must be reproducible (a resumed run, one with shipped or loaded
    blocks, equal bit for bit). Summing values as they arrived broke this; peeling's
    combination, in the order partitions were learnt, had too."""
    code = make_code(name, 6, **params)
    f = partition_values(code.n_partitions, seed=9) * 1e3 + 1 / 3
    tasks = [t for w in range(code.n_workers) for t in code.schedule[w]]
    results = []
    for seed in range(4):
        order = list(tasks)
        np.random.default_rng(seed).shuffle(order)
        dec = code.decoder()
        for t in order:
            if dec.add(t, code.B[t] @ f):
                break
        results.append((dec.used, dec.result()))
    for used, got in results[1:]:
        if used == results[0][0]:
            np.testing.assert_array_equal(got, results[0][1])
