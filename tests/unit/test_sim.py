"""The simulator: hand-checkable cases, the runtime's metrics, the keyed delays it shares."""

from __future__ import annotations

import numpy as np
import pytest

from mpicoded.codes import make_code
from mpicoded.delays import DelayModel, keyed_uniform
from mpicoded.sim import Simulator, simulate


def test_persistent_straggler_by_hand():
    """frc s=1 on 4 workers, worker 3 ten times slower: each iteration ends when groups
    {0,1} and {2,3} each have a result, at 2 units x 0.1 = 0.2 model time; worker 3 is purged."""
    code = make_code("frc", 4, stragglers=1)
    delay = DelayModel("persistent", task_time=0.1, slow=frozenset({3}), slow_factor=10,
                       time_scale=2.0)
    res = simulate(code, delay, iterations=5)
    for r in res.records:
        assert r.wall_s == pytest.approx(0.2 * 2.0)  # model time x time scale
        assert r.purged_tasks == 1 and r.results_used == 2 and r.missing_partitions == 0
    assert res.task_events == 20


def test_finish_times_are_cumulative_per_worker():
    code = make_code("ucmmc", 3, load=2)
    sim = Simulator(code, DelayModel("persistent", task_time=1.0, slow=frozenset({1}),
                                     slow_factor=3), task_cost=np.ones(3))
    assert list(sim.finish_times(0, 0)) == [1, 2, 3, 6, 1, 2]


def test_single_message_codes_arrive_once_per_worker():
    code = make_code("mcc", 4, load=2)
    sim = Simulator(code, DelayModel("seed001", seed=2), task_cost=np.ones(8))
    done = sim.finish_times(0, 0)
    assert (done[0::2] == done[1::2]).all()  # both blocks of a worker at its second finish
    res = sim.run(30)
    assert all(r.messages == 2 and r.results_received == 4 for r in res.records)


def test_seed001_matches_the_runtime_draws():
    """The simulator and the MPI workers draw the same delay for the same key."""
    delay = DelayModel("seed001", seed=9)
    workers = np.arange(20)
    vector = delay.task_delays(workers, 1, 7, workers, np.full(20, 2.0))
    scalar = [delay.task_delay(w, 1, 7, w, 2.0) for w in range(20)]
    assert np.array_equal(vector, scalar)


def test_keyed_uniform_is_uniform_and_keyed():
    u = keyed_uniform(3, np.arange(200_000), 1)
    assert 0 < u.min() and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.005 and abs(u.var() - 1 / 12) < 0.002
    assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < 0.01
    assert not np.array_equal(u, keyed_uniform(4, np.arange(200_000), 1))
    assert np.array_equal(u[:10], keyed_uniform(3, np.arange(10), 1))


def test_paper001_volumes_at_zero_tolerance():
    """Section 4.1 on the simulator: volume about 1.8 (UC-MMC), 1.5 (CPGC), 1 (MCC)."""
    delay = DelayModel("seed001", seed=0)
    volume = {}
    for name in ("ucmmc", "cpgc", "mcc"):
        code = make_code(name, 20, load=3)
        volume[name] = simulate(code, delay, 300, task_cost=np.ones(code.n_tasks)).mean("volume")
    assert volume["ucmmc"] == pytest.approx(1.8, abs=0.1)
    assert volume["cpgc"] == pytest.approx(1.5, abs=0.1)
    assert volume["mcc"] == pytest.approx(1.0, abs=0.1)


def test_tolerance_shortens_iterations():
    code = make_code("cpgc", 20, load=3)
    delay = DelayModel("seed001", seed=1)
    exact = simulate(code, delay, 200, task_cost=np.ones(60))
    partial = simulate(code, delay, 200, tolerance=1, task_cost=np.ones(60))
    assert partial.mean("wall_s") < exact.mean("wall_s")
    assert all(r.missing_partitions <= 1 for r in partial.records)


def test_stream_with_splits_and_genie():
    """paper000's profile: the optimal split beats uniform, and no split beats the genie."""
    from mpicoded.balance.split import Moments
    from mpicoded.balance.splitter import Splitter
    from mpicoded.delays import PAPER000_PROFILE
    from mpicoded.stream import poisson_arrivals

    code = make_code("mds", 20, partitions=40, redundancy=1.25)
    delay = DelayModel("seed000", profile=PAPER000_PROFILE, complexity=2.5, seed=1)
    m = 2.5 / np.array([mu for mu, _ in PAPER000_PROFILE])
    declared = Moments(m, m**2, np.array([c for _, c in PAPER000_PROFILE]))
    arrivals = poisson_arrivals(10, 0.01, seed=1)
    delays = {}
    for split in ("uniform", "optimal", "adaptive"):
        splitter = None if split == "uniform" else Splitter(split, 50, 20, declared)
        res = Simulator(code, delay, np.ones(50), 0, splitter).run_stream(arrivals, 10)
        delays[split] = res.jobs.delay.mean()
        assert (res.jobs.delay >= res.genie.delay - 1e-9).all()
        assert len(res.records) == 100 and {r.job for r in res.records} == set(range(10))
    assert delays["uniform"] > 1.5 * delays["optimal"]
    assert delays["adaptive"] < delays["uniform"]


def test_expected_iteration_time_by_hand():
    """Any 4 of 6 tasks decode (mds); loads (4, 2), unit tasks on worker 0 and 3-unit tasks on
    worker 1: results at 1, 2, 3 (worker 0) and 3 (worker 1), so the fourth arrives at 3."""
    from mpicoded.sim import expected_iteration_time

    code = make_code("mds", 2, partitions=4, redundancy=1.5)
    delay = DelayModel("persistent", task_time=1.0, slow=frozenset({1}), slow_factor=3)
    assert expected_iteration_time(code, delay, np.array([4, 2]), iterations=3) == 3.0


@pytest.mark.parametrize("partitions", [6, 12, 18])
def test_a_row_costs_the_same_delay_however_finely_the_data_is_cut(partitions):
    """The unit of injected work is a 1/n share of the data: uncoded on 6 workers takes one
    unit an iteration whether the data is in 6, 12 or 18 partitions (it took 1, 2, 3)."""
    code = make_code("uncoded", 6, partitions=partitions)
    assert code.work_units.sum() == pytest.approx(6.0)
    delay = DelayModel("persistent", task_time=1.0)
    assert simulate(code, delay, iterations=3).mean("wall_s") == pytest.approx(1.0)


@pytest.mark.parametrize(("name", "params"), [("spread", {"stragglers": 2}),
                                              ("frc", {"stragglers": 1}),
                                              ("gfrc", {"stragglers": 2})])
def test_the_pieces_of_the_data_cost_n_units_whatever_the_code(name, params):
    """Every partition is cut once into pieces, so their units add up to the workers' count:
    spread's 2n partitions cost what frc's n do."""
    from mpicoded.codes.partial import partial_code, piece_cost

    code = make_code(name, 6, **params)
    part = partial_code(code, [240000 // code.n_partitions] * code.n_partitions, 1000)
    assert piece_cost(part).sum() == pytest.approx(6.0)
