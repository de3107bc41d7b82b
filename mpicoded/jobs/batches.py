"""Mini-batches (pure): which rows of the data set each step of mini-batch SGD computes, the same
on every rank from a seed alone, and each DDP process's share of them (``ShardSampler``).

A pass over the data is a seeded shuffle of its rows; step t takes the next ``size`` rows of its
pass's shuffle (the last short batch of a pass is dropped, as ``drop_last=True`` does). Rows are
numbered in the order of the job's partitions (the data set's own order for the built-in jobs
and ``TorchJob``), so a partition's rows in a step do not depend on the code or its re-codes: a
run re-coded after a death keeps its batches, and so its trajectory.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .rows import pick_rows


@functools.lru_cache(maxsize=4)
def _shuffle(rows: int, seed: int, pass_: int) -> np.ndarray:
    """Pass ``pass_``'s order of ``rows`` rows: one permutation a pass, kept while it lasts."""
    order = np.random.default_rng([seed, pass_]).permutation(rows)
    order.flags.writeable = False
    return order


@dataclass(frozen=True)
class Batches:
    """Steps of ``size`` rows over a data set of ``rows`` rows, shuffled by ``seed``."""

    rows: int
    size: int
    seed: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.size <= self.rows:
            raise ValueError(f"--batch-size {self.size} is out of range: allowed 1 to the "
                             f"data's {self.rows} rows")

    @property
    def steps_per_pass(self) -> int:
        return self.rows // self.size

    @property
    def share(self) -> float:
        """The fraction of the data a step computes."""
        return self.size / self.rows

    def ordered(self, step: int) -> np.ndarray:
        """Step ``step``'s rows in their shuffled order (how a DDP process's share is dealt)."""
        pass_, index = divmod(step, self.steps_per_pass)
        return _shuffle(self.rows, self.seed, pass_)[index * self.size:(index + 1) * self.size]

    def batch(self, step: int) -> np.ndarray:
        """Step ``step``'s rows, ascending (a partition's rows are read in their order)."""
        return np.sort(self.ordered(step))

    @staticmethod
    def within(batch: np.ndarray, start: int, stop: int) -> np.ndarray:
        """The rows of ``batch`` (``batch(step)``) in [start, stop): those a partition, or a
        piece of one, over those data rows computes."""
        lo, hi = np.searchsorted(batch, (start, stop))
        return batch[lo:hi]

    def counts(self, step: int, bounds: Sequence[int]) -> np.ndarray:
        """Each partition's rows in step ``step`` (``bounds``: where each partition begins, and
        the data's end)."""
        return np.diff(np.searchsorted(self.batch(step), bounds))


class StepRows(Mapping[int, Any]):
    """A worker's blocks as step ``step`` of ``batches`` sees them: each holds its partition's
    rows in the step's batch (picked once a step, on first use); ``piece`` cuts a piece's."""

    def __init__(self, batches: Batches, bounds: Sequence[int], blocks: Mapping[int, Any],
                 step: int) -> None:
        self.batches, self.bounds, self.blocks = batches, bounds, blocks
        self.batch = batches.batch(step)
        self.picked: dict[int, Any] = {}

    def __getitem__(self, key: int) -> Any:
        block = self.picked.get(key)
        if block is None:
            block = self.picked[key] = self.piece(key, 0, self.bounds[key + 1] - self.bounds[key])
        return block

    def __iter__(self) -> Iterator[int]:
        return iter(self.blocks)

    def __len__(self) -> int:
        return len(self.blocks)

    def piece(self, key: int, start: int, stop: int) -> Any:
        """Block ``key``'s rows [start, stop) that are in the step's batch."""
        first = self.bounds[key]
        return pick_rows(self.blocks[key],
                         self.batches.within(self.batch, first + start, first + stop) - first)


class ShardSampler:
    """A DDP process's rows, pass by pass, for ``torch.utils.data.DataLoader(data,
    batch_size=size // world, sampler=...)``: each step the processes' shares make up
    mpicoded's batch of that step, in equal parts, so the mean of their mean gradients (DDP's
    all-reduce) is the batch's mean gradient: the same trajectory as ``mpicoded.run(job,
    batch_size=size, batch_seed=seed)``. Call ``set_epoch(p)`` before pass p, as with
    ``DistributedSampler``."""

    def __init__(self, rows: int, size: int, seed: int = 0, rank: int = 0,
                 world: int = 1) -> None:
        if world < 1 or not 0 <= rank < world:
            raise ValueError(f"rank {rank} of world {world}: expected 0 <= rank < world")
        if size % world:
            raise ValueError(f"batch size {size} over {world} processes: each must get as many "
                             "rows (the mean of their means is the batch's mean only then)")
        self.batches, self.rank, self.world = Batches(rows, size, seed), rank, world
        self.pass_ = 0  # DDP's epoch (here an epoch is a re-code)

    def set_epoch(self, epoch: int) -> None:
        self.pass_ = epoch

    def __len__(self) -> int:
        return self.batches.steps_per_pass * (self.batches.size // self.world)

    def __iter__(self) -> Iterator[int]:
        first = self.pass_ * self.batches.steps_per_pass
        for step in range(first, first + self.batches.steps_per_pass):
            yield from self.batches.ordered(step)[self.rank::self.world].tolist()
