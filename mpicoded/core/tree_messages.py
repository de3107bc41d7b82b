"""The messages of the relay and reduce trees: an ITERATE's forwarding order, REDUCE (what a
worker sums and where it sends the sum) and PART (a partial sum); laid out as ``LAYOUTS`` says."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from .protocol import HEADER, Message, pack, put_values, theta_slots


def relay_of(msg: Message) -> tuple[tuple[int, int], ...]:
    """The relay of an ITERATE: (rank, its parent) pairs (none: rank 0 sent it to each rank)."""
    slots = theta_slots(msg)
    offsets = msg.payload[slots : slots + msg.task]
    start = slots + msg.task + (int(offsets[-1]) if len(offsets) else 0)
    flat = msg.payload[start:].astype(np.int64).tolist()
    return tuple(zip(flat[::2], flat[1::2], strict=True))


def relay_children(relay: Sequence[tuple[int, int]], rank: int) -> tuple[int, ...]:
    """The ranks ``rank`` forwards to in ``relay`` (-1 or 0 for rank 0)."""
    rank = max(rank, 0)
    return tuple(r for r, parent in relay if parent == rank)


def pack_reduce(job: int, iteration: int, epoch: int, attempt: int, parent: int,
                terms: Sequence[tuple[int, float]], children: Sequence[int]) -> np.ndarray:
    """REDUCE (laid out as ``LAYOUTS`` says): which of its values a worker sums, with what
    coefficients, whose PARTs it adds, and where the sum goes."""
    keys = np.array([t for t, _ in terms], dtype=np.float64)
    coefs = np.array([c for _, c in terms], dtype=np.float64)
    return pack(job, iteration, epoch, attempt, parent, keys, coefs,
                np.asarray(children, dtype=np.float64))


def reduce_fields(msg: Message) -> tuple[tuple[tuple[int, float], ...], tuple[int, ...]]:
    """A REDUCE's terms (value key, coefficient) and children's ranks; its parent is
    ``msg.worker``, its attempt ``msg.task``."""
    n = msg.count
    keys = msg.payload[:n].astype(np.int64).tolist()
    coefs = msg.payload[n : 2 * n].tolist()
    children = tuple(msg.payload[2 * n :].astype(np.int64).tolist())
    return tuple(zip(keys, coefs, strict=True)), children


def pack_part(job: int, iteration: int, epoch: int, attempt: int, worker: int,
              value: np.ndarray, half: bool = False,
              out: Callable[[int], np.ndarray] = np.empty) -> np.ndarray:
    """PART (laid out as ``LAYOUTS`` says): a partial sum, float32 two a slot if ``half``."""
    n = value.size
    half = half and n > 1
    slots = (n + 1) // 2 if half else n
    buf = out(HEADER + slots)
    buf[:HEADER] = (job, iteration, epoch, attempt, worker, n)
    put_values(buf[HEADER:], value, half)
    return buf


def part_value(msg: Message) -> np.ndarray:
    """A PART's sum: a view of the message, float32 where it travels so."""
    if len(msg.payload) < msg.count:
        return msg.payload.view(np.float32)[: msg.count]
    return msg.payload[: msg.count]
