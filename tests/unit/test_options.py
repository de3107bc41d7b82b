"""mpicoded.run's options without MPI: the flags' names and defaults, values checked as the flag
would check them, and ``import mpicoded`` that does not load MPI."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mpicoded.options import FLAGS, OPTIONS, RunOptions, UsageError, cli_default, given_options
from mpicoded.plan import settle_output
from mpicoded.train import DATA_FLAGS, build_parser

options = RunOptions.from_keywords


def test_every_run_flag_is_an_option_with_its_default():
    cli = vars(build_parser().parse_args([]))
    assert set(OPTIONS) == set(cli) - {"job", *DATA_FLAGS}
    for name in OPTIONS:  # argparse keeps a repeated flag's values in a list
        shown = tuple(cli[name]) if isinstance(cli[name], list) else cli[name]
        assert shown == cli_default(name), name
    assert options(**given_options(build_parser().parse_args(["--code", "mds"]))).code == "mds"


def test_the_keyword_defaults_are_the_flags_but_for_the_demo_delay():
    cli = options(**given_options(build_parser().parse_args([])))
    assert cli == RunOptions(delay="seed001")
    assert RunOptions().delay == "none" and FLAGS["delay"].cli_default == "seed001"


def test_options_are_frozen_and_parsed_flags_become_tuples():
    opts = options(**given_options(build_parser().parse_args(
        ["--slow-workers", "2,3", "--kill-worker", "2@3", "--kill-worker", "3@1:2"])))
    assert opts.slow_workers == (2, 3) and opts.kill_worker == ("2@3", "3@1:2")
    with pytest.raises(AttributeError):
        opts.code = "mds"  # type: ignore[misc]


def test_help_lists_every_flag_with_its_help():
    text = build_parser().format_help()
    for name, flag in FLAGS.items():
        assert flag.spelling(name) in text
    assert "--trace, --no-trace" in text and "--dashboard [PORT]" in text


def test_keywords_are_coerced_like_flags():
    args = options(code="gfrc", stragglers=3, slow_workers=[2, 4], tolerance=0, no_purge=True,
                   kill_worker="2@3", metrics=__import__("pathlib").Path("m.jsonl"))
    assert args.stragglers == 3 and args.slow_workers == (2, 4) and args.tolerance == 0.0
    assert args.kill_worker == ("2@3",) and args.metrics == "m.jsonl" and args.no_purge is True
    assert options(slow_workers="1,3").slow_workers == (1, 3)


@pytest.mark.parametrize(("given", "message"), [
    ({"stragler": 3}, "'stragler' is not an option of mpicoded.run; allowed: iterations, batch_size, "
     "batch_seed, code"),
    ({"code": "turbo"}, r"code='turbo' is not one of \['cpgc'"),
    ({"iterations": 0}, "iterations=0 is not a valid value: 0 is out of range"),
    ({"iterations": 2.5}, "iterations=2.5 is not a valid value"),
    ({"stragglers": True}, "stragglers=True is not a valid value"),
    ({"quiet": "yes"}, "quiet='yes': expected True or False"),
    ({"slow_workers": "a"}, "slow_workers='a' is not a valid value"),
    ({"threads": -1}, "threads=-1 is not a valid value: -1 is out of range: allowed >= 0"),
    ({"kill_worker": 3}, "kill_worker=3: expected a string or a list of them"),
])
def test_bad_keywords_name_the_option(given, message):
    with pytest.raises(UsageError, match=message):
        options(**given)
    assert issubclass(UsageError, ValueError)


def test_import_mpicoded_does_not_load_mpi():
    code = ("import sys, mpicoded, mpicoded.jobs, mpicoded.plan; "
            "assert 'mpi4py.MPI' not in sys.modules, 'MPI loaded'; "
            "assert callable(mpicoded.run) and mpicoded.GradientJob and mpicoded.MatVecJob")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr


def test_the_trace_is_on_with_metrics_and_needs_them():
    on = options(metrics="m.jsonl")
    assert settle_output(on, append=False).trace is True
    assert on.trace is None  # settled into a new one, never in place
    assert settle_output(options(), append=False).trace is False
    with pytest.raises(UsageError, match="--trace writes a record per task"):
        settle_output(options(trace=True), append=False)
    assert settle_output(options(metrics="m.jsonl", trace=False), append=False).trace is False


def test_a_dashboard_without_metrics_follows_a_temporary_file():
    settled = settle_output(options(dashboard=8790), append=False)
    assert settled.metrics.endswith(".jsonl") and settled.trace is True
    with pytest.raises(UsageError, match="--dashboard 70000 is out of range"):
        settle_output(options(dashboard=70000), append=False)


def test_an_api_callers_messages_name_keywords_not_flags():
    """A value that parses becomes the keyword's value; a flag with none, its keyword; a
    job flag, which the API has not, stays as it is."""
    from mpicoded.options import as_keywords

    assert as_keywords("--stragglers does not apply to --code cpgc; it takes --load") == (
        "stragglers does not apply to code='cpgc'; it takes load")
    assert as_keywords("--no-purge with --partial on, or --partitions 24.") == (
        "no_purge=True with partial='on', or partitions=24.")
    assert as_keywords("--no-trace, --samples 5") == "trace=False, --samples 5"
    assert as_keywords("--profile does nothing here: it needs --delay seed000") == (
        "profile does nothing here: it needs delay='seed000'")
    assert as_keywords("--no-purge --split adaptive; --checkpoint DIR") == (
        "no_purge=True split='adaptive'; checkpoint DIR")
