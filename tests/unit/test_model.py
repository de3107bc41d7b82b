"""The Session against a model of the cluster (no MPI): workers that run the real worker logic
(Inbox, PieceList) on the real wire format, message latency, late reads, stragglers, the
master's hold-back, deaths and freezes at any moment, each seed one interleaving, checked to the
end: every iteration decoded, theta equal to serial descent, every STOP answered. The checks
themselves are shown to fail on a broken worker and a broken hand-over."""

from __future__ import annotations

import numpy as np
import pytest

from mpicoded.codes import make_code
from mpicoded.core import pieces
from mpicoded.core.inbox import Inbox
from mpicoded.sim.checks import check, fixed
from mpicoded.sim.model import Model

SEEDS_A_TEST = 20  # a test each: the two cores share them evenly


@pytest.mark.parametrize("first", range(0, 60, SEEDS_A_TEST))
def test_every_interleaving_decodes_exactly_and_stops(first):
    """60 seeds, kept few for CI's time (``python -m mpicoded.sim.checks --runs N`` plays
    thousands, as before a change to the Session or the worker lands)."""
    for seed in range(first, first + SEEDS_A_TEST):
        check(seed)


def test_a_piece_handed_to_nobody_is_found_as_a_hang(monkeypatch):
    """A hand-over that makes the thief the owner of its last piece but leaves that piece out
    of the thief's list: it waits on a worker that will never compute it (nobody steals what
    is not in a list), and the model says so."""
    give = pieces.PieceWork._give

    def lossy(self, rnd, worker, taken):
        g = give(self, rnd, worker, taken)
        if len(g.tasks) < 2:
            return g
        del rnd.lists[worker][-1]
        return g._replace(tasks=g.tasks[:-1])

    monkeypatch.setattr(pieces.PieceWork, "_give", lossy)
    model = Model(make_code("gfrc", 8, stragglers=2), 0, fixed((2,)))
    with pytest.raises(AssertionError, match="hang"):
        model.run()


def test_an_idle_worker_left_waiting_with_no_wake_is_found(monkeypatch):
    """A hand-over that forgets when to look again: an idle worker waits on a holder only a
    little behind with no Tick to come (the hang the linger tests met), and the model says
    so at once, not when the run ends."""
    hand_over = pieces.PieceWork.hand_over

    def forgetful(self, rnd, live, now, first=-1):
        gives = hand_over(self, rnd, live, now, first)
        rnd.wake = None
        return gives

    monkeypatch.setattr(pieces.PieceWork, "hand_over", forgetful)
    model = Model(make_code("gfrc", 8, stragglers=2), 0, fixed(()), iterations=8)
    with pytest.raises(AssertionError, match="unwatched"):
        model.run()


def test_a_result_of_the_wrong_theta_is_found(monkeypatch):
    """A worker that computes from theta0 whatever it was sent: theta is not serial descent."""
    value = Model.value

    def stale(self, w, task):
        return value(self, w, task) + 1e-3

    monkeypatch.setattr(Model, "value", stale)
    with pytest.raises(AssertionError, match="serial descent"):
        check(1)


def test_a_worker_robbed_of_its_pieces_is_not_timed_out():
    """frc s=1, a worker frozen: its partner takes its pieces over, and workers robbed of
    pieces, idle, owe nothing. Only the frozen one is timed out (the rule was 'owes tasks of
    its list': found here, a living worker was declared failed)."""
    model = Model(make_code("frc", 8, stragglers=1), 0, fixed(()), timeout=30.0,
                  iterations=6, freezes=((3.0, 2),))
    outcome = model.run()
    assert outcome.timed_out == [2] and outcome.unstopped == [2]
    np.testing.assert_allclose(outcome.theta, model.work.serial(6), rtol=1e-9)


def test_a_worker_assigned_pieces_before_it_began_runs_them(monkeypatch):
    """The master hands a worker that looks idle pieces while its ITERATE is still in flight:
    both are read together and the ASSIGNed list is the one run."""
    taken = []
    take_ahead = Inbox.take_ahead

    def spy(self, msg):
        tasks = take_ahead(self, msg)
        taken.append(tasks is not None)
        return tasks

    monkeypatch.setattr(Inbox, "take_ahead", spy)
    model = Model(make_code("gfrc", 20, stragglers=2), 2, fixed((2,), 20.0), iterations=25)
    outcome = model.run()
    assert any(taken) and len(outcome.records) == 25
    np.testing.assert_allclose(outcome.theta, model.work.serial(25), rtol=1e-9)


def test_a_late_worker_keeps_one_piece_and_the_run_holds(monkeypatch):
    """Two 200x stragglers with no live result for LATE_ROUNDS rounds each keep one piece of
    their list, the rest dealt to the others at once; the run still decodes exactly."""
    late: list[frozenset[int]] = []
    open_round = pieces.PieceWork.open

    def spy(self, rnd, schedule, quiet, live):
        open_round(self, rnd, schedule, quiet, live)
        late.append(self.late)
        assert all(len(rnd.lists[w]) == 1 for w in self.late)

    monkeypatch.setattr(pieces.PieceWork, "open", spy)
    model = Model(make_code("spread", 12, stragglers=2), 3, fixed((2, 5), 200.0),
                  iterations=30)
    outcome = model.run()
    assert {1, 4} <= set().union(*late)
    np.testing.assert_allclose(outcome.theta, model.work.serial(30), rtol=1e-9)
