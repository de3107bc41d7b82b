"""Job streams: arrivals, the Lindley recursion, the genie bound."""

from __future__ import annotations

import numpy as np
import pytest

from mpicoded.delays import PAPER000_PROFILE, DelayModel
from mpicoded.stream import genie_iteration_time, poisson_arrivals, serve_in_order


def test_lindley_recursion_by_hand():
    # arrivals 0, 1, 10; services 3, 3, 1: job 1 waits for job 0, job 2 finds the server idle
    times = serve_in_order(np.array([0.0, 1.0, 10.0]), np.array([3.0, 3.0, 1.0]))
    assert list(times.start) == [0, 3, 10]
    assert list(times.done) == [3, 6, 11]
    assert list(times.delay) == [3, 5, 1]


def test_poisson_arrivals_rate_and_reproducibility():
    a = poisson_arrivals(20001, 0.5, seed=1)
    assert a[0] == 0 and np.all(np.diff(a) > 0)
    assert np.mean(np.diff(a)) == pytest.approx(2.0, rel=0.03)
    assert np.array_equal(a[:10], poisson_arrivals(10, 0.5, seed=1))
    with pytest.raises(ValueError, match="allowed jobs >= 1, rate > 0"):
        poisson_arrivals(3, 0.0, seed=1)


def test_genie_by_hand_with_persistent_delays():
    """Two workers, tasks of 1 and 3 units: 4 tasks are done at time 3 (three by the fast one
    at 1, 2, 3 and one by the slow one at 3)."""
    delay = DelayModel("persistent", task_time=1.0, slow=frozenset({1}), slow_factor=3)
    assert genie_iteration_time(delay, 2, 0, 0, needed=4) == 3.0
    assert genie_iteration_time(delay, 2, 0, 0, needed=5) == 4.0


def test_genie_includes_communication_delay():
    delay = DelayModel("seed000", profile=PAPER000_PROFILE, complexity=1.0, seed=3)
    t = genie_iteration_time(delay, 20, 0, 0, needed=100)
    assert t > 0.25  # nobody starts before its c_p (the smallest is 0.25)
    assert t == genie_iteration_time(delay, 20, 0, 0, needed=100)
