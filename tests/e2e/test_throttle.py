"""Real slow ranks (root, a writable cgroup cpu controller): a rank under --throttle runs in its
cpu group and is really slower; the groups are gone after the run, even after a timeout."""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import subprocess
import sys
import textwrap
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest

from mpicoded.launcher.process import run_mpi
from mpicoded.launcher.timeout import MPIRunTimeout
from mpicoded.throttle.cleanup import GROUP_PREFIX
from mpicoded.throttle.controller import ThrottleError, find_controller
from mpicoded.throttle.schedule import parse_schedule

ROOT = Path(__file__).resolve().parents[2]


def controller_or_reason():
    try:
        return find_controller(), ""
    except ThrottleError as exc:
        return None, str(exc)


CONTROLLER, REASON = controller_or_reason()
pytestmark = pytest.mark.skipif(CONTROLLER is None, reason=f"needs root and cgroups: {REASON}")

# Each rank: its cpu cgroup (v1: the line naming the cpu controller; v2: the 0:: line), then the
# wall and CPU time of a fixed amount of pure-Python work.
PROBE = textwrap.dedent("""\
    import json, time
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    group = None
    for line in open("/proc/self/cgroup").read().splitlines():
        number, controllers, path = line.split(":", 2)
        if ("cpu" in controllers.split(",")) if {v1} else number == "0":
            group = path
    comm.Barrier()
    wall, cpu = time.perf_counter(), time.process_time()
    total = 0
    for i in range({work}):
        total += i * i
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(json.dumps({{"rank": comm.Get_rank(), "group": group, "wall": wall, "cpu": cpu}}),
          flush=True)
    if {hang}:
        time.sleep(600)
""")


def probe(tmp_path: Path, work: int, hang: bool = False) -> str:
    script = tmp_path / "probe.py"
    script.write_text(PROBE.format(v1=CONTROLLER.version == 1, work=work, hang=hang))
    return str(script)


def groups_left(pid: int) -> list[str]:
    """Groups made by process ``pid`` still in the hierarchy."""
    return [p.name for p in CONTROLLER.root.glob(f"{GROUP_PREFIX}{pid}-*")]


def test_throttled_rank_is_in_its_group_and_slower(tmp_path):
    # ~0.1 s of CPU: the others share 2 cores three ways (about 1.5x their CPU time in wall
    # time); rank 2 gets 5% of one core (about 20x), so >= 3x is a wide margin either way.
    done = run_mpi(4, [probe(tmp_path, 1_000_000)], timeout=120, throttle={2: 0.05})
    assert done.returncode == 0, done.output[-3000:]
    rows = {r["rank"]: r for r in map(json.loads, (line for line in done.output.splitlines()
                                                   if line.startswith("{")))}
    assert sorted(rows) == [0, 1, 2, 3], done.output[-3000:]
    group = rows[2]["group"]
    assert group.startswith(f"/{GROUP_PREFIX}{os.getpid()}-") and group.endswith("/rank2")
    assert all(GROUP_PREFIX not in rows[r]["group"] for r in (0, 1, 3))
    others = statistics.median(rows[r]["wall"] for r in (0, 1, 3))
    assert rows[2]["wall"] >= 3 * others, rows
    assert not (CONTROLLER.root / group.lstrip("/")).parent.exists()
    assert groups_left(os.getpid()) == []


def test_groups_are_removed_after_a_timeout(tmp_path):
    """The groups go, and the error lists what was still running: all three ranks' pythons."""
    with pytest.raises(MPIRunTimeout) as timed_out:
        run_mpi(3, [probe(tmp_path, 10, hang=True)], timeout=8, throttle={1: 0.2})
    assert groups_left(os.getpid()) == []
    ranks = [line for line in timed_out.value.processes.splitlines()
             if "probe.py" in line and "prterun" not in line]
    assert len(ranks) == 3, timed_out.value.processes


def test_bad_rank_is_refused_before_anything_starts(tmp_path):
    with pytest.raises(ValueError, match="rank 3 is out of range: allowed 0..2"):
        run_mpi(3, [probe(tmp_path, 10)], timeout=30, throttle={3: 0.5})
    assert groups_left(os.getpid()) == []


def test_local_sh_with_a_throttled_worker():
    proc = subprocess.Popen([str(ROOT / "launch" / "local.sh"), "-n", "3", "--throttle", "1=0.2",
                             "--iterations", "3", "--delay", "none", "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, _ = proc.communicate()
        pytest.fail(f"local.sh timed out\n{out[-3000:]}")
    assert proc.returncode == 0, out[-3000:]
    assert "loss" in out
    assert groups_left(proc.pid) == []  # local.sh execs the launcher: same PID


def test_launcher_cli_error_exits_2():
    done = subprocess.run([sys.executable, "-m", "mpicoded.launcher", "-n", "3", "--throttle",
                           "1=abc", "--", "-c", "pass"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith("mpicoded.launcher: error: --throttle '1=abc': expected")
    assert len(done.stderr.splitlines()) == 1


def train_record(tmp_path: Path, name: str, flags: list[str],
                 throttle: dict[int, float] | str | None) -> dict:
    """One run's record; ``throttle``: shares from the launch, or a --throttle spec timed from
    the first iteration (a rank at 5% of a core is not also 20x slow to start Python)."""
    metrics = tmp_path / f"{name}.jsonl"
    if isinstance(throttle, str):
        throttle = dataclasses.replace(parse_schedule(throttle, 7), clock=str(metrics))
    done = run_mpi(7, ["-m", "mpicoded.train", *flags, "--quiet", "--metrics", str(metrics)],
                   timeout=240, throttle=throttle)
    assert done.returncode == 0, done.output[-3000:]
    return json.loads(metrics.read_text().splitlines()[-1])


def test_throttled_worker_is_purged_mid_task(tmp_path):
    """Nothing injected: rank 2 at 5% of a core from the first iteration. Purges cut its tasks
    within a chunk, so it
    completes few, the report names it from the task trace, and θ equals an unthrottled
    whole-task run up to reassociation."""
    flags = ["--code", "frc", "--stragglers", "1", "--delay", "none", "--samples", "400000",
             "--features", "20", "--iterations", "15", "--loss-every", "0"]
    slow_run = train_record(tmp_path, "throttled", [*flags, "--chunk-rows", "2000", "--trace"],
                            "2=0.05@0-")
    slow = next(w for w in slow_run["workers"] if w["rank"] == 2)
    assert slow["dropped_tasks"] > 0
    assert slow["computed_tasks"] <= 15 // 2, slow
    report = subprocess.run([sys.executable, "-m", "mpicoded.report",
                             str(tmp_path / "throttled.jsonl"), "--out", str(tmp_path)],
                            capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr
    assert "stragglers (at most 0.5x the median over the run): rank 2\n" in report.stdout
    whole = train_record(tmp_path, "whole", [*flags, "--chunk-rows", "0"], None)
    a, b = np.array(slow_run["final_theta"]), np.array(whole["final_theta"])
    assert np.allclose(a, b, rtol=1e-9, atol=1e-12 * np.abs(b).max())
    assert groups_left(os.getpid()) == []


def test_the_report_names_nobody_when_every_worker_has_the_same_share(tmp_path):
    """Every worker held to 0.3 of a core (as separate machines would be), nobody slower: the
    report's worker table and the run's last row name no straggler."""
    flags = ["--code", "frc", "--stragglers", "1", "--delay", "none", "--samples", "400000",
             "--features", "20", "--iterations", "15", "--loss-every", "0", "--trace"]
    record = train_record(tmp_path, "even", flags, dict.fromkeys(range(1, 7), 0.3))
    assert record["stragglers"] == {}, record["stragglers"]
    report = subprocess.run([sys.executable, "-m", "mpicoded.report",
                             str(tmp_path / "even.jsonl"), "--out", str(tmp_path)],
                            capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr
    assert "stragglers (at most 0.5x the median over the run): none\n" in report.stdout


def test_a_moving_throttle_changes_which_rank_is_slow(tmp_path):
    """--throttle move=0.02/1/3: every second a different worker rank is held to 2% of a core
    while the run goes on. From the task records: for 30 iterations in a row one worker has
    its task purged in 27 of them or more, and later another one does (by chance, with each of
    a pair purged half the time, such a window has odds of about 4e-6). A phase holds 60-120
    iterations here, so a machine twice as slow still fits a window in each."""
    from mpicoded.throttle.schedule import parse_schedule

    metrics = tmp_path / "run.jsonl"
    done = run_mpi(7, ["-m", "mpicoded.train", "--code", "frc", "--stragglers", "1", "--delay",
                       "none", "--samples", "60000", "--features", "50", "--iterations", "800",
                       "--loss-every", "0", "--quiet", "--metrics", str(metrics)], timeout=300,
                   throttle=parse_schedule("move=0.02/1/3", 7))
    assert done.returncode == 0, done.output[-3000:]
    purged: dict[int, set[int]] = {}
    for line in metrics.read_text().splitlines():
        t = json.loads(line)
        if t["record"] == "task" and t["outcome"] in ("purged", "dropped"):
            purged.setdefault(t["iteration"], set()).add(t["worker"])
    slow_in_turn = set()
    for first in range(800 - 30):
        for worker in range(6):
            if sum(worker in purged.get(it, ()) for it in range(first, first + 30)) >= 27:
                slow_in_turn.add(worker)
    assert len(slow_in_turn) >= 2, purged


def test_a_trace_of_slowdowns_slows_the_rank_it_names(tmp_path):
    """``mpicoded launch --throttle trace=FILE``: the trace holds rank 3 twenty times slower
    than a core from the launch on; the run says it is a straggler as it goes (its watch judges
    windows of a second at least: 200 iterations take two or more), the report has it the
    slowest worker and a straggler, and the groups go."""
    trace = tmp_path / "slowdowns.csv"
    trace.write_text("# rank 3 slow throughout\nseconds,1,2,3,4,5,6\n0,1,1,20,1,1,1\n")
    metrics = tmp_path / "run.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "mpicoded.launcher", "-n", "7", "--throttle", f"trace={trace}",
         "--", "-m", "mpicoded.train", "--code", "frc", "--stragglers", "1", "--delay", "none",
         "--samples", "400000", "--features", "20", "--iterations", "200", "--chunk-rows",
         "2000", "--loss-every", "0", "--metrics", str(metrics)],
        capture_output=True, text=True, timeout=240, start_new_session=True)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "rank 3 is a straggler: " in done.stderr, done.stderr[-3000:]
    named = [line.split()[1:3] for line in done.stdout.splitlines() if line.startswith("stragglers")]
    assert named == [["rank", "3"]], done.stdout  # the summary's last rows
    report = subprocess.run([sys.executable, "-m", "mpicoded.report", str(metrics), "--out",
                             str(tmp_path)], capture_output=True, text=True, timeout=120)
    lines = report.stdout.splitlines()
    table = lines.index(next(line for line in lines if line.lstrip().startswith("rank")))
    assert lines[table + 1].split()[0] == "3", report.stdout  # the slowest
    stragglers = next(line for line in lines if line.startswith("stragglers"))
    assert "3" in stragglers.split("rank ")[1].split(", "), report.stdout
    assert groups_left(os.getpid()) == []


def test_an_adaptive_split_gives_a_throttled_rank_less_of_the_data(tmp_path):
    """``--split adaptive`` alone, rank 2 at 5% of a core: every worker holds the data and the
    others take over the far half of its share within each iteration, so it computes far
    fewer rows than any other worker, and the run record says it handed the most pieces to
    others; θ equals an unthrottled run's up to reassociation."""
    flags = ["--split", "adaptive", "--delay", "none", "--samples", "240000", "--features",
             "20", "--iterations", "15", "--loss-every", "0"]
    slow_run = train_record(tmp_path, "throttled", [*flags, "--trace"], "2=0.05@0-")
    config = slow_run["config"]
    assert (config["split"], slow_run["code"]["name"], config["partial"]) == (
        "adaptive", "spread", "on")
    rows = {}
    spans: dict[int, list[tuple[float, float]]] = {}
    for line in (tmp_path / "throttled.jsonl").read_text().splitlines():
        t = json.loads(line)
        if t["record"] == "task":
            rows[t["worker"] + 1] = rows.get(t["worker"] + 1, 0) + t["chunks"]
            if t["chunks"]:
                spans.setdefault(t["worker"], []).append((t["start_s"], t["end_s"]))
    for worker, times in spans.items():  # a run's pieces share its time: none counted twice
        times.sort()
        assert all(b[0] >= a[1] - 1e-6 for a, b in pairwise(times)), (worker, times)
    others = [rows.get(r, 0) for r in range(1, 7) if r != 2]
    assert rows.get(2, 0) < 0.5 * min(others), rows
    handed = slow_run["handed"]  # what each rank's share gave to others: rank 2 the most
    assert max(handed, key=handed.get) == "2", handed
    even = train_record(tmp_path, "even", flags, None)
    a, b = np.array(slow_run["final_theta"]), np.array(even["final_theta"])
    assert np.allclose(a, b, rtol=1e-9, atol=1e-12 * np.abs(b).max())
