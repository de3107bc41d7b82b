"""θ relayed by the workers (pure): where θ is large, rank 0 sends an ITERATE to two workers
and each forwards it to two more before it computes, so rank 0 sends two copies whatever the
number of workers (four where ranks share nodes: two to other nodes' first ranks, two within
its own; ``trees.py``). The Session orders the relay by how soon each worker finished the last
round (the first nearest rank 0, those silent in it at the leaves: nobody waits on a straggler
to forward), and sends θ directly to the ranks still silent once the round is overdue (a
relaying rank frozen or slow) or a relaying rank dies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .events import Instruction, Iterate

if TYPE_CHECKING:
    from .round import Round
    from .session import Session

OVERDUE = 4.0  # ranks still silent this many times the last round's compute in are sent θ
FIRST_S = 10.0  # in the first round (no compute measured yet): after this long
LEAST_S = 1.0  # and never sooner than this


def order(workers: list[int], previous: Round | None) -> list[int]:
    """``workers`` by how the last round went for each: those that finished their tasks, the
    first first; then those that still owed some at its decode (a rank that sent a result
    early and froze is one); those it never heard from last."""
    done = {} if previous is None else {w: max(t) for w, t in previous.arrivals.items() if t}
    behind = set() if previous is None else previous.behind()
    return sorted(workers, key=lambda w: (w not in done, w in behind, done.get(w, 0.0), w))


def due(now: float, previous: Round | None) -> float:
    """When the ranks still silent in a round relayed at ``now`` are sent θ directly."""
    if previous is None or previous.decoded_at is None:
        return now + FIRST_S
    return now + max(OVERDUE * previous.decoded_at, LEAST_S)


def resend(session: Session, rnd: Round, ranks: list[int]) -> list[Instruction]:
    """θ sent directly to those of ``ranks`` still silent in ``rnd`` (each with its list as it
    stands now); a rank that had it already drops the copy."""
    index = session.ranks.index
    silent = []
    for r in ranks:
        w = index(r)
        if w is not None and w in session.live and not rnd.arrivals.get(w):
            silent.append((r, tuple(rnd.lists.get(w, rnd.relay_lists[r]))))
    if not silent:
        return []
    return [Iterate(rnd.job, rnd.iteration, rnd.epoch, tuple(silent), session.stream.theta)]
