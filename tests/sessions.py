"""A Session fed by hand, for unit tests in the manner of Dask's worker-state tests: events in
through ``handle`` alone, whole instruction lists out. Code worker w is rank w + 1."""

from __future__ import annotations

from typing import Any

import numpy as np

from mpicoded.core import events as ev
from mpicoded.core.piecetable import PieceTable
from mpicoded.core.session import Session
from mpicoded.core.settings import Settings
from mpicoded.core.shape import Shape


class Driver:
    """A session on ``code`` (a code cut into pieces runs partial work), placed and started:
    ``open()`` lets job 0 arrive, which sends its first round."""

    def __init__(self, code: Any, work: Any = None, **settings: Any) -> None:
        pieced = PieceTable.of(code) is not None
        settings.setdefault("iterations", 100)
        settings.setdefault("loss_every", 0)
        self.session = Session(Settings(code, work or Shape(code),
                                        pieces=code if pieced else None, **settings))
        self.placed = self.handle(ev.Begin())
        self.started = self.handle(ev.Started(0.0))

    def handle(self, event: ev.Event) -> list[ev.Instruction]:
        return self.session.handle(event)

    def open(self, now: float = 0.0, job: int = 0) -> list[ev.Instruction]:
        """Job ``job`` arrives at ``now``: its first round goes out."""
        return self.handle(ev.JobArrived(job, now))

    def result(self, worker: int, tasks: Any, values: np.ndarray | None = None, now: float = 0.0,
               iteration: int | None = None, job: int | None = None,
               epoch: int | None = None) -> list[ev.Instruction]:
        """Results of ``tasks`` from code worker ``worker``, of the open round unless told."""
        rnd = self.session.round
        assert rnd is not None or iteration is not None
        return self.handle(ev.ResultArrived(
            worker + 1, rnd.job if job is None and rnd is not None else (job or 0),
            rnd.iteration if iteration is None and rnd is not None else int(iteration or 0),
            self.session.epoch if epoch is None else epoch, [int(t) for t in tasks], values,
            now))

    def lose(self, worker: int, now: float = 0.0) -> list[ev.Instruction]:
        return self.handle(ev.WorkerLost(worker + 1, now))


def of(out: list[ev.Instruction], kind: type) -> list[Any]:
    """The instructions of ``kind`` in ``out``."""
    return [i for i in out if isinstance(i, kind)]


def lists(out: list[ev.Instruction]) -> dict[int, tuple[int, ...]]:
    """Each worker's new list in ``out`` (ITERATEs and ASSIGNs), by code worker."""
    got: dict[int, tuple[int, ...]] = {}
    for i in out:
        if isinstance(i, ev.Iterate):
            got.update((rank - 1, tasks) for rank, tasks in i.lists)
        elif isinstance(i, ev.Assign):
            got[i.rank - 1] = i.tasks
    return got


class Decodes(Shape):
    """A job's shape that keeps every decoded result (``decoded``) and the missing partitions;
    theta does not move."""

    def __init__(self, code: Any, **kwargs: Any) -> None:
        super().__init__(code, **kwargs)
        self.decoded: list[tuple[np.ndarray, np.ndarray]] = []

    def update(self, theta: np.ndarray, decoded: np.ndarray, missing: np.ndarray,
               step: int) -> np.ndarray:
        self.decoded.append((decoded, missing))
        return theta


def opened(part: Any) -> tuple[Driver, list[ev.Instruction]]:
    """A session on ``part`` whose job keeps every decode, job 0 arrived: the session and what
    it sent (the first round)."""
    d = Driver(part, work=Decodes(part))
    return d, d.open()


def after_silence(part: Any, silent: Any, work: Any = None) -> Driver:
    """A session on ``part`` ten rounds in, where ``silent`` last sent in the first and the
    others in the tenth, and every worker was sent the tenth (not due for a retry)."""
    d = Driver(part, work=work)
    pw = d.session.piecework
    pw.rounds = 10
    pw.heard = {w: 0 if w in silent else 10 for w in range(part.n_workers)}
    pw.last_sent = dict.fromkeys(range(part.n_workers), 10)
    return d


def left_out(d: Driver, out: list[ev.Instruction]) -> set[int]:
    """The living workers the round ``out`` sent has no list for."""
    return d.session.live - set(lists(out))
