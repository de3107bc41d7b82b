"""mpicoded's log (no MPI): library records go to the ``mpicoded`` logger with the rank they
come from; the CLI's handler shows them as today's lines, a progress bar in place on a tty."""

from __future__ import annotations

import io
import logging

import pytest

from mpicoded.core.result import IterationRecord
from mpicoded.log import log_to_stderr, logger, set_rank
from mpicoded.record import Progress


def record(iteration: int) -> IterationRecord:
    return IterationRecord(0, iteration, 0.01, 1, 2, 1, 1, 3, 1.0, 0)


@pytest.fixture
def cli():
    """The CLI's handler on a buffer; the logger as it was afterwards."""
    level, propagate = logger.level, logger.propagate
    stream = io.StringIO()
    handler = log_to_stderr(stream=stream)
    yield stream
    logger.removeHandler(handler)
    logger.setLevel(level)
    logger.propagate = propagate
    set_rank(-1)


def test_progress_is_about_ten_records_a_job_each_with_its_rank(caplog):
    set_rank(3)
    with caplog.at_level(logging.INFO, logger="mpicoded"):
        progress = Progress(40, quiet=False, metrics=None)
        for it in range(40):
            progress(record(it), 0.5)
    lines = [r for r in caplog.records if r.name == "mpicoded"]
    assert [r.progress for r in lines] == [(d, 40) for d in range(4, 41, 4)]
    assert {r.rank for r in lines} == {3} and all(r.levelno == logging.INFO for r in lines)
    assert lines[-1].getMessage() == "iteration 40/40  loss 0.500000  mean 10.0 ms/it  purged 40"
    set_rank(-1)


def test_quiet_progress_logs_nothing(caplog):
    with caplog.at_level(logging.DEBUG, logger="mpicoded"):
        progress = Progress(5, quiet=True, metrics=None)
        for it in range(5):
            progress(record(it), None)
    assert not [r for r in caplog.records if r.name == "mpicoded"]


def test_the_cli_handler_shows_todays_lines(cli):
    logger.info("re-coded for %d workers", 4)
    logger.warning("a dense code")
    logger.error("every worker has failed")
    logger.debug("not shown")
    assert cli.getvalue().splitlines() == ["[mpicoded] re-coded for 4 workers",
                                           "mpicoded: warning: a dense code",
                                           "mpicoded: every worker has failed"]


def test_the_bar_is_redrawn_in_place_on_a_terminal(cli):
    cli.isatty = lambda: True  # type: ignore[method-assign]
    logger.info("iteration 5/10", extra={"progress": (5, 10)})
    logger.info("iteration 10/10", extra={"progress": (10, 10)})
    assert cli.getvalue() == ("\r[mpicoded] [###############...............] iteration 5/10"
                              "\r[mpicoded] [##############################] iteration 10/10\n")
