"""The three index spaces a worker has, named by one small mapping (pure: no MPI).

A worker's **index** is its place in the current code (what the ``Session``'s bookkeeping,
the load split and the code speak of); its **rank** is where messages to it go, in the run's
communicator (after a failover, the shrunken one's); its **world rank** is its identity for the whole run,
its rank in the run's first communicator (delays, kills and the task trace are keyed by it).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence


class WorkerRanks:
    """Index -> rank, rank -> index and rank -> world rank. A worker of an adopted run that
    is already dead has a negative rank (-world rank): it is never sent anything."""

    def __init__(self, ranks: Sequence[int], world: Mapping[int, int]) -> None:
        self.ranks = list(ranks)
        self._world = dict(world)
        self._index = {rank: w for w, rank in enumerate(self.ranks)}  # O(1) on every message

    @classmethod
    def first(cls, n_workers: int) -> WorkerRanks:
        """A run's start: worker w on rank w + 1, its world rank too."""
        ranks = range(1, n_workers + 1)
        return cls(ranks, {rank: rank for rank in ranks})

    @classmethod
    def adopted(cls, n_workers: int, survivors: Mapping[int, int]) -> WorkerRanks:
        """After a failover: worker w (world rank w + 1) is on rank ``survivors[w + 1]`` of the
        shrunken communicator, or dead (-(w + 1))."""
        ranks = [survivors.get(w + 1, -(w + 1)) for w in range(n_workers)]
        return cls(ranks, {rank: w + 1 for w, rank in enumerate(ranks)})

    def recoded(self, live: Sequence[int]) -> WorkerRanks:
        """A re-code for the workers on ranks ``live``: they are workers 0, 1, ... of the new
        code, on the same ranks with the same world ranks."""
        return WorkerRanks(live, self._world)

    def rank(self, worker: int) -> int:
        """Where messages to ``worker`` go."""
        return self.ranks[worker]

    def index(self, rank: int) -> int | None:
        """The worker on ``rank``, None if the current code has none there (an old epoch's)."""
        return self._index.get(rank)

    def world(self, rank: int) -> int:
        """The world rank (identity) of the worker on ``rank``."""
        return self._world[rank]

    def __iter__(self) -> Iterator[int]:
        """The ranks, by worker index."""
        return iter(self.ranks)

    def __len__(self) -> int:
        return len(self.ranks)
