"""Reused message buffers: a buffer comes back once nothing views it, never while something
does (a θ a worker computes with, a result the decoder keeps)."""

from __future__ import annotations

import numpy as np
import pytest

buffers = pytest.importorskip("mpicoded.runtime.buffers")

N = 1 << 16  # past the size below which buffers are not pooled


def address(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])


def test_a_buffer_is_used_again_once_nothing_views_it():
    pool = buffers.Buffers()
    first = pool.take(N)
    where = address(first)
    second = pool.take(N)  # the first is still held
    assert not np.shares_memory(first, second)
    del first
    again = pool.take(N - 10)  # fits: a view of the free one
    assert address(again) == where and again.size == N - 10
    view = again[5:9]
    del again
    assert address(pool.take(N)) != where  # a view of it lives on
    del view
    assert address(pool.take(N)) == where
    assert pool.allocated == 3


def test_sizes_far_apart_and_small_messages_are_not_pooled():
    pool = buffers.Buffers(keep=2)
    big = address(pool.take(4 * N))
    assert address(pool.take(N)) != big  # four times too large: not handed out
    assert pool.take(10).size == 10 and pool.allocated == 2
    for _ in range(5):
        pool.take(N)  # each freed at once: the same one every time
    assert pool.allocated == 2 and len(pool.pool) <= 2
