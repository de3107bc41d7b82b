"""mpicoded.train's planning on rank 0, without MPI: defaults and usage errors."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from mpicoded import plan
from mpicoded.options import RunOptions, UsageError, given_options
from mpicoded.plan import NothingToDo
from mpicoded.train import build_parser, make_job


def plan_run(argv, n_workers):
    """What rank 0 plans for ``python -m mpicoded.train ARGV``: the CLI's job and options."""
    args = build_parser().parse_args(argv)
    return plan.plan_run(make_job(args), RunOptions.from_keywords(**given_options(args)),
                         n_workers)


def fingerprint(argv, n_workers):
    """The settings a checkpoint of ``python -m mpicoded.train ARGV`` belongs to."""
    return plan_run(argv, n_workers).fingerprint


def test_defaults_plan_a_straggler_tolerant_run():
    plan = plan_run([], n_workers=20)
    assert plan.code.name == "spread" and plan.code.params["stragglers"] == 2
    assert plan.options.partial == "on"
    assert plan.delay.kind == "seed001" and plan.job.name == "logreg"
    assert plan.options.iterations == 50 and plan.metrics is None


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


def test_partial_work_cuts_the_code_into_pieces_of_the_chunk_grid():
    plan = plan_run(["--partial", "on", "--code", "gfrc", "--stragglers", "1", "--samples",
                     "4000", "--chunk-rows", "250"], n_workers=4)
    pieces = plan.job.pieces(250)
    assert pieces.n_tasks == 16 and pieces.params["of"] == "gfrc"  # 4 partitions of 1000 rows


@pytest.mark.parametrize(("argv", "partial"), [
    (["--code", "spread", "--stragglers", "1"], "on"),  # made for it
    (["--code", "spread", "--stragglers", "1", "--partial", "off"], "off"),
    (["--code", "spread", "--stragglers", "1", "--job", "linreg"], "off"),  # coded on its data
    (["--code", "gfrc", "--stragglers", "1"], "off"),  # s = 1: static unless asked
    (["--code", "gfrc", "--stragglers", "2"], "on"),  # measured faster in every pattern
    (["--code", "frc", "--stragglers", "3"], "on"),  # the default run's code
    ([], "on"),
    (["--split", "adaptive"], "on"),  # an adaptive split: pieces move within the iteration
    (["--split", "adaptive", "--partitions", "24"], "off"),  # a split of whole tasks
    (["--code", "cpgc", "--load", "2"], "off"),  # not measured
])
def test_partial_work_is_on_by_default_where_the_code_is_made_for_it(argv, partial):
    plan = plan_run([*argv, "--samples", "4000"], n_workers=4)
    assert plan.options.partial == partial


def test_a_matrix_vector_job_takes_partial_work_when_asked():
    plan = plan_run(["--partial", "on", "--job", "pagerank", "--code", "mds", "--stragglers",
                     "1", "--nodes", "200"], n_workers=4)
    assert plan.options.partial == "on"


def test_slow_workers_are_ranks():
    plan = plan_run(["--delay", "persistent", "--slow-workers", "1,4"], n_workers=4)
    assert plan.delay.slow == frozenset({0, 3})  # ranks 1 and 4 are workers 0 and 3
    assert plan.delay.describe()["slow_workers"] == [1, 4]  # the run record says ranks, too


@pytest.mark.parametrize(("argv", "n", "message"), [
    ([], 0, "needs at least 2 MPI ranks"),
    (["--code", "uncoded", "--stragglers", "2"], 4,
     "--stragglers does not apply to --code uncoded; it takes --partitions, --target"),
    (["--code", "frc", "--target", "each"], 4,
     "--target does not apply to --code frc; it takes --stragglers"),
    (["--code", "cpgc", "--load", "9"], 4, r"load=9 is out of range: allowed in \[1, 4\]"),
    (["--code", "cyclic", "--tolerance", "0.5"], 4, "allowed tolerance 0"),
    (["--code", "cpgc", "--tolerance", "1.5"], 4, r"--tolerance 1.5 is out of range: allowed \[0, 1\)"),
    (["--loss-every", "-1"], 4, "--loss-every -1 is out of range"),
    (["--slow-workers", "a,b"], 4, "not a comma-separated list of ranks"),
    (["--time-scale", "0"], 4, "time_scale=0.0 is out of range"),
    (["--samples", "3"], 4, "4 partitions need at least 4 rows"),
    (["--chunk-rows", "-1"], 4, "--chunk-rows -1 is out of range"),
    (["--output", "theta.txt"], 4, "--output theta.txt: expected a path ending in .npy"),
    (["--output", "/proc/no/theta.npy"], 4, "--output /proc/no/theta.npy: cannot be written"),
    (["--partial", "on", "--code", "cyclic", "--stragglers", "1"], 4,
     "partial work needs a binary code"),
    (["--partial", "on", "--job", "linreg"], 4, "cannot be computed in pieces: it is coded on "
     "its data"),
    (["--partial", "on", "--split", "adaptive", "--code", "frc", "--stragglers", "1"], 4,
     "--partial on runs the code's own placement: it takes no --split of whole tasks "
     r"\(--split adaptive without --code is partial work"),
    (["--split", "adaptive", "--gamma", "2"], 4, "--gamma 2.0 weighs a split of whole tasks, "
     "and --split adaptive without --code moves pieces within the iteration instead; give "
     "--code uncoded --partitions 16"),
    (["--partial", "on", "--chunk-rows", "0"], 4, "--partial on needs chunks"),
    (["--partial", "on", "--job", "pagerank", "--code", "mds", "--stragglers", "1",
      "--tolerance", "0.5", "--nodes", "200"], 4, "decodes every row range exactly"),
])
def test_usage_errors(argv, n, message):
    with pytest.raises(UsageError, match=message):
        plan_run(argv, n_workers=n)


def test_metrics_file_is_opened_up_front(tmp_path):
    path = tmp_path / "sub" / "m.jsonl"
    plan = plan_run(["--metrics", str(path)], n_workers=4)
    plan.metrics.close()
    assert path.exists()


def test_output_holds_theta_or_one_row_a_job(tmp_path):
    from types import SimpleNamespace

    from mpicoded.record import save_output

    thetas = [np.arange(3.0), np.arange(3.0) + 1]
    result = SimpleNamespace(theta=thetas[-1], job_thetas=thetas)
    save_output(str(tmp_path / "one.npy"), result, stream=False)
    save_output(str(tmp_path / "stream.npy"), result, stream=True)
    assert np.array_equal(np.load(tmp_path / "one.npy"), thetas[-1])
    assert np.array_equal(np.load(tmp_path / "stream.npy"), np.stack(thetas))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.npy", "stream.npy"]  # no temps


def test_stream_and_split_flags(tmp_path):
    plan = plan_run(["--job", "linreg", "--code", "mds", "--partitions", "40", "--redundancy",
                     "1.25", "--features", "40", "--delay", "seed000", "--profile", "paper000",
                     "--split", "optimal", "--jobs", "5", "--arrival-rate", "0.5",
                     "--time-scale", "0.1"], n_workers=20)
    assert plan.delay.complexity == pytest.approx(100 / 40)
    assert plan.splitter.kind == "optimal" and plan.splitter.loads.sum() == 50
    assert plan.splitter.loads[:5].sum() < plan.splitter.loads[15:].sum()
    assert len(plan.arrivals_s) == 5 and plan.arrivals_s[0] == 0.0
    profile = tmp_path / "p.json"
    profile.write_text('[{"mu": 1, "c": 0.5}, {"mu": 3}]')
    plan = plan_run(["--delay", "seed000", "--profile", str(profile), "--code", "uncoded",
                     "--split", "adaptive", "--partitions", "8", "--samples", "100"],
                    n_workers=2)
    assert plan.delay.profile == ((1.0, 0.5), (3.0, 0.0)) and plan.splitter.kind == "adaptive"


@pytest.mark.parametrize(("argv", "message"), [
    (["--split", "optimal"], "--split optimal needs declared speeds: give --profile"),
    (["--delay", "seed000"], "delay seed000 needs a heterogeneity profile"),
    (["--delay", "seed000", "--profile", "paper000"], "profile paper000 describes 20 workers, "
                                                      "the run has 4"),
    (["--profile", "/nope.json", "--delay", "seed000"], "no such file"),
    (["--jobs", "2", "--arrival-rate", "0"], "allowed jobs >= 1, rate > 0"),
    (["--split", "adaptive", "--gamma", "-1"], "--gamma -1.0 is out of range"),
])
def test_stream_usage_errors(argv, message):
    with pytest.raises(UsageError, match=message):
        plan_run(argv, n_workers=4)


@pytest.mark.parametrize(("argv", "message"), [
    (["--delay", "none", "--mu", "5"], "--mu does nothing here: it needs --delay seed001"),
    (["--task-time", "0.1"], "--task-time does nothing here: it needs --delay persistent"),
    (["--delay", "none", "--slow-workers", "2"], "--slow-workers does nothing here: it needs "
     "--delay persistent or compute"),
    (["--delay", "persistent", "--slow-factor", "5"], "--slow-factor does nothing here: it "
     "needs --delay persistent or compute, with --slow-workers or --slow-every"),
    (["--profile", "paper000"], "--profile does nothing here: it needs --delay seed000 or "
     "--split optimal"),
    (["--delay", "none", "--time-scale", "0.5"], "--time-scale does nothing here"),
    (["--delay", "compute", "--slow-workers", "2", "--time-scale", "0.5"],
     "--time-scale does nothing here: it needs a --delay that sleeps"),
    (["--delay", "persistent", "--slow-every", "3", "--slow-workers", "2"],
     "--slow-workers does nothing here: it needs .* without --slow-every"),
    (["--gamma", "2"], "--gamma does nothing here: it needs --split optimal or adaptive"),
    (["--arrival-rate", "2"], "--arrival-rate does nothing here: it needs --jobs above 1"),
    (["--checkpoint-every", "5"], "--checkpoint-every does nothing here: it needs "
     "--checkpoint DIR"),
])
def test_a_flag_that_would_do_nothing_is_refused_with_what_it_needs(argv, message):
    with pytest.raises(UsageError, match=message):
        plan_run([*argv, "--samples", "4000"], n_workers=4)


def test_the_same_flags_where_they_count_are_taken():
    for argv in (["--delay", "seed001", "--mu", "5", "--alpha", "0.1", "--time-scale", "0.5"],
                 ["--delay", "persistent", "--task-time", "0.1", "--slow-workers", "2",
                  "--slow-factor", "5", "--slow-from", "3"],
                 ["--delay", "compute", "--slow-every", "4", "--slow-factor", "3"],
                 ["--delay", "none", "--jobs", "2", "--arrival-rate", "2", "--time-scale", "0.5"],
                 ["--split", "adaptive", "--code", "uncoded", "--partitions", "8", "--gamma", "2"]):
        plan_run([*argv, "--samples", "4000"], n_workers=4)


def test_an_adaptive_split_without_a_code_moves_pieces_within_the_iteration():
    """No code: every worker holds the data (spread over all of them, one partition) and
    partial work, not a Splitter, moves the load; asked for whole tasks (--partitions, or no
    partial work, or a job it cannot cut), uncoded with four partitions a worker."""
    plan = plan_run(["--split", "adaptive", "--samples", "4000"], n_workers=6)
    assert (plan.code.name, plan.code.params["stragglers"], plan.code.n_partitions,
            plan.options.partial, plan.splitter) == ("spread", 5, 1, "on", None)
    for argv in (["--partial", "off"], ["--job", "linreg"], ["--chunk-rows", "0"]):
        plan = plan_run([*argv, "--split", "adaptive", "--samples", "4000"], n_workers=6)
        assert (plan.code.name, plan.code.n_partitions, plan.options.partial) == (
            "uncoded", 24, "off")
    plan = plan_run(["--split", "adaptive", "--partitions", "30", "--samples", "4000"],
                    n_workers=6)
    assert plan.code.n_partitions == 30 and plan.splitter.loads.sum() == 30
    with pytest.raises(UsageError, match="--load does not apply to --code uncoded"):
        plan_run(["--split", "adaptive", "--load", "2", "--samples", "4000"], n_workers=6)


@pytest.mark.parametrize(("argv", "message"), [
    (["--code", "uncoded"], "--code uncoded has 6 for 6 workers: with one a worker there is "
     "nothing to move; leave --code out .* or give --code uncoded --partitions 24"),
    (["--code", "frc", "--stragglers", "1"], "nothing to move"),
    (["--code", "mds", "--partitions", "12", "--redundancy", "1.5"],
     "a task of .* costs 12x a plain partition's compute .*, and a split runs without partial "
     "work, which would cut them; leave --code out"),
])
def test_a_split_that_cannot_do_well_is_refused_with_the_fix(argv, message):
    with pytest.raises(UsageError, match=message):
        plan_run([*argv, "--split", "adaptive", "--samples", "4000"], n_workers=6)


def test_unwritable_checkpoint_directory_is_refused_up_front():
    with pytest.raises(UsageError, match="--checkpoint /proc/no: cannot be written"):
        plan_run(["--checkpoint", "/proc/no"], n_workers=4)


def test_truncated_dataset_and_checkpoint_are_one_line_errors(tmp_path):
    import mpicoded.checkpoint as ckpt

    data = tmp_path / "d.npz"
    np.savez(data, X=np.ones((8, 2)), y=np.zeros(8))
    data.write_bytes(data.read_bytes()[:100])
    with pytest.raises(UsageError, match="cannot be read"):
        plan_run(["--dataset", str(data)], n_workers=4)
    argv = ["--checkpoint", str(tmp_path / "ck")]
    ckpt.save(tmp_path / "ck", ckpt.Checkpoint(0, 2, np.zeros(50),
                                               fingerprint(argv, 4)))
    path = tmp_path / "ck" / ckpt.FILE
    path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(UsageError, match="cannot be read"):
        plan_run([*argv, "--resume"], n_workers=4)


def test_a_checkpoint_resumes_with_partial_work_on_off_or_auto(tmp_path):
    """--partial auto resolves after the fingerprint is taken, and on or off computes the same
    sums: a run checkpointed under any of them resumes under any other."""
    argv = ["--code", "spread", "--stragglers", "1", "--samples", "4000"]
    prints = {mode: fingerprint([*argv, "--partial", mode], 4) for mode in ("auto", "on", "off")}
    assert len(set(prints.values())) == 1, prints
    assert fingerprint([*argv, "--stragglers", "2"], 4) != prints["auto"]


def test_resume_of_a_finished_run_has_nothing_to_do(tmp_path):
    import mpicoded.checkpoint as ckpt

    metrics = tmp_path / "old.jsonl"
    argv = ["--checkpoint", str(tmp_path), "--iterations", "5", "--metrics", str(metrics)]
    ckpt.save(tmp_path, ckpt.Checkpoint(0, 5, np.zeros(50), fingerprint(argv, 4)))
    metrics.write_text("the finished run's metrics\n")
    with pytest.raises(NothingToDo, match="finished run .* nothing to resume"):
        plan_run([*argv, "--resume"], n_workers=4)
    assert metrics.read_text() == "the finished run's metrics\n"  # not truncated
    plan = plan_run([*argv[:-2], "--iterations", "8", "--resume"], n_workers=4)  # train on
    assert (plan.resume.job, plan.resume.iteration) == (0, 5)


def test_too_few_ranks_are_told_their_own_command(monkeypatch):
    """The hint names the program that was started (a script, or a module run with -m), not
    mpicoded.train."""
    import types

    from mpicoded.plan import launch_hint

    monkeypatch.setattr("sys.argv", ["/home/me/fit.py", "--lr", "0.1"])
    monkeypatch.setitem(sys.modules, "__main__", types.ModuleType("__main__"))
    assert launch_hint() == ("mpirun -n 7 python /home/me/fit.py --lr 0.1, or mpicoded launch -n 7 "
                             "-- /home/me/fit.py --lr 0.1")
    module = types.ModuleType("__main__")
    module.__spec__ = types.SimpleNamespace(name="mpicoded.examples.ridge")
    monkeypatch.setitem(sys.modules, "__main__", module)
    monkeypatch.setattr("sys.argv", ["/x/ridge.py"])
    assert launch_hint(3) == ("mpirun -n 3 python -m mpicoded.examples.ridge, or mpicoded launch "
                              "-n 3 -- -m mpicoded.examples.ridge")
