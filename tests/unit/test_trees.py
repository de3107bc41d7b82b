"""The trees the workers carry bytes along: the first ranks nearest rank 0, two children a
rank; where ranks share nodes, each node's bytes cross its link once, through its first rank."""

from __future__ import annotations

from mpicoded.core.trees import tree


def crossings(shape, node):
    """How many edges of ``shape`` join ranks on different nodes, a node's link at a time."""
    out: dict[int, int] = {}
    for rank, (parent, _) in shape.items():
        if node[rank] != node[parent]:
            for n in (node[rank], node[parent]):
                out[n] = out.get(n, 0) + 1
    return out


def test_a_node_each_or_one_node_is_the_plain_tree():
    plain = {5: (0, (7, 1)), 2: (0, (3, 6)), 7: (5, ()), 1: (5, ()), 3: (2, ()), 6: (2, ())}
    assert tree([5, 2, 7, 1, 3, 6]) == plain
    assert tree([5, 2, 7, 1, 3, 6], (4,) * 8) == plain
    assert tree([5, 2, 7, 1, 3, 6], tuple(range(8))) == plain
    assert tree([4]) == {4: (0, ())}


def test_each_node_is_reached_once_through_its_first_rank():
    """20 workers, ranks dealt round three nodes as ``--map-by node`` does: every other node's
    link carries θ once, rank 0's node's link twice (once to each other node)."""
    node = tuple(r % 3 for r in range(21))
    order = [7, 1, 14, 2, 20, 9, 3, 4, 5, 6, 8, 10, 11, 12, 13, 15, 16, 17, 18, 19]
    shape = tree(order, node)
    assert sorted(shape) == sorted(order)
    assert [r for r, (p, _) in shape.items() if p == 0] == [7, 14, 9, 3]
    assert crossings(shape, node) == {0: 2, 1: 1, 2: 1}
    for rank, (parent, children) in shape.items():
        assert all(shape[c][0] == rank for c in children) and len(children) <= 2
        if parent != 0:
            assert rank in shape[parent][1]
    plain = tree(order)
    assert crossings(plain, node)[0] > 6  # what a tree of ranks alone costs rank 0's link
