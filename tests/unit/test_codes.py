"""Every code, every straggler set: decodable, and exactly the uncoded result."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpicoded.codes import available_codes, make_code

RTOL = 1e-10


def cases(name: str, n_max: int = 12):
    for n in range(1, n_max + 1):
        for s in range(n):
            if name == "frc" and n % (s + 1):
                continue
            if name == "uncoded" and s:
                continue
            yield n, s


def build(name: str, n: int, s: int, **extra):
    return make_code(name, n, **extra) if name == "uncoded" else make_code(name, n, stragglers=s)


def partition_values(k: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((k, 7))


def finished_tasks(code, stragglers: tuple[int, ...]) -> list[int]:
    """Tasks of every worker outside the straggler set, in a shuffled arrival order."""
    tasks = [t for w in range(code.n_workers) if w not in stragglers for t in code.schedule[w]]
    np.random.default_rng(len(stragglers)).shuffle(tasks)
    return tasks


@pytest.mark.parametrize("name", ["uncoded", "frc", "cyclic"])
def test_every_straggler_set_decodes_exactly(name):
    checked = 0
    for n, s in cases(name):
        code = build(name, n, s)
        f = partition_values(code.n_partitions)
        true = f.sum(axis=0)
        for stragglers in itertools.combinations(range(n), s):
            dec = code.decoder()
            for t in finished_tasks(code, stragglers):
                if dec.add(t, code.B[t] @ f):
                    break
            assert dec.ready, (n, s, stragglers)
            got = dec.result()
            assert np.linalg.norm(got - true) <= RTOL * np.linalg.norm(true), (n, s, stragglers)
            assert len(dec.missing_partitions) == 0
            checked += 1
    assert checked >= 12


@pytest.mark.parametrize("name", ["frc", "cyclic"])
def test_ids_alone_match_values(name):
    """Readiness from task ids alone (simulation) equals readiness with values (runtime)."""
    code = build(name, 12, 3)
    order = list(np.random.default_rng(3).permutation(code.n_tasks))
    with_ids, with_values = code.decoder(), code.decoder()
    for t in order:
        assert with_ids.add(t) == with_values.add(t, np.ones(2))


def test_frc_not_ready_before_every_group_reports():
    code = make_code("frc", 6, stragglers=2)  # groups {0,1,2} and {3,4,5}
    dec = code.decoder()
    assert not dec.add(0) and not dec.add(1) and not dec.add(2)
    assert dec.add(5)
    assert dec.results_used == 2


def test_frc_tolerance_gives_partial_sum():
    code = make_code("frc", 6, stragglers=2)
    f = partition_values(6)
    dec = code.decoder(tolerance=3)
    assert dec.add(4, code.B[4] @ f)
    assert list(dec.missing_partitions) == [0, 1, 2]
    assert np.allclose(dec.result(), f[3:].sum(axis=0))


def test_uncoded_each_marks_missing_rows():
    code = make_code("uncoded", 4, target="each")
    f = partition_values(4)
    dec = code.decoder(tolerance=1)
    for t in (0, 2, 3):
        ready = dec.add(t, f[t])
    assert ready
    out = dec.result()
    assert np.isnan(out[1]).all() and np.allclose(out[[0, 2, 3]], f[[0, 2, 3]])


def test_generic_decoder_each_target():
    """The generic decoder recovers every partition once B's received rows have full rank."""
    from mpicoded.codes import Code, GenericDecoder

    B = np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0], [1.0, 0.0, 1.0], [1.0, 2.0, 3.0]])
    code = Code("test", B, ((0, 1), (2, 3)), "each")
    f = partition_values(3)
    dec = GenericDecoder(code)
    assert not dec.add(0, B[0] @ f)
    assert not dec.add(1, B[1] @ f)
    assert list(dec.missing_partitions) == [0, 1, 2]
    assert dec.add(3, B[3] @ f)
    assert np.allclose(dec.result(), f, rtol=RTOL, atol=0)


def test_duplicates_and_late_results_are_ignored():
    code = make_code("cyclic", 5, stragglers=1)
    dec = code.decoder()
    dec.add(0, np.ones(1))
    dec.add(0, np.ones(1))
    assert dec.results_used == 1


def test_result_before_ready_raises():
    dec = make_code("frc", 4, stragglers=1).decoder()
    dec.add(0, np.ones(3))
    with pytest.raises(RuntimeError, match="not ready"):
        dec.result()


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 30), data=st.data())
def test_cyclic_random_n_s(n, data):
    s = data.draw(st.integers(0, n - 1))
    stragglers = data.draw(st.sets(st.integers(0, n - 1), min_size=s, max_size=s))
    code = make_code("cyclic", n, stragglers=s)
    f = partition_values(n, seed=n)
    dec = code.decoder()
    for t in finished_tasks(code, tuple(stragglers)):
        dec.add(t, code.B[t] @ f)
    assert dec.ready
    assert np.allclose(dec.result(), f.sum(axis=0), rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("nope", {}, "code='nope' is unknown"),
        ("frc", {"stragglers": 2}, "stragglers=2: frc needs"),
        ("frc", {"stragglers": 4}, r"stragglers=4 is out of range: allowed in \[0, 3\]"),
        ("cyclic", {"stragglers": -1}, "stragglers=-1 is out of range"),
        ("cyclic", {"stragglers": 1.5}, "stragglers must be an integer"),
        ("cyclic", {"load": 2}, "takes no parameter"),
        ("uncoded", {"target": "all"}, "target='all' is not allowed"),
    ],
)
def test_invalid_parameters_name_the_parameter(name, params, message):
    with pytest.raises(ValueError, match=message):
        make_code(name, 4, **params)


def test_invalid_n_workers():
    with pytest.raises(ValueError, match="n_workers=0 is out of range"):
        make_code("frc", 0)


def test_invalid_tolerance():
    with pytest.raises(ValueError, match="tolerance=9 is out of range"):
        make_code("frc", 4, stragglers=1).decoder(tolerance=9)
    with pytest.raises(ValueError, match="tolerance > 0 needs"):
        make_code("cyclic", 4, stragglers=1).decoder(tolerance=1)


def test_registry_lists_every_code():
    assert available_codes() == ["cyclic", "frc", "uncoded"]


def test_task_cost_counts_partitions_of_a_gradient_task():
    assert list(make_code("frc", 6, stragglers=2).task_cost) == [3.0] * 6
    assert list(make_code("uncoded", 3, target="each").task_cost) == [1.0] * 3
