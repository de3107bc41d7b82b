"""θ relayed by the workers (``--relay on``), fed by hand: the order follows the last round
(those that finished first nearest rank 0, those behind or silent at the leaves), and the
ranks still silent are sent θ directly once the round is overdue or a relaying rank dies."""

from __future__ import annotations

from sessions import Driver, of

from mpicoded.codes import make_code
from mpicoded.core import events as ev
from mpicoded.core.tree_messages import relay_children


def relayed(code, **settings):
    d = Driver(code, relay=True, **settings)
    return d, d.open()


def test_the_first_round_goes_in_rank_order_and_the_next_by_how_the_last_went():
    """uncoded on 6: the first round has no history (rank order); in the second, the workers
    that finished the first earliest come first, the one still owing at the decode after them
    (it was behind), the one never heard from last; the ITERATE leaves rank 0 once for all."""
    code = make_code("gfrc", 6, stragglers=1)
    d, out = relayed(code)
    first = of(out, ev.Iterate)[0]
    assert first.relay == ((1, 0), (2, 0), (3, 1), (4, 1), (5, 2), (6, 2))
    assert relay_children(first.relay, 0) == (1, 2)
    assert of(out, ev.WakeAt)[0].at == 10.0  # no compute measured yet
    out = []
    for now, w in [(1.0, 4), (2.0, 2), (3.0, 0), (4.0, 3), (5.0, 1)]:
        out = d.result(w, list(code.schedule[w]), now=now) or out
    nxt = of(out, ev.Iterate)[0]
    ranks = [r for r, _ in nxt.relay]
    assert nxt.iteration == 1 and sorted(ranks) == list(range(1, 7))
    assert ranks[-1] == 6  # worker 5: silent in the last round
    assert ranks[:3] == [5, 3, 1]  # finished first, second, third


def test_a_round_overdue_sends_theta_directly_to_the_ranks_still_silent():
    code = make_code("uncoded", 6)
    d, out = relayed(code)
    d.result(0, [0], now=1.0)
    d.result(3, [3], now=2.0)
    assert of(d.handle(ev.Tick(9.0)), ev.Iterate) == []  # not due yet
    out = d.handle(ev.Tick(10.0))
    again = of(out, ev.Iterate)
    assert len(again) == 1 and again[0].relay == () and again[0].iteration == 0
    assert [r for r, _ in again[0].lists] == [2, 3, 5, 6]
    assert of(d.handle(ev.Tick(30.0)), ev.Iterate) == []  # once a round


def test_a_relaying_ranks_death_sends_theta_to_those_below_it_that_are_silent():
    """Rank 1 relays to ranks 3 and 4, rank 3 to 7 and 8: once rank 1 dies, those of 3, 4, 7
    and 8 that have sent nothing are sent θ directly."""
    code = make_code("gfrc", 8, stragglers=2)
    d, out = relayed(code)
    assert [r for r, _ in of(out, ev.Iterate)[0].relay] == list(range(1, 9))
    d.result(2, list(code.schedule[2]), now=1.0)  # rank 3 has it
    out = d.lose(0, now=2.0)
    again = of(out, ev.Iterate)
    assert len(again) == 1 and [r for r, _ in again[0].lists] == [4, 7, 8]


def test_ranks_on_other_nodes_get_theta_through_their_nodes_first_rank():
    """Three nodes of three ranks (rank 0's node: ranks 0, 3, 6): θ crosses each network link
    once, to the first rank of each other node, which hands it on within its node."""
    code = make_code("uncoded", 8)
    d, out = relayed(code, nodes=(0, 1, 2, 0, 1, 2, 0, 1, 2))
    relay = dict(of(out, ev.Iterate)[0].relay)
    assert relay == {1: 0, 2: 0, 3: 0, 6: 0, 4: 1, 7: 1, 5: 2, 8: 2}
