"""Rank 0's board: θ written once, copied out by each worker on its node; a slot written
again makes an old ITERATE stale, never a torn θ."""

from __future__ import annotations

import numpy as np
import pytest

from mpicoded.core.protocol import Tag, pack_iterate, unpack
from mpicoded.runtime.board import SLOTS, Board, follow, possible, theta_of

pytestmark = pytest.mark.skipif(not possible(), reason="no board on this host")


def test_a_worker_reads_the_theta_written_in_its_slot_as_a_copy():
    board = Board.create(1000, np.dtype(np.float32))
    assert board is not None
    reader = follow(None, (board.path, "float32", 1000))
    assert reader is not None and follow(reader, (board.path, "float32", 1000)) is reader
    thetas = [np.random.default_rng(i).standard_normal(1000) for i in range(SLOTS + 1)]
    where = [board.write(theta) for theta in thetas]
    assert len({slot for slot, _ in where[:SLOTS]}) == SLOTS  # each slot once, then again
    assert reader.read(*where[0]) is None  # written again: that ITERATE is stale
    for theta, (slot, stamp) in zip(thetas[1:], where[1:], strict=True):
        got = reader.read(slot, stamp)
        assert got is not None and got.dtype == np.float32
        np.testing.assert_array_equal(got, theta.astype(np.float32))
    got = reader.read(*where[-1])
    board.write(thetas[0])  # the slot after the last: what was read stays as read
    assert got is not None and np.array_equal(got, thetas[-1].astype(np.float32))
    assert follow(reader, None) is None
    reader.close()
    board.close()


def test_an_iterate_takes_theta_from_the_board_or_from_itself():
    board = Board.create(50, np.dtype(np.float64))
    assert board is not None
    reader = follow(None, (board.path, "float64", 50))
    theta = np.arange(50.0)
    carried = unpack(Tag.ITERATE, pack_iterate(0, 3, theta, {1: (0,)}))
    section = carried.payload[:50]
    assert theta_of(carried, section, None, None) is section
    named = unpack(Tag.ITERATE, pack_iterate(0, 3, theta, {1: (0,)}, board=board.write(theta)))
    got = theta_of(named, named.payload[:2], reader, None)
    assert got is not None and np.array_equal(got, theta)
    kept = np.ones(50)  # the iteration's θ read already, for its later pieces
    assert theta_of(named, named.payload[:2], reader, ((0, 0, 3), kept)) is kept
    with pytest.raises(RuntimeError, match="no set-up named one"):
        theta_of(named, named.payload[:2], None, None)
    board.close()
    reader.close()


def test_a_board_that_cannot_be_opened_is_refused_with_the_reason():
    with pytest.raises(RuntimeError, match="cannot be opened here.*one on its node"):
        follow(None, ("/proc/1/fd/999999", "float64", 10))
