"""Event logs from real mpirun runs (tests/data/events: a purge between jobs, partial work with
a straggler, two deaths and a re-code, a stream of jobs under the adaptive split, a rank
throttled to 5% of its share left lingering at the end) replayed through a fresh Session:
the same instructions, event after event."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mpicoded.core.eventlog import Mismatch, replay
from mpicoded.replay import main

LOGS = Path(__file__).parent.parent / "data" / "events"
HOLDS = {"purge": "Purge", "partial": "Assign", "recode": "WorkerLost", "stream": "JobDone",
         "linger": "Linger"}


@pytest.mark.parametrize("name", sorted(HOLDS))
def test_a_recorded_run_replays_to_the_same_instructions(name):
    lines = (LOGS / f"{name}.jsonl").read_text().splitlines()
    assert f'"type": "{HOLDS[name]}"' in "".join(lines)  # the path it was recorded for
    assert len(list(replay(lines))) == len(lines) - sum('"session"' in line for line in lines)


def test_an_instruction_that_differs_is_named_with_its_line(tmp_path):
    lines = (LOGS / "partial.jsonl").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if '"Assign"' in line)
    row = json.loads(lines[at])
    assign = next(i for i in row["out"] if i["type"] == "Assign")
    assign["tasks"] = assign["tasks"][::-1]
    lines[at] = json.dumps(row)
    with pytest.raises(Mismatch, match=f"line {at + 1}: ResultArrived"):
        list(replay(lines))
    log = tmp_path / "changed.jsonl"
    log.write_text("\n".join(lines) + "\n")
    assert main([str(log)]) == 1


def test_the_replay_command(tmp_path, capsys):
    assert main([str(LOGS / "recode.jsonl")]) == 0
    assert "every instruction the same" in capsys.readouterr().out
    assert main([str(tmp_path / "none.jsonl")]) == 2
    (tmp_path / "metrics.jsonl").write_text('{"record": "iteration"}\n')
    assert main([str(tmp_path / "metrics.jsonl")]) == 2
    assert "not an event log" in capsys.readouterr().err


@pytest.mark.parametrize(("job", "code"), [
    ("logreg", ("gfrc", {"stragglers": 2})), ("pagerank", ("mds", {"stragglers": 1}))])
def test_a_jobs_shape_cuts_and_recodes_it_as_the_job_does(job, code):
    """A replay runs on the job's shape alone: its pieces, default chunks, tasks' work and a
    re-code's partitions are the job's own (results coded, and data coded)."""
    import numpy as np

    from mpicoded.codes import make_code, rebuild
    from mpicoded.core.shape import Shape
    from mpicoded.jobs import LogReg, PageRank, coded

    built = make_code(code[0], 6, **code[1])
    real = coded(LogReg(samples=3000, features=8) if job == "logreg" else PageRank(nodes=600),
                 built)
    for survivors in (5, 4):  # as first coded, then re-coded for 5 survivors
        shape = Shape(built, **real.shape())
        chunk = real.default_chunk_rows()
        assert shape.default_chunk_rows() == chunk
        mine, theirs = shape.pieces(chunk, fit=True), real.pieces(chunk, fit=True)
        assert mine.params["pieces"] == theirs.params["pieces"]
        assert mine.schedule == theirs.schedule
        assert np.array_equal(shape.task_cost(), real.task_cost())
        built = rebuild(built, survivors)
        real, shape = real.recoded(built), shape.recoded(built)
        assert list(shape.rows) == real.shape()["rows"] and shape.height == real.shape()["height"]


def test_a_field_added_since_a_log_was_written_must_hold_its_default():
    """The purge log predates Place's run_rows: replayed at its default (0) it matches; a
    session that would place runs (the settings line says so) does not match it."""
    lines = (LOGS / "purge.jsonl").read_text().splitlines()
    assert '"run_rows"' not in lines[1] and len(list(replay(lines))) == len(lines) - 1
    settings = json.loads(lines[0])
    settings["session"]["run_rows"] = 15
    with pytest.raises(Mismatch, match="line 2: Begin"):
        list(replay([json.dumps(settings), *lines[1:]]))


def test_a_log_says_whether_its_session_lets_slow_ranks_linger():
    """The lingering run's log replays only as a session that lets ranks linger: with it off,
    the end waits for the slow rank's answer to STOP and decides otherwise."""
    lines = (LOGS / "linger.jsonl").read_text().splitlines()
    settings = json.loads(lines[0])
    assert settings["session"]["linger"] is True
    settings["session"]["linger"] = False
    at = next(i for i, line in enumerate(lines) if '"LossComputed"' in line) + 1
    with pytest.raises(Mismatch, match=f"line {at}: LossComputed"):
        list(replay([json.dumps(settings), *lines[1:]]))
