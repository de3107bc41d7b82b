"""mpicoded.train's planning on rank 0, without MPI: defaults and usage errors."""

from __future__ import annotations

import pytest

from mpicoded.train import UsageError, default_stragglers, plan_run


def test_defaults_plan_a_straggler_tolerant_run():
    plan = plan_run([], n_workers=20)
    assert plan.code.name == "frc" and plan.code.params["stragglers"] == 3
    assert plan.delay.kind == "seed001" and plan.job.name == "logreg"
    assert plan.args.iterations == 50 and plan.metrics is None


@pytest.mark.parametrize(("code", "n", "expected"), [
    ("frc", 20, 3), ("frc", 6, 2), ("frc", 7, 0), ("frc", 2, 1), ("cyclic", 2, 1),
    ("cyclic", 7, 3), ("cyclic", 1, 0),
])
def test_default_stragglers_fit_the_workers(code, n, expected):
    assert default_stragglers(code, n) == expected


def test_slow_workers_are_ranks():
    plan = plan_run(["--delay", "persistent", "--slow-workers", "1,4"], n_workers=4)
    assert plan.delay.slow == frozenset({0, 3})  # ranks 1 and 4 are workers 0 and 3


@pytest.mark.parametrize(("argv", "n", "message"), [
    ([], 0, "needs at least 2 MPI ranks"),
    (["--code", "uncoded", "--stragglers", "2"], 4, "uncoded tolerates none"),
    (["--target", "each"], 4, "--target applies to --code uncoded only"),
    (["--loss-every", "-1"], 4, "--loss-every -1 is out of range"),
    (["--slow-workers", "a,b"], 4, "not a comma-separated list of ranks"),
    (["--time-scale", "0"], 4, "time_scale=0.0 is out of range"),
    (["--samples", "3"], 4, "4 partitions need at least 4 rows"),
])
def test_usage_errors(argv, n, message):
    with pytest.raises(UsageError, match=message):
        plan_run(argv, n_workers=n)


def test_metrics_file_is_opened_up_front(tmp_path):
    path = tmp_path / "sub" / "m.jsonl"
    plan = plan_run(["--metrics", str(path)], n_workers=4)
    plan.metrics.close()
    assert path.exists()
