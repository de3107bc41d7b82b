"""What a Session is told at the start (``Settings``) and what it needs of a job (``Workload``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ..balance.splitter import Splitter
from ..codes import Code


class Workload(Protocol):
    """What the Session needs of a job (``jobs.Coded``; a ``Shape`` where there is no data):
    theta's start and step, its tasks' work, and the job under another code or cut in pieces."""

    free_loss: bool
    decoded_loss: float | None
    data_coded: bool

    def recoded(self, code: Code) -> Workload: ...

    def pieces(self, chunk_rows: int, fit: bool = False) -> Code: ...

    def default_chunk_rows(self) -> int: ...

    def task_cost(self) -> np.ndarray: ...

    def theta0(self) -> np.ndarray: ...

    def update(self, theta: np.ndarray, decoded: np.ndarray, missing: np.ndarray,
               step: int) -> np.ndarray: ...


@dataclass
class Settings:
    """What a session is told at the start: its code and job, and the run's options."""

    code: Code
    work: Workload
    pieces: Code | None = None  # partial work: ``code`` cut into pieces
    chunk_rows: int = 0
    fit_chunks: bool = False  # the chunks are the job's default: cut again after a re-code
    tolerance: int = 0
    purge: bool = True  # False: never purge (public peers' behaviour, kept for comparison)
    iterations: int = 1
    jobs: int = 1
    resume: tuple[int, int, np.ndarray] | None = None  # (job, iteration, theta)
    loss_every: int = 1
    checkpoint_every: int = 0
    iteration_timeout: float | None = None
    splitter: Splitter | None = None
    trace: bool = False
    adopt: tuple[dict[int, int], int, bool] | None = None  # after a failover: see ``_begin``
    # partial work: the rows of a run of a worker's own share at most (``Runs``; with fitted
    # chunks, of the chunks fitted: ``run_rows``); 0: pieces one at a time
    run_rows: int = 0
    # partial work: the run ends without the acknowledgement of a rank known slow (Linger);
    # not under ULFM (a released rank's exit is a failure to the others) nor a timeout
    linger: bool = False
    # the job's evaluation on held-out data every this many iterations and at a job's end (0:
    # at the end only); None: never (the job has none)
    eval_every: int | None = None
    # the workers keep their results' values and add up the decoded sum among themselves
    # (``reduction.py``): large results, a sum target
    reduce: bool = False
    # θ relayed by the workers (``relay.py``): a large θ
    relay: bool = False
    # the entries of a result's value: runs of pieces are longer where it is large
    # (``piecelist.run_rows``; a re-code cuts new ones)
    value_size: int = 0
    # each comm rank's node (rank 0's first), which the relay and reduce trees follow
    # (``trees.py``); empty: not known, a node each
    nodes: tuple[int, ...] = ()
