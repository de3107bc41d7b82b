"""Runs of pieces (no MPI): a worker computes consecutive pieces of its own share of one
partition as one sum (one kernel call, one value), up to about a chunk of rows, cut evenly;
pieces taken over from others, or of another partition, are computed alone; the set-up turns
runs on only where they keep the decode exact and the injected delays unchanged."""

from __future__ import annotations

from collections import deque

import numpy as np

from mpicoded.codes import make_code
from mpicoded.codes.partial import partial_code
from mpicoded.core.inbox import Inbox
from mpicoded.core.piecelist import PieceList, Runs, run_rows
from mpicoded.core.protocol import Tag, pack_assign, pack_iterate, unpack
from mpicoded.core.setup import SetupShared
from mpicoded.delays import DelayModel
from mpicoded.jobs import LogReg
from mpicoded.jobs.coded_results import CodedGradient

ROWS = [120, 120, 120, 120]


def table(part):
    return {t: (p.key, p.start, p.stop) for t, p in enumerate(part.params["pieces"])}


def frc_part(chunk=10):
    """frc s=1 on 4 workers cut into 10-row pieces: a holder's share of a partition is 6."""
    return partial_code(make_code("frc", 4, stragglers=1), ROWS, chunk)


def test_a_run_is_the_own_shares_adjoining_pieces_of_one_partition_up_to_its_rows():
    part = frc_part()
    runs = Runs(table(part), frozenset(part.schedule[0]), 30)
    own = list(part.schedule[0])
    assert runs.joining(own[0], deque(own[1:])) == 2  # 30 rows: the run's most
    first = part.params["pieces"][own[0]].key
    other = next(t for t in own if part.params["pieces"][t].key != first)
    assert runs.joining(own[0], deque([other])) == 0  # another partition
    theirs = next(t for t in part.schedule[1] if part.params["pieces"][t].key == first)
    assert runs.joining(own[0], deque([theirs, own[1]])) == 0  # not its own: computed alone
    assert runs.joining(own[0], deque(own[2:])) == 0  # rows that do not adjoin


def test_a_stretch_is_cut_into_runs_of_even_rows():
    part = frc_part()  # a share of a partition: six pieces of 10 rows
    own = list(part.schedule[0])
    assert Runs(table(part), frozenset(own), 40).joining(own[0], deque(own[1:])) == 2  # 30 + 30
    assert Runs(table(part), frozenset(own), 60).joining(own[0], deque(own[1:])) == 5  # one run
    assert Runs(table(part), frozenset(own), 25).joining(own[0], deque(own[1:])) == 1  # 20 x 3


def iterate(part, rank=1):
    buf = pack_iterate(0, 0, np.zeros(2), {rank: part.schedule[rank - 1]})
    return unpack(Tag.ITERATE, buf)


def test_a_piece_list_hands_out_runs_sends_them_whole_and_counts_pieces_dropped():
    part = frc_part()
    messages = [iterate(part)]
    inbox = Inbox(lambda: messages.pop(0) if messages else None, lambda _: None)
    plist = PieceList(1, flush_s=1e9, runs=Runs(table(part), frozenset(part.schedule[0]), 30))
    own = list(part.schedule[0])
    inbox.read()
    msg = inbox.next_iteration()
    assert msg is not None
    plist.begin(inbox, msg, 0.0)
    send, run = plist.next(inbox, lambda: False)
    assert send == [] and run == tuple(own[:3])
    assert plist.finished(run, 1.0) == []  # not the flush's time yet
    messages.append(unpack(Tag.ASSIGN, pack_assign(0, 0, own[3:5])))  # the rest taken away
    inbox.read()
    send, second = plist.next(inbox, lambda: False)
    assert send == [tuple(own[:3])] and second == tuple(own[3:5])
    assert plist.drop(cut=second) == ([], []) and plist.dropped == len(own) - 3


def test_without_runs_every_piece_is_its_own_run():
    part = frc_part()
    inbox = Inbox(lambda: None, lambda _: None)
    plist = PieceList(1, flush_s=0.0)
    plist.begin(inbox, iterate(part), 0.0)
    assert plist.next(inbox, lambda: False) == ([], (part.schedule[0][0],))


def shared(delay: DelayModel, chunk_rows=10, pieces=True, name="frc"):
    code = make_code(name, 4, stragglers=1)
    job = CodedGradient(LogReg(samples=480, features=3), code)
    cut = job.pieces(chunk_rows) if pieces else None
    return SetupShared(code, job, delay, cut, chunk_rows=chunk_rows,
                       run_rows=run_rows(chunk_rows, delay.sleeps)), code, cut


def test_the_set_up_runs_a_workers_own_share_where_nothing_is_injected():
    setup, code, cut = shared(DelayModel("none"))
    mine = setup.for_worker(2, 1, code.schedule[1])
    assert mine.runs is not None and mine.runs.own == frozenset(cut.schedule[1])
    assert mine.runs.rows == 15 and mine.runs.pieces == mine.pieces
    injected = shared(DelayModel("persistent", task_time=0.01))[0]  # a delay a piece
    assert injected.for_worker(2, 1, code.schedule[1]).runs is None
    whole = shared(DelayModel("none"), pieces=False)[0]
    assert whole.for_worker(2, 1, (1,)).runs is None
