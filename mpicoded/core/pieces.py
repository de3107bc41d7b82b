"""Partial work (pure): which worker computes which piece of the open round, and when a piece
owed by a slow holder is handed to another.

The code is one cut into pieces (``partial_code``: row ranges of partitions; ``range_code``: row
ranges of coded blocks); ``PieceTable`` reads its piece table once, typed. Each worker starts on
its primary share; one done with its share takes over the far half of the largest share still
owed among the blocks it holds, so a slow holder and its helper meet in the middle. A worker
silent for QUIET_ROUNDS rounds is left out of the next one and its share dealt to the others from
the start. Workers are code indices; a ``Give`` is an ASSIGN, or the round's ITERATE for a
worker that has none yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from ..codes import Code
from ..codes.partial import Piece
from .round import Round

QUIET_ROUNDS = 2  # a worker silent this many rounds is left out of the next
LATE_ROUNDS = 2  # one of the round with no live result in this many keeps one piece
RELEASED = -2  # ranges of coded blocks: the owner of a piece another stood in for


@dataclass(frozen=True)
class PieceTable:
    """A pieced code's table: every piece's (block, rows), the blocks each worker holds and,
    for ranges of coded blocks, the grid and whether another block's range may stand in."""

    pieces: tuple[Piece, ...]
    holds: tuple[frozenset[int], ...]
    ranges: tuple[tuple[int, int], ...] | None = None
    stand_ins: bool = False
    value_size: int | None = None  # a piece's value's length, where it is not the job's

    @classmethod
    def of(cls, code: Code) -> PieceTable | None:
        """``code``'s table, or None if it is not cut into pieces."""
        params = code.params
        if "pieces" not in params:
            return None
        return cls(tuple(params["pieces"]), tuple(params["holds"]), params.get("ranges"),
                   bool(params.get("stand_ins", False)), params.get("value_size"))


class Give(NamedTuple):
    """``worker``'s list is now ``tasks``: an ITERATE if ``fresh`` (it has none of this round),
    else an ASSIGN."""

    worker: int
    tasks: tuple[int, ...]
    fresh: bool = False


class PieceWork:
    """Partial work's decisions for a code cut into pieces, round after round."""

    def __init__(self, code: Code, table: PieceTable) -> None:
        self.code, self.table = code, table
        self.rounds = 0  # rounds opened
        self.heard: dict[int, int] = {}  # worker -> the round it last sent in
        self.last_sent: dict[int, int] = {}  # worker -> the last round sent to it
        self.useful: dict[int, int] = {}  # worker -> the last round it sent a live result in
        self.late: frozenset[int] = frozenset()  # kept to one piece this round
        self.fresh: set[int] = set()  # the workers that sent a live result in this round

    def holding(self, workers: set[int]) -> set[int]:
        """The blocks (partitions, or coded tasks) ``workers`` hold."""
        holds = self.table.holds
        return set().union(*(holds[w] for w in workers))

    def could_finish(self, rnd: Round, live: set[int]) -> bool:
        """A piece can be handed to any living holder of its block."""
        return rnd.decoder.could_finish(self.holding(live))

    def quiet(self, live: set[int]) -> frozenset[int]:
        """A new round is counted; the workers that sent nothing in the last QUIET_ROUNDS
        rounds are left out of it.
        A straggler far behind reads every message sent to it before it gets to the newest
        (and to STOP): each round skipped is a few messages fewer it must get through, and its
        share goes to the others from the start. It is back in the round after its next
        result, however stale, and is sent one round in QUIET_ROUNDS + 1 in any case (a worker
        purged before it sent anything has nothing stale to send). Never a worker without whom
        the round's blocks could not decode."""
        self.rounds += 1
        quiet = {w for w in live if self.rounds - self.heard.setdefault(w, self.rounds)
                 > QUIET_ROUNDS and self.rounds - self.last_sent.get(w, 0) <= QUIET_ROUNDS}
        for w in sorted(quiet):
            if not self.code.decoder().could_finish(self.holding(live - quiet)):
                quiet.discard(w)
        return frozenset(quiet)

    def open(self, rnd: Round, schedule: Sequence[Sequence[int]], quiet: frozenset[int],
             live: set[int]) -> None:
        """A new round: its workers' lists and the owner of every piece; the shares of the
        workers left out go at once to the round's workers, each piece (or a stand-in for it)
        to the end of the shortest list that can take it, so nobody waits to be idle for them.
        A piece nobody of the round can take is left to the hand-over."""
        self.fresh = set()
        rnd.lists = {w: list(schedule[w]) for w in rnd.outstanding}
        rnd.reported = dict.fromkeys(rnd.outstanding, 0)
        rnd.share = {t: w for w in range(self.code.n_workers) for t in schedule[w]}
        rnd.owner = {t: w if w in rnd.outstanding else -1  # -1: nobody's (quiet, dead)
                     for t, w in rnd.share.items()}
        rnd.sent = set(rnd.outstanding)
        for w in rnd.sent:
            self.last_sent[w] = self.rounds
        late = self.late = frozenset(
            w for w in rnd.lists if len(rnd.lists[w]) > 1
            and self.rounds - self.useful.setdefault(w, self.rounds) > LATE_ROUNDS)
        rest: list[int] = []
        for w in sorted(late):  # keeps its first piece: the rest is dealt to the others
            rest += rnd.lists[w][1:]
            rnd.outstanding[w].difference_update(rnd.lists[w][1:])
            del rnd.lists[w][1:]
        for t in [t for w in sorted(quiet) for t in schedule[w]] + rest:
            for w in sorted(rnd.lists, key=lambda w: (w in late, len(rnd.lists[w]), w)):
                pair = self._stand_ins(rnd, [t], w, live)
                if pair:
                    q = pair[0][1]
                    rnd.lists[w].append(q)
                    rnd.outstanding[w].add(q)
                    rnd.owner[q], rnd.owner[t] = w, w if t == q else RELEASED
                    break

    def lagging(self, workers: set[int]) -> set[int]:
        """Those of ``workers`` that sent no live result in the last round opened."""
        return workers - self.fresh

    def heard_from(self, worker: int, live: bool) -> None:
        """A result from ``worker`` (``live``: of the open round)."""
        self.heard[worker] = self.rounds
        if live:
            self.useful[worker] = self.rounds
            self.fresh.add(worker)

    def on_result(self, rnd: Round, worker: int, tasks: list[int],
                  live: set[int]) -> tuple[list[Give], bool]:
        """``worker`` reported ``tasks`` of the open round (not decoded yet): what it and the
        others are given now, and whether a re-code is needed (every piece owed is in and the
        living's blocks cannot decode the rest)."""
        at, done = rnd.lists.get(worker, []), set(tasks)
        reported = rnd.reported.get(worker, 0)
        for i in range(len(at) - 1, reported - 1, -1):  # the furthest of them in its list
            if at[i] in done:
                reported = i + 1
                break
        rnd.reported[worker] = reported
        rnd.told.discard(worker)
        gives = self._spare(rnd, worker, tasks, live) + self.hand_over(rnd, [worker], live)
        if (not gives and self.table.ranges is not None
                and not any(self._owed(rnd, w) for w in rnd.sent & live)):
            if not self.could_finish(rnd, live):
                return [], True
            gives = self._cover(rnd, live)
        return gives, False

    def _owed(self, rnd: Round, worker: int) -> list[int]:
        """The pieces ``worker`` owns, has not reported and nobody has sent yet, in its order."""
        owner = rnd.owner
        return rnd.decoder.needed([t for t in rnd.lists.get(worker, [])[
            rnd.reported.get(worker, 0):] if owner.get(t) == worker])

    def _spare(self, rnd: Round, worker: int, tasks: list[int], live: set[int]) -> list[Give]:
        """``worker`` sent pieces that another now owns (it computed them before it read that
        they were taken): each such owner, working down from the far end, is told its list
        without them, so it does not compute them again; one that is left with nothing takes
        over something else. Not one told a list it has not read yet."""
        owners = {rnd.owner.get(t, -1) for t in tasks} & live - rnd.told - {worker}
        gives: list[Give] = []
        for o in sorted(owners):
            pending = rnd.lists.get(o, [])[rnd.reported.get(o, 0):]
            left = self._owed(rnd, o)
            if len(left) != len(pending):
                gives += self._retell(rnd, o, left, live)
        return gives

    def _retell(self, rnd: Round, worker: int, left: list[int], live: set[int],
                robber: int = -1) -> list[Give]:
        """``worker``'s list is now ``left`` (what it still owns, in its order). Left with
        nothing, it is idle: it takes something else over (not back from ``robber``, who has
        just taken its last), if there is any, and that one message tells it both; else it is
        told its list is empty."""
        rnd.lists[worker], rnd.reported[worker] = left, 0
        given = [] if left else self.hand_over(rnd, [worker], live, robber)
        if any(g.worker == worker for g in given):
            return given
        return [Give(worker, tuple(left)), *given]

    def _stand_ins(self, rnd: Round, wanted: list[int], thief: int,
                   live: set[int]) -> list[tuple[int, int]]:
        """(piece, what ``thief`` computes in its place) for those of ``wanted`` it can cover:
        the piece itself if it holds its block; under ranges of coded blocks (an MDS code
        decodes a range from any tasks that are enough), its own block's piece of the same
        range, if nobody has that one yet, unless the code is a repetition (every block needed:
        the piece replaced would be left to nobody); one stand-in a piece."""
        table = self.table
        pieces, mine = table.pieces, table.holds[thief]
        m = len(table.ranges) if table.stand_ins and table.ranges is not None else 0
        out: list[tuple[int, int]] = []
        chosen: set[int] = set()
        for t in wanted:
            if pieces[t].key in mine:
                out.append((t, t))
                continue
            for key in sorted(mine) if m else ():
                q = key * m + t % m
                if q not in chosen and rnd.decoder.needs(q) and rnd.owner.get(q) not in live:
                    out.append((t, q))
                    chosen.add(q)
                    break
        return out

    def hand_over(self, rnd: Round, idle: list[int], live: set[int],
                  robber: int = -1) -> list[Give]:
        """Each of ``idle`` that owes nothing more takes over the far half of the largest share
        still owed among the blocks it holds (all of a dead worker's), so a slow holder and its
        helper meet in the middle instead of repeating each other. The half is rounded up: the
        last piece a slow holder owes (it may be computing it at a twentieth of the speed) goes
        to the idle one too. The holder is told its shortened list, so it does not go on into
        pieces now another's, but once until it reports again: a straggler that has not read
        the last notice would only have more to read before its next STOP or ITERATE, and what
        it computes past its share is dropped as a duplicate. A holder robbed of its last piece
        is idle too, and takes over in turn (never back from ``robber``)."""
        gives: list[Give] = []
        needs = rnd.decoder.needs
        for thief in idle:
            if thief not in live or self._owed(rnd, thief):
                continue
            gone = set(rnd.owner.values()) - live - {RELEASED}  # owners computing nothing
            unowned = sorted(t for t, w in rnd.owner.items()  # a share nobody computes
                             if w in gone and needs(t)) if gone else []
            covered = self._stand_ins(rnd, unowned, thief, live)
            if thief not in rnd.sent:  # quiet (or no share): only what no worker of the round
                others = rnd.sent & live  # can take
                covered = [(t, q) for t, q in covered
                           if not any(self._stand_ins(rnd, [t], o, live) for o in others)]
            pairs, victim = covered, -1
            if not pairs and thief in rnd.sent:
                for other in sorted(live - {thief, robber}):
                    owed = self._stand_ins(rnd, self._owed(rnd, other), thief, live)
                    if len(owed) > len(pairs):
                        pairs, victim = owed, other
                pairs = pairs[len(pairs) // 2:][::-1]  # the far half, far end first
            if not pairs:
                continue
            for t, q in pairs:  # a piece stood in for is nobody's, free to stand in itself
                rnd.owner[t] = thief if t == q else RELEASED
            gives.append(self._give(rnd, thief, [q for _, q in pairs]))
            if victim >= 0:
                left = self._owed(rnd, victim)  # what is still its own, in its order
                if victim in rnd.told:  # not told again until it reports
                    rnd.lists[victim], rnd.reported[victim] = left, 0
                else:
                    rnd.told.add(victim)
                    gives += self._retell(rnd, victim, left, live, robber=thief)
        return gives

    def _give(self, rnd: Round, worker: int, taken: list[int]) -> Give:
        """``taken`` becomes ``worker``'s list (and its pieces)."""
        for t in taken:
            rnd.owner[t] = worker
        rnd.lists[worker], rnd.reported[worker] = list(taken), 0
        rnd.outstanding.setdefault(worker, set()).update(taken)
        if worker in rnd.sent:
            return Give(worker, tuple(taken))
        rnd.sent.add(worker)  # an ASSIGN is for a round under way: it has not got this one
        self.last_sent[worker] = self.rounds
        return Give(worker, tuple(taken), fresh=True)

    def _cover(self, rnd: Round, live: set[int]) -> list[Give]:
        """Ranges of coded blocks, every piece owed is in and a range is still not decoded (a
        code that is not MDS, whose shares or stand-ins were not enough; or deaths): each
        worker of the round computes every piece of its blocks still needed that nobody has."""
        holds, pieces = self.table.holds, self.table.pieces
        gives: list[Give] = []
        for w in sorted(rnd.sent & live):
            taken = [t for t in range(self.code.n_tasks) if pieces[t].key in holds[w]
                     and rnd.decoder.needs(t) and rnd.owner.get(t) not in live]
            if taken:
                gives.append(self._give(rnd, w, taken))
        return gives
