"""mpicoded's log: library code logs to ``logging.getLogger("mpicoded")``, each record carrying
the MPI rank it comes from (``record.rank``, the world rank; -1 before a run starts); the
program configures where records go. ``log_to_stderr`` is the CLI's configuration: progress
and notices as ``[mpicoded] ...`` lines, a bar redrawn in place on a terminal, warnings as
``mpicoded: warning: ...`` and errors as ``mpicoded: ...``.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, TextIO

logger = logging.getLogger("mpicoded")
_rank = -1


class _RankFilter(logging.Filter):
    """Stamps every record of the mpicoded logger with this process's rank."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.rank = _rank
        return True


logger.addFilter(_RankFilter())


def set_rank(rank: int) -> None:
    """The rank this process's records carry (``mpicoded.run`` sets its world rank)."""
    global _rank
    _rank = rank


class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        if record.levelno >= logging.ERROR:
            return f"mpicoded: {text}"
        if record.levelno >= logging.WARNING:
            return f"mpicoded: warning: {text}"
        progress = getattr(record, "progress", None)
        if progress is not None and getattr(record, "tty", False):
            done, total = progress
            filled = int(30 * done / total)
            return f"\r[mpicoded] [{'#' * filled}{'.' * (30 - filled)}] {text}"
        return f"[mpicoded] {text}"


if TYPE_CHECKING:
    _StreamHandler = logging.StreamHandler[TextIO]
else:  # not subscriptable at run time before Python 3.11
    _StreamHandler = logging.StreamHandler


class _Handler(_StreamHandler):
    """Lines on a stream; progress records redraw one line in place when it is a terminal."""

    def emit(self, record: logging.LogRecord) -> None:
        progress: tuple[int, int] | None = getattr(record, "progress", None)
        tty = progress is not None and self.stream.isatty()
        record.__dict__["tty"] = tty
        self.terminator = "" if tty and progress and progress[0] < progress[1] else "\n"
        super().emit(record)


def log_to_stderr(level: int = logging.INFO, stream: TextIO | None = None) -> logging.Handler:
    """Send mpicoded's records of ``level`` and above to ``stream`` (stderr) as the CLI shows
    them, instead of to the root logger; returns the handler (``logger.removeHandler`` undoes)."""
    handler = _Handler(stream or sys.stderr)
    handler.setFormatter(_Formatter())
    for old in [h for h in logger.handlers if isinstance(h, _Handler)]:
        logger.removeHandler(old)
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False
    return handler
