"""Message buffers used again: a buffer is free once nothing views it any more, so a message of
megabytes (θ, a gradient) costs neither an allocation nor the page faults of fresh memory."""

from __future__ import annotations

import sys

import numpy as np

MIN_SLOTS = 1 << 14  # smaller messages are allocated as they come: malloc keeps them warm
KEEP = 8  # free buffers kept (the largest go last: they are the ones worth keeping)
FREE = 3  # references to a free buffer where it is tested: the pool's list, the loop's name and
# getrefcount's argument


class Buffers:
    """A pool of float64 buffers. ``take(n)`` gives n slots: a view of a free buffer that holds
    at least n and at most twice as many, or a new one. A buffer is free when the pool holds
    the only reference to it: a numpy view keeps its base alive, so a message whose payload is
    still read (a θ a worker computes with, a result the decoder keeps) is never reused."""

    def __init__(self, keep: int = KEEP) -> None:
        self.keep = keep
        self.pool: list[np.ndarray] = []
        self.allocated = 0  # buffers made (a message the pool could not serve)

    def take(self, n: int) -> np.ndarray:
        if n < MIN_SLOTS:
            return np.empty(n)
        best = None
        for i in range(len(self.pool)):
            buf = self.pool[i]
            if n <= buf.size < 2 * n and sys.getrefcount(buf) == FREE and (
                    best is None or buf.size < best.size):
                best = buf
        if best is not None:
            return best[:n]
        buf = np.empty(n)
        self.allocated += 1
        self.pool.append(buf)
        if len(self.pool) > self.keep:
            self._shrink()
        return buf

    def _shrink(self) -> None:
        """Drop free buffers, the smallest first, down to ``keep`` (those in use stay)."""
        free = []
        for i in range(len(self.pool)):
            buf = self.pool[i]
            if sys.getrefcount(buf) == FREE:
                free.append((buf.size, i))
        drop = {i for _, i in sorted(free)[: len(self.pool) - self.keep]}
        self.pool = [self.pool[i] for i in range(len(self.pool)) if i not in drop]
