"""The Splitter: each iteration's schedule under a uniform, optimal or adaptive split, and after
deaths and re-codes."""

from __future__ import annotations

import numpy as np

from .estimator import Estimator
from .split import Moments, optimal_split, split_schedule, uniform_split

SPLITS = ("uniform", "optimal", "adaptive")


class Splitter:
    """Decides each iteration's schedule: which of the code's tasks every worker runs.

    ``uniform`` and ``optimal`` (from declared moments) are fixed; ``adaptive`` starts uniform
    and re-splits from the Estimator after every iteration, so no one has to declare speeds.
    Every ``probe_every`` iterations each worker the split leaves idle gets one task (taken from
    the most loaded worker), so a worker that became faster is noticed. ``exclude`` takes a dead
    worker out: the load is split again among the living; ``for_survivors`` carries what is
    known of the living over to a re-coded run (``prior``: where an adaptive split starts).
    """

    probe_every = 10

    def __init__(self, kind: str, n_tasks: int, n_workers: int, declared: Moments | None = None,
                 gamma: float = 1.0, prior: Moments | None = None) -> None:
        if kind not in SPLITS:
            raise ValueError(f"split={kind!r} is unknown: allowed {list(SPLITS)}")
        if kind == "optimal" and declared is None:
            raise ValueError("split 'optimal' needs declared worker speeds (a --profile)")
        self.kind, self.n_tasks, self.n_workers, self.gamma = kind, n_tasks, n_workers, gamma
        self.declared, self.prior = declared, prior
        self.estimator = Estimator(n_workers) if kind == "adaptive" else None
        self.iterations = 0
        self.dead: set[int] = set()
        self.loads = self._split(prior if kind == "adaptive" else declared)

    def _split(self, moments: Moments | None) -> np.ndarray:
        """Loads for the living workers (zeros for the dead): optimal from ``moments``, else
        uniform."""
        live = np.array([w for w in range(self.n_workers) if w not in self.dead], dtype=int)
        loads = np.zeros(self.n_workers, dtype=int)
        if not len(live):
            return loads
        if moments is None:
            loads[live] = uniform_split(self.n_tasks, len(live))
        else:
            sub = Moments(moments.m[live], moments.v[live], moments.c[live])
            loads[live] = optimal_split(self.n_tasks, sub, self.gamma)
        return loads

    def schedule(self) -> tuple[tuple[int, ...], ...]:
        """The schedule for the next iteration."""
        return split_schedule(self.loads, self.n_tasks)

    def exclude(self, worker: int) -> None:
        """A worker died: split the load again among the living."""
        self.dead.add(worker)
        if self.estimator is not None:
            self.loads = self._split(self._estimates() if self.iterations else self.prior)
        else:
            self.loads = self._split(self.declared if self.kind == "optimal" else None)

    def partial(self, worker: int, fraction: float, seconds: float, key: object = None) -> None:
        """A worker's report of its purged work of iteration ``key`` (adaptive only; learnt at
        the next re-split): see ``Estimator.partial``."""
        if self.estimator is not None:
            self.estimator.partial(worker, fraction, seconds, key)

    def observe(self, arrivals: dict[int, list[float]], decoded_at: float,
                key: object = None) -> None:
        """After iteration ``key``: feed the estimator and re-split (adaptive only)."""
        if self.estimator is None:
            return
        assigned = {p: int(k) for p, k in enumerate(self.loads) if k}
        self.estimator.observe(arrivals, assigned, decoded_at, key)
        self.loads = self._split(self._estimates())
        self.iterations += 1
        if self.iterations % self.probe_every == 0:
            for p in np.flatnonzero(self.loads == 0):
                donor = int(np.argmax(self.loads))
                if p not in self.dead and self.loads[donor] > 1:
                    self.loads[donor] -= 1
                    self.loads[p] += 1

    def _estimates(self) -> Moments:
        assert self.estimator is not None
        return self.estimator.moments(fallback=self.prior)

    def for_survivors(self, live: list[int], n_tasks: int, scale: float) -> Splitter:
        """The split of a re-coded run on workers ``live`` (this split's indices, in their new
        order) with ``n_tasks`` tasks, each ``scale`` times the work of one now: what was declared
        or learnt about each survivor is kept, so an adaptive split does not start uniform."""
        known = self.declared
        if self.estimator is not None:
            known = self._estimates() if self.iterations else self.prior
        moved = None
        if known is not None:
            at = np.asarray(live, dtype=int)
            moved = Moments(known.m[at] * scale, known.v[at] * scale**2, known.c[at])
        if self.kind == "adaptive":
            return Splitter(self.kind, n_tasks, len(live), None, self.gamma, prior=moved)
        return Splitter(self.kind, n_tasks, len(live), moved, self.gamma)
