"""The Session's sums formed by the workers (pure): where results are large, the workers keep
their values and rank 0 keeps every decision. Once the round decodes from ids alone, the
Session names each value's coefficient (``Decoder.combination``) and the tree the workers add
them up along (``trees.py``: those that finished first nearest rank 0, a node's ranks below
its first), so rank 0 takes in a few sums, not every result. A death re-plans the sum from
the living's values (a re-code if they no longer decode); a sum overdue is asked again of
every contributor directly (a star: rank 0 then sees who is late), and one still missing
after that is left out where the others decode without it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from .events import Instruction, Log, PartArrived, Purge, Reduce, WakeAt
from .round import Reducing, Round
from .trees import tree

if TYPE_CHECKING:
    from .session import Session

OVERDUE = 4.0  # a sum is asked again after this many times the round's compute time,
OVERDUE_MIN_S = 1.0  # and not sooner than this


class Reduction:
    """The Session's part for rounds whose sum the workers form (``Settings.reduce``)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def begin(self, rnd: Round, record: object, missing: np.ndarray,
              now: float) -> list[Instruction]:
        """``rnd`` decoded from ids alone: the first plan of its sum."""
        from .result import IterationRecord

        assert isinstance(record, IterationRecord)
        rnd.reducing = Reducing(record, missing)
        return self.plan(rnd, now)

    def plan(self, rnd: Round, now: float, star: bool = False) -> list[Instruction]:
        """A new attempt: each contributor's terms, and the tree (or the star) they go by.
        Contributors of the last attempt left out of this one are told to drop it."""
        s, red = self.session, rnd.reducing
        assert red is not None
        terms: dict[int, list[tuple[int, float]]] = {}
        for key, coef in rnd.decoder.combination().items():
            worker, sent = rnd.holders[key]
            terms.setdefault(worker, []).append((sent, coef))
        order = sorted(terms, key=lambda w: (max(rnd.arrivals.get(w, [0.0])), w))
        ranks = [s.ranks.rank(w) for w in order]
        shape = ({r: (0, ()) for r in ranks} if star else tree(ranks, s.settings.nodes))
        left_out = sorted(set(red.plan) - set(ranks))
        red.attempt += 1
        red.plan = {s.ranks.rank(w): tuple(terms[w]) for w in order}
        red.waiting = {r for r, (parent, _) in shape.items() if parent == 0}
        red.total, red.star, red.since = None, star, now
        out: list[Instruction] = [Purge(r, rnd.job, rnd.iteration, rnd.epoch) for r in left_out]
        out += [Reduce(r, rnd.job, rnd.iteration, rnd.epoch, red.attempt, *shape[r],
                       red.plan[r]) for r in ranks]
        return [*out, WakeAt(self.deadline(rnd))]

    def deadline(self, rnd: Round) -> float:
        """When the attempt under way is overdue: ``OVERDUE`` times the round's compute."""
        red = rnd.reducing
        assert red is not None and rnd.decoded_at is not None
        return red.since + max(OVERDUE * rnd.decoded_at, OVERDUE_MIN_S)

    def part(self, event: PartArrived) -> list[Instruction]:
        """A PART for rank 0: added in; once every one is in, the round's sum is complete and
        the stream goes on. Parts of another round or attempt are dropped."""
        s = self.session
        rnd = s.round
        red = None if rnd is None else rnd.reducing
        if (rnd is None or red is None or event.attempt != red.attempt or event.rank not in
                red.waiting or (event.job, event.iteration, event.epoch) != rnd.key):
            return []
        red.waiting.discard(event.rank)
        if event.value is not None:
            if red.total is None:
                red.total = np.array(event.value, dtype=np.float64)
            else:
                red.total += event.value
        if red.waiting:
            return []
        rnd.reducing = None
        record = replace(red.record, wall_s=event.now - rnd.started)
        return s.stream.decoded(record, red.total, red.missing, event.now)

    def lost(self, rnd: Round, now: float) -> list[Instruction]:
        """Contributors died: plan the sum from the living's values, or re-code."""
        s = self.session
        if not rnd.redecode(s.decoding, s.tolerance, s.live):
            return s.losses.recode("a worker died while the results were summed", now)
        return self.plan(rnd, now, star=True)

    def tick(self, rnd: Round, now: float) -> list[Instruction]:
        """The attempt under way is overdue: asked again of every contributor directly; a
        star overdue leaves out those still missing, where the others decode without them,
        else waits for them (past --iteration-timeout they are lost)."""
        s, red = self.session, rnd.reducing
        assert red is not None
        if now < self.deadline(rnd):
            return [WakeAt(self.deadline(rnd))]
        if not red.star:
            return self.plan(rnd, now, star=True)
        late = sorted(red.waiting)
        workers = {w for w in (s.ranks.index(r) for r in late) if w is not None}
        if rnd.redecode(s.decoding, s.tolerance, s.live - workers):
            return self.plan(rnd, now, star=True)
        rnd.redecode(s.decoding, s.tolerance, s.live)  # they are needed
        timeout = s.settings.iteration_timeout
        if timeout is None:
            return []  # their PARTs end the wait
        if now < red.since + timeout:
            return [WakeAt(red.since + timeout)]
        s.ending.timed_out.update(late)
        return [Log("warning", f"worker rank(s) {late} sent no sum in {timeout:g} s "
                               "(--iteration-timeout)"), *s.losses.lose(late, now)]
