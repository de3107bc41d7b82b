"""The trees the workers carry bytes along (pure): θ down (the relay), sums up (the reduce).

Ranks are ordered, the first nearest rank 0, and each rank has ``FAN`` children level by level.
Where several ranks share a node, a tree of ranks alone would send a node's bytes over its
network link once for each of its ranks whose parent is elsewhere; so the first rank of each
node (its leader) takes the bytes across the network and hands them on within its node, as
hierarchical broadcasts do: the other nodes' leaders in a tree below rank 0, the ranks of rank
0's node in a tree below rank 0 too, the rest of each node below its leader. With one rank a
node, or one node, it is the plain tree.
"""

from __future__ import annotations

from collections.abc import Sequence

FAN = 2  # the children a rank has in either tree (rank 0: this many a kind)

Tree = dict[int, tuple[int, tuple[int, ...]]]  # rank -> (its parent, 0: rank 0; its children)


def tree(order: Sequence[int], node: Sequence[int] = ()) -> Tree:
    """Each rank of ``order``: its parent and its children. ``node``: each comm rank's node
    (rank 0's first); a rank past its end: a node of its own."""
    groups: dict[object, list[int]] = {}
    for rank in order:
        groups.setdefault(("node", node[rank]) if rank < len(node) else rank, []).append(rank)
    home = ("node", node[0]) if node else None
    parents: dict[int, int] = {}
    _attach(parents, 0, [g[0] for key, g in groups.items() if key != home])
    _attach(parents, 0, groups.get(home, []) if home is not None else [])
    for key, members in groups.items():
        if key != home:
            _attach(parents, members[0], members[1:])
    children: dict[int, list[int]] = {}
    for rank, parent in parents.items():
        children.setdefault(parent, []).append(rank)
    return {r: (parents[r], tuple(children.get(r, ()))) for r in order}


def _attach(parents: dict[int, int], root: int, members: list[int]) -> None:
    """``members`` in a tree below ``root``, ``FAN`` children a rank, level by level."""
    for p, rank in enumerate(members):
        parents[rank] = root if p < FAN else members[p // FAN - 1]
