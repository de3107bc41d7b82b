"""bench straggler-tax's cells over alternated rounds: the median run, not the last."""

from __future__ import annotations

from mpicoded.bench.tax import median_run


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
