"""Coded MapReduce (paper 002) without MPI: allocations, Lemma 1's load, the shuffle plans."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest

from mpicoded.cdc import allocate, lemma1_load, optimal_sizes3, plan_shuffle, uncoded_plan
from mpicoded.cdc.allocation import SUBSETS3, check_storage, lp_sizes, sizes_to_files
from mpicoded.cdc.job import make_files, map_file, reduce_values, reference
from mpicoded.cdc.scheme import check_plan


def test_paper_example_6_7_7_12():
    allocation = allocate([6, 7, 7], 12)
    assert allocation.load == 12 and allocation.storage == [6, 7, 7]
    plan = plan_shuffle(allocation.files, 12)
    check_plan(plan, allocation.files, 12)
    assert plan.load == 12 and uncoded_plan(allocation.files, 12).load == 16


def test_figure_2_allocation_gives_13():
    """The paper's first, sequential allocation: node 1 files 1-6, node 2 files 7-12 and 1,
    node 3 files 2-8 reaches 13, not 12."""
    files = (frozenset(range(0, 6)), frozenset([*range(6, 12), 0]), frozenset(range(1, 8)))
    sizes = {}
    for n in range(12):
        key = tuple(k for k in range(3) if n in files[k])
        sizes[key] = sizes.get(key, 0) + 1
    assert lemma1_load(sizes) == 13
    plan = plan_shuffle(files, 12)
    check_plan(plan, files, 12)
    assert plan.load == 13


def brute_force_minimum(storage, n_files):
    """Lemma 1's load minimised over every assignment of each file to a node set (small N)."""
    best = None
    for choice in itertools.product(SUBSETS3, repeat=n_files):
        sizes = {}
        for s in choice:
            sizes[s] = sizes.get(s, 0) + 1
        if [sum(v for s, v in sizes.items() if k in s) for k in range(3)] != list(storage):
            continue
        load = lemma1_load(sizes)
        best = load if best is None or load < best else best
    return best


@pytest.mark.parametrize("n_files", [3, 4, 5])
def test_exact_search_matches_brute_force(n_files):
    for storage in itertools.product(range(n_files + 1), repeat=3):
        if sum(storage) < n_files:
            continue
        sizes = optimal_sizes3(list(storage), n_files)
        assert lemma1_load(sizes) == brute_force_minimum(storage, n_files), storage


def test_every_storage_triple_for_12_files():
    """For every (M1, M2, M3) with N = 12, the plan on the chosen allocation reaches the minimum
    of Lemma 1 over all allocations, never beats Corollary 1's bound, and meets every want."""
    checked = 0
    for storage in itertools.product(range(13), repeat=3):
        if sum(storage) < 12:
            continue
        allocation = allocate(list(storage), 12)
        plan = plan_shuffle(allocation.files, 12)
        check_plan(plan, allocation.files, 12)
        assert plan.load == allocation.load == lemma1_load(optimal_sizes3(list(storage), 12))
        s = allocation.sizes
        corollary = 2 * sum(s.get((k,), 0) for k in range(3)) + Fraction(
            sum(s.get(p, 0) for p in ((0, 1), (0, 2), (1, 2))), 2)
        assert plan.load >= corollary
        assert plan.load <= uncoded_plan(allocation.files, 12).load
        checked += 1
    assert checked == 13**3 - 364  # all triples but the C(14, 3) that cannot cover 12 files


def test_half_integer_loads_use_two_packets():
    allocation = allocate([5, 5, 5], 12)
    plan = plan_shuffle(allocation.files, 12)
    assert plan.load == Fraction(39, 2) and plan.packets == 2
    check_plan(plan, allocation.files, 12)


@pytest.mark.parametrize("storage", [[5, 6, 7, 8], [3, 3, 9, 9], [6, 6, 6, 6, 6], [2, 4, 6, 8, 10, 12]])
def test_lp_heuristic_beyond_three_nodes(storage):
    allocation = allocate(storage, 12)
    assert allocation.storage == storage
    assert sum(allocation.sizes.values()) == 12
    plan = plan_shuffle(allocation.files, 12)
    check_plan(plan, allocation.files, 12)
    assert allocation.bound <= plan.load + 1e-9
    assert plan.load <= uncoded_plan(allocation.files, 12).load
    sizes, bound = lp_sizes(storage, 12)
    assert sizes_to_files(sizes, len(storage)) == allocation.files and bound == allocation.bound


@pytest.mark.parametrize(("storage", "n_files", "message"), [
    ([3, 3, 3], 12, "holds 9 files, fewer than N=12"),
    ([13, 1, 1], 12, r"storage \[13\] out of range"),
    ([5], 4, "allowed >= 2"),
    ([5, 5], 0, "files=0 is out of range"),
])
def test_bad_storage(storage, n_files, message):
    with pytest.raises(ValueError, match=message):
        check_storage(storage, n_files)


@pytest.mark.parametrize("job", ["wordcount", "sort"])
def test_jobs_reduce_to_the_whole_answer(job):
    files = make_files(job, 6, seed=1)
    outputs = reference(job, files, 3, 240)
    allkeys = np.concatenate(files)
    if job == "wordcount":
        assert sum(o.sum() for o in outputs) == len(allkeys)
    else:
        assert np.array_equal(np.concatenate(outputs), np.sort(allkeys))
    v = map_file(job, files[0], 1, 3, 240)
    assert np.array_equal(reduce_values(job, 1, 3, 240, [v]), reference(job, files[:1], 3, 240)[1])
