"""Load splits, code-parameter search and the online estimator (paper 000)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpicoded.balance.estimator import Estimator
from mpicoded.balance.search import parameter_search
from mpicoded.balance.split import (
    Moments,
    continuous_split,
    finish_level,
    mismatch,
    optimal_split,
    split_schedule,
    uniform_split,
)
from mpicoded.balance.splitter import Splitter

MU = np.array([1.0] * 5 + [2.0] * 5 + [4.0] * 5 + [8.0] * 5)
C = np.array([2.0] * 5 + [1.0] * 5 + [0.5] * 5 + [0.25] * 5)


def paper000(complexity: float = 1.0) -> Moments:
    m = complexity / MU
    return Moments(m, m**2, C)


@pytest.mark.parametrize(("n_tasks", "n_workers"), [(110, 20), (7, 3), (3, 5), (0, 4)])
def test_uniform_split_sums_and_is_even(n_tasks, n_workers):
    loads = uniform_split(n_tasks, n_workers)
    assert loads.sum() == n_tasks and loads.max() - loads.min() <= 1


@settings(max_examples=60, deadline=None)
@given(n_tasks=st.integers(0, 300), seed=st.integers(0, 10**6))
def test_optimal_split_sums_to_n_tasks(n_tasks, seed):
    rng = np.random.default_rng(seed)
    p = rng.integers(1, 25)
    m = rng.uniform(0.05, 2, p)
    loads = optimal_split(n_tasks, Moments(m, rng.uniform(0, 2, p) * m**2, rng.uniform(0, 3, p)))
    assert loads.sum() == n_tasks and (loads >= 0).all()


def test_greedy_minimises_the_largest_finish_level_brute_force():
    rng = np.random.default_rng(1)
    for _ in range(40):
        p, n_tasks = int(rng.integers(2, 5)), int(rng.integers(1, 9))
        m = rng.uniform(0.1, 2, p)
        moments = Moments(m, rng.uniform(0, 1, p) * m**2, rng.uniform(0, 2, p))
        greedy = finish_level(moments, optimal_split(n_tasks, moments)).max()
        best = min(finish_level(moments, np.array(loads)).max()
                   for loads in itertools.product(range(n_tasks + 1), repeat=p)
                   if sum(loads) == n_tasks)
        assert greedy == pytest.approx(best)


def test_continuous_solution_checks_the_integer_split():
    moments = paper000()
    loads = optimal_split(110, moments)
    real, level = continuous_split(110, moments)
    assert real.sum() == pytest.approx(110)
    assert np.abs(loads - real).max() < 1.5
    assert finish_level(moments, loads).max() == pytest.approx(level, rel=0.1)


def test_paper000_profile_split_favours_fast_workers_and_skips_costly_links():
    moments = Moments(np.array([1.0, 0.1]), np.array([1.0, 0.01]), np.array([0.0, 50.0]))
    assert list(optimal_split(10, moments)) == [10, 0]  # c_p = 50 exceeds the level
    loads = optimal_split(110, paper000())
    assert loads[15:].min() > loads[10:15].max() > loads[5:10].max() > loads[:5].max()
    assert mismatch(paper000(), loads) < mismatch(paper000(), uniform_split(110, 20))


def test_split_schedule_hands_out_contiguous_runs():
    assert split_schedule(np.array([2, 0, 3])) == ((0, 1), (), (2, 3, 4))
    with pytest.raises(ValueError, match="loads sum to 5, not to the 6 tasks"):
        split_schedule(np.array([2, 3]), 6)


def test_parameter_search_ranks_by_mismatch():
    ranked = parameter_search(100, MU, C, partitions=[20, 40, 100], redundancies=[1.0, 1.25],
                              simulate_iteration=lambda cand: cand.level)
    assert [c.mismatch for c in ranked] == sorted(c.mismatch for c in ranked)
    assert all(c.complexity * c.partitions == pytest.approx(100) for c in ranked)
    assert all(c.expected_iteration == c.level for c in ranked)
    assert all(c.loads.sum() == round(c.partitions * c.redundancy) for c in ranked)


def test_estimator_converges_on_synthetic_samples():
    rng = np.random.default_rng(3)
    true_m, true_c = np.array([0.5, 0.1, 1.0]), np.array([0.3, 0.0, 1.0])
    est = Estimator(3, forget=0.999)
    for _ in range(3000):
        arrivals, assigned = {}, {}
        decoded_at = 2.0  # work beyond this is purged (censored)
        for p in range(3):
            times = true_c[p] + np.cumsum(rng.exponential(true_m[p], 8))
            arrivals[p] = list(times[times <= decoded_at])
            assigned[p] = 8
        est.observe(arrivals, assigned, decoded_at)
    got = est.moments()
    assert got.m == pytest.approx(true_m, rel=0.15)
    assert got.v == pytest.approx(true_m**2, rel=0.35)
    assert got.c == pytest.approx(true_c, abs=0.15)


def test_estimator_follows_a_worker_that_slows_down():
    rng = np.random.default_rng(4)
    est = Estimator(2)
    for it in range(60):
        m = np.array([0.1, 0.1 if it < 30 else 0.5])
        arrivals = {p: list(np.cumsum(rng.exponential(m[p], 5))) for p in range(2)}
        est.observe(arrivals, {0: 5, 1: 5}, decoded_at=10.0)
    assert est.moments().m[1] > 3 * est.moments().m[0]


def test_purged_worker_learns_its_speed_from_its_own_report():
    """Real compute: task times are nearly constant and a slow CPU rarely finishes a task before
    the decode. Its report of the cut task (time spent, fraction done) gives its speed, also when
    a long iteration now and then lets a first result through (which alone would be read as a
    large communication delay c_p)."""
    fast_m, rng = 0.01, np.random.default_rng(6)

    def estimate(slow_m: float, report: bool) -> tuple[np.ndarray, np.ndarray]:
        est = Estimator(2)
        for _ in range(40):
            decode = 0.03 if rng.random() < 0.8 else slow_m + 0.01
            arrivals = {0: [fast_m, 2 * fast_m, 3 * fast_m]}
            if decode > slow_m:
                arrivals[1] = [slow_m]
            est.observe(arrivals, {0: 3, 1: 3}, decode)
            spent = decode - sum(arrivals.get(1, []))  # on the task the purge cut off
            if report:
                est.partial(1, spent / slow_m, spent, key=None)
        got = est.moments()
        return got.m, got.c

    for slow_m in (0.05, 0.5):
        m, c = estimate(slow_m, report=True)
        assert m == pytest.approx([fast_m, slow_m], rel=0.05)
        assert c == pytest.approx([0.0, 0.0], abs=0.005)
    assert estimate(0.5, report=False)[0][1] < 0.3  # the master's view alone: far too fast


def test_late_progress_report_is_ignored():
    """A report about iteration 1 arriving after iteration 2 was observed must not replace
    iteration 2's view of the worker; nor may a report for a worker that was not cut off."""
    est = Estimator(2)
    for it in (1, 2):
        est.observe({0: [0.1]}, {0: 1, 1: 1}, decoded_at=0.1, key=(0, it, 0))
    before = est.moments().m.copy()
    est.partial(1, 0.5, 0.1, key=(0, 1, 0))
    est.partial(0, 0.5, 1.0, key=(0, 2, 0))
    assert np.array_equal(est.moments().m, before)
    est.partial(1, 0.5, 0.1, key=(0, 2, 0))
    assert est.moments().m[1] != before[1]


def test_adaptive_splitter_starts_uniform_then_learns():
    split = Splitter("adaptive", 20, 2)
    assert split.loads.tolist() == [10, 10]
    rng = np.random.default_rng(5)
    for _ in range(10):
        arrivals = {0: list(np.cumsum(rng.exponential(0.1, split.loads[0]))),
                    1: list(np.cumsum(rng.exponential(0.4, split.loads[1])))}
        split.observe(arrivals, decoded_at=max(max(v) for v in arrivals.values() if v))
    assert split.loads[0] > 2 * split.loads[1]


def test_splitter_needs_speeds_for_optimal():
    with pytest.raises(ValueError, match="needs declared worker speeds"):
        Splitter("optimal", 10, 2)
    with pytest.raises(ValueError, match="split='best' is unknown"):
        Splitter("best", 10, 2)


def test_bad_moments():
    with pytest.raises(ValueError, match="m > 0"):
        Moments(np.array([0.0]), np.array([0.0]), np.array([0.0]))


@pytest.mark.parametrize("kind", ["uniform", "optimal", "adaptive"])
def test_exclude_splits_the_load_among_the_living(kind):
    split = Splitter(kind, 110, 20, paper000())
    split.exclude(17)
    split.exclude(3)
    assert split.loads.sum() == 110 and split.loads[17] == 0 and split.loads[3] == 0
    schedule = split.schedule()
    assert schedule[17] == () and schedule[3] == ()
    assert all(len(tasks) == k for tasks, k in zip(schedule, split.loads, strict=True))


def test_a_recoded_adaptive_split_keeps_what_it_learnt_of_the_survivors():
    """Worker 1 of 3 is 4x slower; after a re-code of workers (0, 1) (worker 2 died) with tasks
    twice as long, the new split starts from the learnt speeds, scaled, not uniform."""
    split = Splitter("adaptive", 30, 3)
    rng = np.random.default_rng(2)
    for _ in range(15):
        arrivals = {p: list(np.cumsum(rng.exponential(0.4 if p == 1 else 0.1, split.loads[p])))
                    for p in range(3)}
        split.observe(arrivals, decoded_at=max(max(v) for v in arrivals.values() if v))
    learnt = split._estimates()
    carried = split.for_survivors([0, 1], n_tasks=12, scale=2.0)
    assert carried.kind == "adaptive" and carried.n_workers == 2 and carried.loads.sum() == 12
    assert carried.loads[0] > 2 * carried.loads[1]  # not the uniform 6 / 6
    assert np.allclose(carried.prior.m, 2.0 * learnt.m[[0, 1]])
    assert np.array_equal(Splitter("adaptive", 12, 2).loads, [6, 6])  # what it would have been


def test_a_recoded_optimal_split_keeps_the_declared_speeds_of_the_survivors():
    split = Splitter("optimal", 110, 20, paper000())
    carried = split.for_survivors([0, 19], n_tasks=10, scale=0.5)
    assert carried.kind == "optimal" and carried.loads.sum() == 10
    assert np.allclose(carried.declared.m, 0.5 * paper000().m[[0, 19]])
    assert carried.loads[1] > carried.loads[0]  # worker 19 (mu = 8) is faster than worker 0
