"""WorkerRanks: a worker's index in the code, its rank in the communicator, its world rank."""

from __future__ import annotations

from mpicoded.core.ranks import WorkerRanks


def test_at_the_start_index_rank_and_world_rank_line_up():
    ranks = WorkerRanks.first(4)
    assert list(ranks) == [1, 2, 3, 4] and len(ranks) == 4
    assert [ranks.rank(w) for w in range(4)] == [1, 2, 3, 4]
    assert [ranks.index(r) for r in (1, 4, 5)] == [0, 3, None]
    assert ranks.world(3) == 3


def test_a_recode_renumbers_the_workers_and_keeps_their_identity():
    ranks = WorkerRanks.first(5).recoded([1, 3, 5])  # the workers on ranks 2 and 4 died
    assert [ranks.rank(w) for w in range(3)] == [1, 3, 5]
    assert ranks.index(3) == 1 and ranks.index(2) is None  # an old epoch's rank: no worker
    assert ranks.world(5) == 5


def test_after_a_failover_survivors_sit_on_new_ranks_and_the_dead_on_negative_ones():
    # world ranks 1..4 were workers; rank 0 died, world 1 became the master; 2 and 4 survive
    ranks = WorkerRanks.adopted(4, {2: 1, 4: 2})
    assert list(ranks) == [-1, 1, -3, 2]  # the dead (and the new master's own tasks): < 0
    assert ranks.index(1) == 1 and ranks.index(2) == 3
    assert ranks.world(1) == 2 and ranks.world(2) == 4 and ranks.world(-3) == 3
