"""Delay models: keyed, reproducible, and shaped as documented."""

from __future__ import annotations

import numpy as np
import pytest

from mpicoded.delays import DelayModel


def test_seed001_is_keyed_not_order_dependent():
    model = DelayModel("seed001", seed=5)
    a = [model.task_delay(w, 0, 3, 0, 1.0) for w in range(6)]
    b = [model.task_delay(w, 0, 3, 0, 1.0) for w in reversed(range(6))][::-1]
    assert a == b
    assert model.task_delay(2, 0, 3, 0, 1.0) != model.task_delay(2, 0, 4, 0, 1.0)


def test_seed001_one_draw_per_worker_iteration_scaled_by_units():
    model = DelayModel("seed001", seed=1, mu=10, alpha=0.01)
    one = model.task_delay(4, 0, 0, 0, 1.0)
    assert model.task_delay(4, 0, 0, 5, 1.0) == one  # every computation of the iteration: α + E
    assert model.task_delay(4, 0, 0, 0, 3.0) == pytest.approx(3 * one)


def test_seed001_mean_matches_model():
    model = DelayModel("seed001", seed=2, mu=10, alpha=0.01)
    draws = np.array([model.task_delay(w, 0, it, 0, 1.0) for w in range(20) for it in range(200)])
    assert draws.min() >= 0.01
    assert draws.mean() == pytest.approx(0.01 + 0.1, rel=0.1)


def test_persistent_slow_workers():
    model = DelayModel("persistent", task_time=0.02, slow=frozenset({3}), slow_factor=10)
    assert model.task_delay(0, 0, 0, 0, 2.0) == pytest.approx(0.04)
    assert model.task_delay(3, 0, 0, 0, 2.0) == pytest.approx(0.4)
    assert model.seconds(0.4) == pytest.approx(0.4)
    assert DelayModel("persistent", time_scale=0.5).seconds(0.4) == pytest.approx(0.2)
    assert DelayModel("none").task_delay(3, 0, 0, 0, 5.0) == 0.0


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"kind": "weibull"}, "delay='weibull' is unknown"),
    ({"kind": "seed001", "mu": 0}, "mu=0 is out of range"),
    ({"kind": "persistent", "time_scale": -1}, "time_scale=-1 is out of range"),
    ({"kind": "persistent", "task_time": -0.1}, "task_time=-0.1 is out of range"),
])
def test_invalid_models(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DelayModel(**kwargs)
