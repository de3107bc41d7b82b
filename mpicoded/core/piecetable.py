"""A code cut into pieces, read once (pure): every piece's block and rows, the blocks each
worker holds, and for ranges of coded blocks the grid; partial work decides from it."""

from __future__ import annotations

from dataclasses import dataclass

from ..codes import Code
from ..codes.partial import Piece


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
