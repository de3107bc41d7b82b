"""mpicoded.train's planning on rank 0, without MPI: defaults and usage errors."""

from __future__ import annotations

import pytest

from mpicoded.train import UsageError, plan_run


def test_defaults_plan_a_straggler_tolerant_run():
    plan = plan_run([], n_workers=20)
    assert plan.code.name == "frc" and plan.code.params["stragglers"] == 3
    assert plan.delay.kind == "seed001" and plan.job.name == "logreg"
    assert plan.args.iterations == 50 and plan.metrics is None


@pytest.mark.parametrize(("code", "n", "key", "expected"), [
    ("frc", 20, "stragglers", 3), ("frc", 6, "stragglers", 2), ("frc", 7, "stragglers", 0),
    ("frc", 2, "stragglers", 1), ("cyclic", 2, "stragglers", 1), ("gfrc", 7, "stragglers", 3),
    ("cyclic", 1, "stragglers", 0), ("cpgc", 20, "load", 3), ("cpgc", 4, "load", 2),
    ("ucmmc", 2, "load", 2), ("mcc", 20, "load", 3), ("mds", 20, "stragglers", 3),
])
def test_defaults_fit_the_workers(code, n, key, expected):
    plan = plan_run(["--code", code, "--samples", "200"], n_workers=n)
    assert plan.code.params[key] == expected


def test_code_flags_reach_the_code():
    plan = plan_run(["--code", "sparse", "--partitions", "30", "--redundancy", "1.5", "--degree",
                     "4"], n_workers=10)
    assert plan.code.B.shape == (45, 30) and plan.code.params["degree"] == 4
    plan = plan_run(["--code", "cpgc", "--job", "linreg", "--tolerance", "0.1"], n_workers=20)
    assert plan.tolerance == 2 and plan.code.params["load"] == 3


def test_slow_workers_are_ranks():
    plan = plan_run(["--delay", "persistent", "--slow-workers", "1,4"], n_workers=4)
    assert plan.delay.slow == frozenset({0, 3})  # ranks 1 and 4 are workers 0 and 3


@pytest.mark.parametrize(("argv", "n", "message"), [
    ([], 0, "needs at least 2 MPI ranks"),
    (["--code", "uncoded", "--stragglers", "2"], 4,
     "--stragglers does not apply to --code uncoded; it takes --target"),
    (["--target", "each"], 4, "--target does not apply to --code frc; it takes --stragglers"),
    (["--code", "cpgc", "--load", "9"], 4, r"load=9 is out of range: allowed in \[1, 4\]"),
    (["--code", "cyclic", "--tolerance", "0.5"], 4, "allowed tolerance 0"),
    (["--code", "cpgc", "--tolerance", "1.5"], 4, r"--tolerance 1.5 is out of range: allowed \[0, 1\)"),
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
