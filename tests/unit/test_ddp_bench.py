"""bench ddp without MPI: the CPU shares a pattern gives its processes (the same on DDP's side
and mpicoded's; the e2e test runs the bench under none and slow, stalls are checked here), when
a curve reaches its target, and the flags it refuses."""

from __future__ import annotations

import pytest

from mpicoded.bench import main
from mpicoded.bench.ddp import ddp_curve, shares, time_to
from mpicoded.bench.tax import STALL_PERIOD_S, spread
from mpicoded.throttle.quota import MIN_FRACTION


def test_nobody_slow_caps_every_process_alike():
    schedule = shares(4, 0.5, 0.2, "none", first=1)
    assert schedule.static and schedule.at(0.0) == {1: 0.5, 2: 0.5, 3: 0.5, 4: 0.5}


def test_the_slow_pattern_slows_the_second_process_from_the_clock_on():
    schedule = shares(4, 0.5, 0.2, "slow", first=0)
    assert schedule.at(-1.0)[1] == 0.5  # before the first step
    assert schedule.at(0.0) == {0: 0.5, 1: pytest.approx(0.1), 2: 0.5, 3: 0.5}


def test_stalls_slow_some_processes_below_their_spread_share_for_a_period():
    schedule = shares(5, 0.5, 0.2, "stalls", first=1)
    base = dict(zip(range(1, 6), spread(0.5, 5, seed=0), strict=True))
    assert schedule.at(-1.0) == base  # before the clock starts: the mild spread only
    periods = [schedule.at(k * STALL_PERIOD_S) for k in range(200)]
    stalled = [(k, rank) for k, shares_then in enumerate(periods)
               for rank, share in shares_then.items() if share is not None and share < base[rank]]
    assert stalled  # 5% a period and a process: some in 200 periods
    for k, rank in stalled:
        slowdown = base[rank] / periods[k][rank]
        assert 10 - 1e-9 <= slowdown <= 40 + 1e-9 or periods[k][rank] == MIN_FRACTION
    assert len(stalled) < 0.15 * 200 * 5  # not every period: short random stalls


def test_ddps_log_gives_each_thetas_value_at_the_time_it_was_made():
    """Full-batch, step t's loss is at the theta step t - 1 made (its time); in mini-batches
    each step's theta is evaluated after the run, at the time the step ended."""
    steps = [{"record": "step", "step": t, "loss": 1.0 - t / 10, "at_s": 0.5 * (t + 1)}
             for t in range(3)]
    assert ddp_curve([{"record": "start"}, *steps, {"record": "run", "makespan_s": 2.0}],
                     batched=False) == [(0.5, 0.9), (1.0, 0.8)]
    evaluations = [{"record": "evaluation", "step": t, "accuracy": 0.1 * t} for t in (2, 0, 1)]
    assert ddp_curve([*steps, *evaluations], batched=True) == [(0.5, 0.0), (1.0, 0.1),
                                                               (1.5, 0.2)]


def test_a_loss_reaches_its_target_going_down_an_accuracy_going_up():
    curve = [(0.5, 0.9), (1.0, 0.7), (1.5, 0.8), (2.0, 0.6)]
    assert time_to(curve, 0.7, rising=False) == 1.0
    assert time_to(curve, 0.8, rising=True) == 0.5
    assert time_to(curve, 0.95, rising=True) is None
    assert time_to(curve, 0.5, rising=False) is None
    # the same loss to float32's last digits (summed in another order) reaches the target
    assert time_to(curve, 0.7 * (1 - 4e-8), rising=False) == 1.0
    assert time_to(curve, 0.7 * (1 - 1e-4), rising=False) == 2.0


@pytest.mark.parametrize(("flags", "says"), [
    (["--model", "cnn", "--hidden", "8"], "drop --hidden"),
    (["--model", "cnn", "--samples", "100", "--features", "4"], "drop --samples, --features"),
    (["--model", "cnn", "--batch-size", "1501"], "allowed 1 to the training rows, 1500"),
    (["--samples", "1000", "--batch-size", "0"], "allowed 1 to the training rows, 1000"),
])
def test_flags_the_model_would_ignore_or_cannot_give_are_refused(flags, says, monkeypatch,
                                                                    capsys):
    """Refused with the fix before anything runs (the environment the ranks would inherit is
    put back by monkeypatch)."""
    pytest.importorskip("torch")
    pytest.importorskip("sklearn")
    import mpicoded.bench.ddp as ddp

    monkeypatch.setattr(ddp, "needs_quotas", lambda scenario: None)
    for var in ("MPICODED_DDP_SHAPE", "MPICODED_DDP_MODEL", "MPICODED_DDP_BATCH"):
        monkeypatch.setenv(var, "")  # recorded, so put back as it was
        monkeypatch.delenv(var)
    with pytest.raises(SystemExit, match=says):
        main(["ddp", *flags])
