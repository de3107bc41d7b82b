"""Each worker's speed from the task trace: the slow rank named, nobody when nobody is slow."""

from __future__ import annotations

import pytest

from mpicoded.speeds import speed_lines, speeds


def trace(seconds_a_chunk, iterations=8, chunks=4, cut=()):
    """Task records: each worker (rank - 1) computes one task of ``chunks`` chunks an
    iteration, taking ``seconds_a_chunk[worker]`` a chunk; ``cut`` (worker, iteration) pairs
    were purged after one chunk."""
    tasks = []
    for it in range(iterations):
        for w, pace in enumerate(seconds_a_chunk(it) if callable(seconds_a_chunk)
                                 else seconds_a_chunk):
            done = 1 if (w, it) in cut else chunks
            tasks.append({"worker": w, "job": 0, "iteration": it, "epoch": 0, "task": w,
                          "start_s": float(it), "end_s": it + done * pace, "chunks": done,
                          "outcome": "purged" if (w, it) in cut else "used"})
    return tasks


def test_a_slow_worker_is_named_by_its_rank_slowest_first():
    tasks = trace([0.01, 0.2, 0.01, 0.011, 0.01, 0.01], cut={(1, i) for i in range(8)})
    table = speeds(tasks)
    assert table[0].rank == 2 and table[0].speed == pytest.approx(0.05)
    assert table[0].chunks == 8 and table[0].cut == 8
    assert speed_lines(tasks)[-1] == "stragglers (at most 0.5x the median over the run): rank 2"


def test_nobody_slow_names_nobody():
    lines = speed_lines(trace([0.01, 0.012, 0.011, 0.01, 0.0105, 0.01]))
    assert lines[-1] == "stragglers (at most 0.5x the median over the run): none"
    assert len(lines) == 2 + 6 + 1  # the headings, a line a worker, the verdict


def test_a_worker_slow_for_a_while_shows_in_its_slowest_window():
    """Rank 3 is 4x slow in the last two of eight iterations only: over the run it is not a
    straggler (0.57x), its slowest window (the last quarter) says it was one."""
    tasks = trace(lambda it: [0.01, 0.01, 0.04 if it >= 6 else 0.01, 0.01])
    slow = next(s for s in speeds(tasks) if s.rank == 3)
    assert slow.speed == pytest.approx(0.32 / 0.56) and slow.slowest == pytest.approx(0.25)
    assert speed_lines(tasks)[-1].endswith(": none")


def test_no_trace_no_table():
    assert speeds([]) == [] and speed_lines([]) == []


def test_the_watch_says_when_a_rank_becomes_a_straggler_and_when_it_stops():
    """Ten iterations a window: rank 3 is 20x slow in the second window only; the watch says
    so at the end of it, and that it stopped at the end of the third; nothing with nobody
    slow."""
    from mpicoded.core.trace import TaskRecord
    from mpicoded.speeds import StragglerWatch

    said: list[str] = []
    watch = StragglerWatch(said.append, window=10)
    for it in range(30):
        pace = [0.01, 0.01, 0.2 if 10 <= it < 20 else 0.01, 0.011]
        watch.add([TaskRecord(w, 0, it, 0, w, it, it + 4 * p, 4, "used")
                   for w, p in enumerate(pace)])
        watch.iteration()
        if it == 9:
            assert said == []
    assert said == ["rank 3 is a straggler: 0.05x the median worker's speed over the last 10 "
                    "iterations",
                    "rank 3 is no longer a straggler: 1.00x the median over the last 10 "
                    "iterations"]
    assert watch.stragglers() == {3: 0.143}  # 20x slow for a third of the run


def test_the_watch_waits_for_a_window_of_at_least_its_span():
    """Iterations of a millisecond: ten of them are too short a window to judge a rank on a
    shared core; the watch judges once the window covers a second, naming the window's size."""
    from mpicoded.core.trace import TaskRecord
    from mpicoded.speeds import StragglerWatch

    said: list[str] = []
    watch = StragglerWatch(said.append, window=10, span_s=1.0)
    for it in range(600):
        t = it * 0.002
        pace = [0.0005, 0.0005, 0.01]
        watch.add([TaskRecord(w, 0, it, 0, w, t, t + p, 1, "used") for w, p in enumerate(pace)])
        watch.iteration()
        if it < 495:  # rank 3's task of iteration 495 ends at 1.0 s
            assert said == [], it
    assert said == ["rank 3 is a straggler: 0.05x the median worker's speed over the last 496 "
                    "iterations"]


def test_the_run_names_its_stragglers_in_its_last_lines():
    """A rank 20x slow throughout is named with its speed over the run, in the watch (silent:
    no ``say``) and in the summary table; nobody when nobody is slow."""
    from mpicoded.core.trace import TaskRecord
    from mpicoded.record import summary_table
    from mpicoded.speeds import StragglerWatch

    watch, even = StragglerWatch(None), StragglerWatch(None)
    for it in range(30):
        watch.add([TaskRecord(w, 0, it, 0, w, it, it + 4 * p, 4, "used")
                   for w, p in enumerate([0.01, 0.2, 0.01, 0.011])])
        even.add([TaskRecord(w, 0, it, 0, w, it, it + 0.04, 4, "used") for w in range(4)])
        watch.iteration()
        even.iteration()
    assert watch.stragglers() == {2: 0.052} and even.stragglers() == {}
    record = {"iterations": 30, "mean_iteration_s": 0.01, "job_done_s": 1.0, "makespan_s": 1.0,
              "total_results_received": 120, "total_stale_results": 0, "total_purged_tasks": 0,
              "initial_loss": 0.69, "final_loss": 0.3}
    assert summary_table(record).splitlines()[-1].startswith("loss")
    last = summary_table({**record, "stragglers": {"2": 0.05}}).splitlines()[-1]
    assert last.split() == ["stragglers", "rank", "2", "(0.05x", "the", "median", "worker's",
                            "speed)"]
    assert summary_table({**record, "stragglers": {}}).splitlines()[-1].split() == [
        "stragglers", "none"]
    handed = summary_table({**record, "handed": {"2": 11, "4": 1}}).splitlines()[-1]
    assert handed.split() == ["handed", "to", "others", "rank", "2:", "11", "pieces,", "rank",
                              "4:", "1", "piece"]
    assert summary_table({**record, "handed": {}}).splitlines()[-1].split()[-1] == "none"
    many = summary_table({**record, "handed": {str(r): r for r in range(1, 21)}})
    assert many.splitlines()[-1].split(None, 3)[-1] == (
        "rank 20: 20 pieces, rank 19: 19 pieces, rank 18: 18 pieces, 17 more ranks (210 pieces "
        "in all)")


def test_the_table_says_what_each_worker_handed_to_others_under_partial_work():
    """With the run record's ``handed`` (partial work) a column: rank 2 gave 30 pieces away,
    the rest none; without it (no partial work) no column."""
    tasks = trace([0.01, 0.2, 0.01, 0.011])
    with_handed = speed_lines(tasks, {2: 30})
    assert with_handed[1].split()[-3:] == ["handed", "to", "others"]
    rows = {line.split()[0]: line.split()[-1] for line in with_handed[2:-1]}
    assert rows == {"2": "30", "1": "0", "3": "0", "4": "0"}
    assert "handed" not in speed_lines(tasks)[1]
