"""Partial work (pure): which worker computes which piece of the open round, and when a piece
owed by a slow holder is handed to another.

The code is one cut into pieces (``partial_code``: row ranges of partitions; ``range_code``: row
ranges of coded blocks), its table read once (``piecetable.py``). Each worker starts on its
primary share; one done with it takes over the far half of what it can take (blocks it holds)
of the share that would be done last, at once from a holder twice as slow by its pace
(``pace.py``), else once one is overdue, so a slow holder and its helper meet in the middle.
A worker silent for QUIET_ROUNDS rounds is left out of the next. Workers are code indices; a
``Give`` is an ASSIGN, or the round's ITERATE for a worker that has none yet.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import islice
from typing import NamedTuple

from ..codes import Code
from .pace import Paces
from .piecetable import PieceTable
from .round import Round

QUIET_ROUNDS = 2  # a worker silent this many rounds is left out of the next
LATE_ROUNDS = 2  # one of the round with no live result in this many keeps one piece
RELEASED = -2  # ranges of coded blocks: the owner of a piece another stood in for
AHEAD = 4  # a helper owing this many pieces is not far into them: its far half is not under way


class Give(NamedTuple):
    """``worker``'s list is now ``tasks``: an ITERATE if ``fresh``, else an ASSIGN."""

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
        self.paces = Paces([p.stop - p.start for p in table.pieces])
        self.first: dict[int, int] = {}  # worker -> the first piece of its list this round
        self.cut_short: set[int] = set()  # robbed of its last piece since its last live result

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
        self.cut_short = set()
        self.paces.open(rnd.started)
        rnd.lists = {w: list(schedule[w]) for w in rnd.outstanding}
        self.first = {w: tasks[0] for w, tasks in rnd.lists.items() if tasks}
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

    def decoded(self, rnd: Round, now: float) -> None:
        """The round decoded at ``now``: each worker of it that had sent nothing of it had not
        computed its first piece yet, one that still owned pieces of its list its next one
        (``Paces.behind``); not one that was idle (its list's rest taken over: it waited)."""
        paces = self.paces
        rows = paces.rows
        for w, first in self.first.items():
            tasks, at = rnd.lists.get(w, []), rnd.reported.get(w, 0)
            left = [t for t in tasks[at:] if rnd.owner.get(t) == w]
            if w not in paces.done:
                paces.behind(w, rows[first], now)
            elif left:
                paces.behind(w, rows[left[0]], now)

    def forget(self, lost: list[int]) -> None:
        """``lost`` workers are gone: no pace of theirs counts any more."""
        for w in lost:
            self.first.pop(w, None)
            self.paces.forget(w)

    def lagging(self, workers: set[int]) -> set[int]:
        """Those of ``workers`` that sent no live result in the last round opened."""
        return workers - self.fresh

    def heard_from(self, worker: int, live: bool, tasks: list[int], now: float) -> None:
        """A result of ``tasks`` from ``worker`` at ``now`` (``live``: of the open round)."""
        self.heard[worker] = self.rounds
        if live:
            self.cut_short.discard(worker)
            self.useful[worker] = self.rounds
            self.fresh.add(worker)
            self.paces.reported(worker, tasks, now)

    def on_result(self, rnd: Round, worker: int, tasks: list[int], live: set[int],
                  now: float) -> tuple[list[Give], bool]:
        """``worker`` reported ``tasks`` of the open round (not decoded yet) at ``now``: what
        it and the others are given now (``hand_over``), and whether a re-code is needed
        (every piece owed is in and the living's blocks cannot decode the rest)."""
        at, done = rnd.lists.get(worker, []), set(tasks)
        reported, needs, owner = rnd.reported.get(worker, 0), rnd.decoder.needs, rnd.owner
        while reported < len(at) and (at[reported] in done or not needs(at[reported])
                                      or owner.get(at[reported]) != worker):
            reported += 1  # its list's head is done (a piece of a list it had before, which
        rnd.reported[worker] = reported  # is in this one too, may come first)
        rnd.told.discard(worker)
        gives = self._spare(rnd, worker, tasks, live) + self.hand_over(rnd, live, now, worker)
        if (not gives and self.table.ranges is not None
                and not any(self._owes(rnd, w) for w in rnd.sent & live)):
            if not self.could_finish(rnd, live):
                return [], True
            gives = self._cover(rnd, live, now)
        return merged(gives), False

    def _owes(self, rnd: Round, worker: int) -> bool:
        """Whether ``_owed`` has anything (found sooner: mostly its list's next piece)."""
        owner, needs = rnd.owner, rnd.decoder.needs
        return any(owner.get(t) == worker and needs(t) for t in
                   islice(rnd.lists.get(worker, ()), rnd.reported.get(worker, 0), None))

    def _owed(self, rnd: Round, worker: int) -> list[int]:
        """The pieces ``worker`` owns, has not reported and nobody has sent yet, in its order."""
        owner = rnd.owner
        return rnd.decoder.needed([t for t in rnd.lists.get(worker, [])[
            rnd.reported.get(worker, 0):] if owner.get(t) == worker])

    def _spare(self, rnd: Round, worker: int, tasks: list[int], live: set[int]) -> list[Give]:
        """``worker`` sent pieces that another now owns (it computed them before it read that
        they were taken): each such owner, working down from the far end, is told its list
        without them, so it does not compute them again (one left with nothing is idle, and
        ``hand_over`` looks at it). Not one told a list it has not read yet."""
        owners = {rnd.owner.get(t, -1) for t in tasks} & live - rnd.told - {worker}
        gives: list[Give] = []
        for o in sorted(owners):
            pending = rnd.lists.get(o, [])[rnd.reported.get(o, 0):]
            left = self._owed(rnd, o)
            if len(left) != len(pending):
                rnd.lists[o], rnd.reported[o] = left, 0
                gives.append(Give(o, tuple(left)))
        return gives

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

    def hand_over(self, rnd: Round, live: set[int], now: float, first: int = -1) -> list[Give]:
        """Each idle worker (``first`` first) takes over what is left of a share nobody
        computes (a dead worker's) among the blocks it holds, else the far half, rounded up,
        of the share done last of the holders it may take from (``_choose``), so a slow
        holder and its helper meet in the middle; one that may take from nobody waits, and
        ``rnd.wake`` is when the first holder it could help will be overdue. The holder is
        told its shortened list, but once until it reports again: a straggler that has not
        read the last notice would only have more to read before its next STOP or ITERATE,
        and what it computes past its share is dropped as a duplicate. A holder robbed of its
        last piece is idle, and looks in turn. Every idle worker is looked at each time, so
        none is left waiting on a holder with no wake (``unwatched``)."""
        queue = sorted((w for w in live if not self._owes(rnd, w)), key=lambda w: w != first)
        rnd.wake = None
        if not queue:
            return []
        owed = {w: self._owed(rnd, w) for w in live}
        gives: list[Give] = []
        waits: dict[int, float | None] = {}  # idle, waiting: when to look again
        took: set[int] = set()  # each takes over once a pass, so that a pass ends
        unowned = self._unowned(rnd, live)
        while queue:
            thief = queue.pop(0)
            if thief in took:  # robbed after it took over: it looks again at the next Tick
                waits[thief] = now
                continue
            pairs, victim, wake = self._choose(rnd, thief, owed, unowned, live, now)
            if not pairs:
                waits[thief] = wake
                continue
            queue += sorted(waits)  # a new holder: those waiting look at it too
            waits.clear()
            took.add(thief)
            for t, q in pairs:  # a piece stood in for is nobody's, free to stand in itself
                rnd.owner[t] = thief if t == q else RELEASED
            rnd.given[thief] = now
            self.paces.resumed(thief, now, waited=thief not in self.cut_short)
            gives.append(self._give(rnd, thief, [q for _, q in pairs]))
            owed[thief] = self._owed(rnd, thief)
            if victim < 0:
                unowned = self._unowned(rnd, live)
                continue
            left = owed[victim] = self._owed(rnd, victim)  # what is still its own, in order
            rnd.lists[victim], rnd.reported[victim] = left, 0
            if victim not in rnd.told:  # not told again until it reports
                rnd.told.add(victim)
                gives.append(Give(victim, tuple(left)))
            if not left:  # it may still be computing the piece taken
                rnd.robbers[victim] = thief
                self.cut_short.add(victim)
                queue.append(victim)
        rnd.wake = min((w for w in waits.values() if w is not None), default=None)
        return merged(gives)

    def _unowned(self, rnd: Round, live: set[int]) -> list[int]:
        """The pieces still needed of shares nobody computes (their owners are dead)."""
        needs = rnd.decoder.needs
        gone = set(rnd.owner.values()) - live - {RELEASED}
        return sorted(t for t, w in rnd.owner.items() if w in gone and needs(t)) if gone else []

    def _choose(self, rnd: Round, thief: int, owed: dict[int, list[int]], unowned: list[int],
                live: set[int], now: float) -> tuple[list[tuple[int, int]], int, float | None]:
        """What idle ``thief`` takes (piece and stand-in, far end first), from whom (-1: of
        ``unowned``; of holders due, the one done last), and, if nothing, when to look again."""
        covered = self._stand_ins(rnd, unowned, thief, live)
        if thief not in rnd.sent:  # quiet (or no share): only what no worker of the round
            others = rnd.sent & live  # can take
            return [(t, q) for t, q in covered
                    if not any(self._stand_ins(rnd, [t], o, live) for o in others)], -1, None
        if covered:
            return covered, -1, None
        pairs: list[tuple[int, int]] = []
        victim, wake, last = -1, None, (-math.inf, 0)
        for other in sorted(live - {thief}):
            mine = self._stand_ins(rnd, owed[other], thief, live) if owed[other] else []
            if not mine:
                continue
            due = self._due(rnd, thief, other, owed[other], now)
            if due > now:
                wake = due if wake is None else min(wake, due)
            elif (end := (self.paces.finish(other, owed[other]) or math.inf, len(mine))) > last:
                pairs, victim, last = mine, other, end
        return pairs[len(pairs) // 2:][::-1], victim, wake

    def _due(self, rnd: Round, thief: int, holder: int, owed: list[int], now: float) -> float:
        """When idle ``thief`` may take over from ``holder`` (``now`` or before: at once). At
        once by a worker twice as fast by their paces, whatever the holder owes (one steadily
        three times slow is never overdue by its own pace, and a capped one's last piece
        waits out its quota); by one done with the far half sooner than the holder with all,
        from a holder that took pieces over and owes AHEAD (a straggler's helpers are helped
        in turn); from one of no known pace (the first round) that took none, by a worker of
        known pace, not slow; never by the worker the holder robbed of its last piece. Any
        other once overdue (``Paces.due``; with no pace known, one that took pieces over has
        as long again as the round had taken by then). Pieces pass at once only to a worker
        twice as fast, from a helper left with half of AHEAD or more (each such take uses up an
        idle worker) or from one that took none, so they never go round. A thief robbed of its
        last piece and silent since (most often overdue itself: likely still computing that
        piece) takes over only from a holder as late again, unless twice as fast (or when no
        pace is known at all)."""
        paces = self.paces
        given, short = rnd.given.get(holder), thief in self.cut_short
        if rnd.robbers.get(thief) != holder and (
                paces.faster(thief, holder) or not short and (
                    (given is not None and len(owed) >= AHEAD
                     and paces.sooner(thief, holder, owed, now))
                    or (paces.pace(holder) is None and given is None
                        and paces.pace(thief) is not None and not paces.slow(thief)))):
            return now
        due = paces.due(holder, owed)
        if due is None:
            if given is None:
                return now
            due = given + max(given - rnd.started, 1e-3)
        return 2 * due - rnd.started if short else due

    def unwatched(self, rnd: Round, live: set[int], now: float) -> list[tuple[int, int]]:
        """(idle worker, holder) for each holder of pieces an idle worker could take over that
        nothing will make it look at again: due before ``rnd.wake`` (or with none), where
        that is later than ``now``. Empty after every ``hand_over``; the model checks it
        after every event."""
        owed = {w: self._owed(rnd, w) for w in live}
        out = []
        for thief in sorted(w for w in rnd.sent & live if not owed[w]):
            for other in sorted(live - {thief}):
                if owed[other] and self._stand_ins(rnd, owed[other], thief, live):
                    due = self._due(rnd, thief, other, owed[other], now)
                    if rnd.wake is None or rnd.wake > max(due, now):
                        out.append((thief, other))
        return out

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

    def _cover(self, rnd: Round, live: set[int], now: float) -> list[Give]:
        """Ranges of coded blocks, every piece owed is in and a range is still not decoded (a
        code that is not MDS, whose shares or stand-ins were not enough; or deaths): each
        worker of the round computes every piece of its blocks still needed that nobody has."""
        holds, pieces = self.table.holds, self.table.pieces
        gives: list[Give] = []
        for w in sorted(rnd.sent & live):
            taken = [t for t in range(self.code.n_tasks) if pieces[t].key in holds[w]
                     and rnd.decoder.needs(t) and rnd.owner.get(t) not in live]
            if taken:
                rnd.given[w] = now
                gives.append(self._give(rnd, w, taken))
        return gives


def merged(gives: list[Give]) -> list[Give]:
    """One Give a worker, where its list changed twice in one step: the last list, in the
    place of the first, an ITERATE if either was."""
    out: dict[int, Give] = {}
    for g in gives:
        before = out.get(g.worker)
        out[g.worker] = g if before is None else g._replace(fresh=before.fresh or g.fresh)
    return list(out.values())
