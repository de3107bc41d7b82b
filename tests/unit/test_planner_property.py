"""The CLI planner driven by random flag combinations (hypothesis): every combination gives a
plan or a usage error, never another exception (a traceback a user would see)."""

from __future__ import annotations

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from mpicoded.codes import available_codes
from mpicoded.delays import DELAY_MODELS
from mpicoded.options import RunOptions, UsageError, given_options
from mpicoded.plan import NothingToDo, Plan
from mpicoded.train import build_parser, make_job

SMALL = {"logreg": ["--samples", "120", "--features", "4"],
         "linreg": ["--samples", "120", "--features", "4"],
         "pagerank": ["--nodes", "60"], "power": ["--features", "6"]}


def maybe(flag: str, values: st.SearchStrategy) -> st.SearchStrategy:
    """``flag VALUE`` one time in four, else nothing: most runs give few flags, as users do."""
    given_ = values.map(lambda v: [flag, str(v)])
    return st.integers(0, 3).flatmap(lambda r: given_ if r == 0 else st.just([]))


FLAGS = st.tuples(
    st.sampled_from(sorted(SMALL)).map(lambda job: ["--job", job, *SMALL[job]]),
    maybe("--code", st.sampled_from(available_codes())),
    maybe("--stragglers", st.integers(-1, 8)),
    maybe("--load", st.integers(0, 6)),
    maybe("--partitions", st.integers(0, 30)),
    maybe("--redundancy", st.sampled_from([0.5, 1.0, 1.25, 2.0])),
    maybe("--degree", st.integers(0, 5)),
    maybe("--target", st.sampled_from(["sum", "each"])),
    maybe("--tolerance", st.sampled_from([0.0, 0.1, 0.3, 0.99, 1.0, -0.1])),
    maybe("--delay", st.sampled_from(DELAY_MODELS)),
    maybe("--split", st.sampled_from(["uniform", "optimal", "adaptive"])),
    maybe("--profile", st.just("paper000")),
    maybe("--gamma", st.sampled_from([-1.0, 0.0, 2.0])),
    maybe("--jobs", st.integers(0, 3)),
    maybe("--arrival-rate", st.sampled_from([0.0, 0.5])),
    maybe("--slow-workers", st.sampled_from(["1", "2,3", "0", "99"])),
    maybe("--chunk-rows", st.integers(-1, 50)),
    maybe("--loss-every", st.integers(-1, 3)),
    maybe("--time-scale", st.sampled_from([0.0, 0.01, -1.0])),
).map(lambda parts: [flag for part in parts for flag in part])


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(argv=FLAGS, n_workers=st.integers(0, 24))
def test_random_flags_give_a_plan_or_a_usage_error(argv, n_workers):
    from mpicoded import plan

    try:
        args = build_parser().parse_args(argv)
        result = plan.plan_run(make_job(args), RunOptions.from_keywords(**given_options(args)),
                               n_workers)
    except (UsageError, NothingToDo) as exc:
        event(f"refused: {type(exc).__name__}")
        return
    event("planned")
    assert isinstance(result, Plan)
    assert result.code.n_workers == n_workers
    assert 0 <= result.tolerance < result.code.n_partitions
