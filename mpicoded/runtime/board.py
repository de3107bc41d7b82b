"""θ on shared memory for the workers on rank 0's node: rank 0 writes each ITERATE's θ once
into a slot of its board and sends those workers the slot alone; each copies θ out itself.
Sent as messages, θ was copied once for each worker, one after another (six 4 MB copies: the
last worker began its task some 10-20 ms after the first)."""

from __future__ import annotations

import mmap
import os
import platform

import numpy as np

from ..core.protocol import Message, on_board

SLOTS = 4  # θs kept: a worker whose slot was written again is that many iterations behind
BOARD_BYTES = 64 << 10  # a smaller θ rides in its ITERATE (a copy of it costs nothing)
STAMP = 8  # bytes before each slot's θ: the ITERATE's stamp once the slot holds its θ


def possible() -> bool:
    """Whether this host can have a board: Linux's anonymous shared files, and x86's store
    order (a reader that sees a slot's stamp sees the θ written before it)."""
    return hasattr(os, "memfd_create") and platform.machine() in ("x86_64", "AMD64")


class Board:
    """``SLOTS`` slots of ``size`` values of ``dtype``, each behind its stamp. Rank 0 makes it
    (``create``) and names it by its ``path``; a worker opens the path read-only."""

    def __init__(self, fd: int, path: str, size: int, dtype: np.dtype, writable: bool) -> None:
        self.path, self.size, self.dtype = path, size, np.dtype(dtype)
        self.slot_bytes = STAMP + self.size * self.dtype.itemsize
        self.slot_bytes += -self.slot_bytes % 8  # each stamp aligned
        self.fd = fd
        self.map = mmap.mmap(fd, SLOTS * self.slot_bytes,
                             prot=mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0))
        self.stamp = 0  # the last stamp written (rank 0's)

    @classmethod
    def create(cls, size: int, dtype: np.dtype) -> Board | None:
        """A new board in memory (None where this host cannot have one, or memory is short):
        gone with the last process that holds it, so a run that dies leaves nothing behind."""
        if not possible():
            return None
        fd = os.memfd_create("mpicoded-board")
        slot = STAMP + size * np.dtype(dtype).itemsize
        try:
            os.posix_fallocate(fd, 0, SLOTS * (slot + -slot % 8))  # a short of memory: now
        except OSError:
            os.close(fd)
            return None
        return cls(fd, f"/proc/{os.getpid()}/fd/{fd}", size, dtype, writable=True)

    @classmethod
    def open(cls, path: str, size: int, dtype: np.dtype) -> Board:
        """The board rank 0 named (a worker on its node)."""
        return cls(os.open(path, os.O_RDONLY), path, size, dtype, writable=False)

    def _stamp(self, slot: int) -> np.ndarray:
        return np.frombuffer(self.map, np.int64, 1, slot * self.slot_bytes)

    def _values(self, slot: int) -> np.ndarray:
        return np.frombuffer(self.map, self.dtype, self.size, slot * self.slot_bytes + STAMP)

    def write(self, theta: np.ndarray) -> tuple[int, int]:
        """θ into the next slot: (slot, stamp), which the ITERATE names."""
        self.stamp += 1
        slot = self.stamp % SLOTS
        stamp = self._stamp(slot)
        stamp[0] = 0  # being written
        self._values(slot)[:] = np.ravel(theta)
        stamp[0] = self.stamp
        return slot, self.stamp

    def read(self, slot: int, stamp: int) -> np.ndarray | None:
        """A copy of the θ stamped ``stamp`` in ``slot``; None if the slot holds a newer one
        (this reader is ``SLOTS`` iterations behind: its ITERATE is stale)."""
        mark = self._stamp(slot)
        if int(mark[0]) != stamp:
            return None
        theta = self._values(slot).copy()
        return theta if int(mark[0]) == stamp else None

    def close(self) -> None:
        self.map.close()
        os.close(self.fd)


def follow(board: Board | None, named: tuple[str, str, int] | None) -> Board | None:
    """A worker's board once its set-up names ``named`` (path, dtype, length): the one open if
    it is that, else opened now, while rank 0 surely holds it; None where none is named."""
    if named is None or (board is not None and board.path == named[0]):
        return board if named is not None else None
    path, dtype, size = named
    try:
        return Board.open(path, size, np.dtype(dtype))
    except OSError as exc:
        raise RuntimeError(f"rank 0's board {path} cannot be opened here ({exc}): rank 0 "
                           f"took this rank for one on its node") from exc


def theta_of(msg: Message, section: np.ndarray, board: Board | None,
             latest: tuple[tuple[int, int, int], np.ndarray] | None) -> np.ndarray | None:
    """θ of an ITERATE: its θ ``section``, or where it names a slot of rank 0's board a copy
    from there (``latest``, the worker's θ of the iteration begun last, again for its later
    pieces); None if the slot holds a newer θ already (the ITERATE is stale)."""
    where = on_board(msg)
    if where is None:
        return section
    if latest is not None and latest[0] == (msg.epoch, msg.job, msg.iteration):
        return latest[1]
    if board is None:
        raise RuntimeError("an ITERATE names rank 0's board, but no set-up named one")
    return board.read(*where)
