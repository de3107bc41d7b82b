"""bench straggler-tax's cells over alternated rounds: the median run, not the last; each
pattern's limit, what no exact scheme beats."""

from __future__ import annotations

import math

import pytest

from mpicoded.bench.tax import STALL_PROBABILITY, median_run, pattern_limit, schedule


def run(makespan: float, iteration: float, rows: float) -> dict[str, float]:
    return {"makespan_s": makespan, "mean_iteration_s": iteration, "rows_over_data": rows}


def test_a_cell_is_its_median_makespan_run_with_the_median_iteration():
    cell = median_run([run(3.0, 0.09, 1.1), run(1.0, 0.03, 1.2), run(2.0, 0.01, 1.3)])
    assert cell["makespan_s"] == 2.0 and cell["rows_over_data"] == 1.3  # that run's figures
    assert cell["mean_iteration_s"] == 0.03  # the iterations' own median
    assert cell["makespans_s"] == [3.0, 1.0, 2.0]  # every round's, in the order run


def test_an_even_count_takes_the_lower_middle_and_one_run_is_itself():
    assert median_run([run(4.0, 0.4, 1.0), run(1.0, 0.1, 1.0)])["makespan_s"] == 1.0
    alone = run(5.0, 0.5, 1.0)
    assert median_run([alone]) == {**alone, "makespans_s": [5.0]}


@pytest.mark.parametrize(("pattern", "fraction", "expected"), [
    ("none", 0.05, 1.0), ("fixed", 0.05, 6 / 5.05), ("moving", 0.05, 6 / 5.05),
    ("two fixed", 0.05, 6 / 4.1), ("fixed", 1 / 3, 6 / (5 + 1 / 3))])
def test_a_pattern_s_limit_is_the_workers_over_their_total_speed(pattern, fraction, expected):
    assert pattern_limit(schedule(pattern, 0.3, fraction, 7), 0.3, 6) == pytest.approx(expected)


def test_the_stalls_limit_counts_the_spread_and_the_stalls():
    """Each worker at 1/1.1-1/1.5 of the cap, 5% of the time 10-40x slower than that."""
    spread = pattern_limit(schedule("stalls", 0.3, 0.05, 7), 0.3, 6)
    stall = 1 - STALL_PROBABILITY * (1 - math.log(4) / 30)  # E[1/s], s uniform on 10-40
    assert 1 / (1 / 1.1 * stall) < spread < 1 / (1 / 1.5 * stall)
    shares = [schedule("stalls", 0.3, 0.05, 7).base[r] for r in range(1, 7)]
    assert spread == pytest.approx(6 / (stall * sum(share / 0.3 for share in shares)), rel=0.01)
