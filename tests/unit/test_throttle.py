"""--throttle without root: parsing, quota arithmetic, group paths, mpirun's MPMD command."""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import pytest

from mpicoded.launcher.__main__ import main, parse_cli
from mpicoded.launcher.command import app_contexts, mpirun_command
from mpicoded.throttle.cleanup import remove_groups
from mpicoded.throttle.controller import Controller, controller_candidates
from mpicoded.throttle.groups import Throttle, group_name, join_command
from mpicoded.throttle.quota import quota_period
from mpicoded.throttle.schedule import check_rank_throttle, parse_host_schedule, parse_schedule

V1 = Controller(1, Path("/sys/fs/cgroup/cpu"))


@pytest.mark.parametrize("spec, expected", [
    ("2=0.25", {2: 0.25}),
    ("1=0.5, 2=1", {1: 0.5, 2: 1.0}),
    ("1=0.001,3=.3", {1: 0.001, 3: 0.3}),
])
def test_parse_good_specs(spec, expected):
    schedule = parse_schedule(spec, 7)
    assert schedule.static and schedule.base == expected and schedule.at(0.0) == expected


@pytest.mark.parametrize("spec, message", [
    ("", "--throttle '': expected RANK=FRACTION"),
    ("2", "--throttle '2': expected RANK=FRACTION"),
    ("2=", "--throttle '2=': expected RANK=FRACTION"),
    ("=0.5", "--throttle '=0.5': RANK must be a rank number 0..6"),
    ("1=0.5,", "--throttle '': expected RANK=FRACTION"),
    ("2=abc", "--throttle '2=abc': expected RANK=FRACTION"),
    ("2=0", "--throttle '2=0': FRACTION must be a share of one core in [0.001, 1]"),
    ("2=1.5", "--throttle '2=1.5': FRACTION must be"),
    ("2=-0.1", "--throttle '2=-0.1': FRACTION must be"),
    ("2=nan", "--throttle '2=nan': FRACTION must be"),
    ("2=0.0001", "--throttle '2=0.0001': FRACTION must be"),
    ("1=0.5,2=0.2,1=0.3", "--throttle '1=0.3': 1 is throttled twice"),
    ("../x=0.5", "--throttle '../x=0.5': RANK must be a rank number"),
])
def test_parse_bad_specs_name_the_item(spec, message):
    with pytest.raises(ValueError) as err:
        parse_schedule(spec, 7)
    assert str(err.value).startswith(message), str(err.value)


def test_host_schedules_name_hosts_and_move_among_all_but_h0():
    """Hosts h0..h{n-1}: workers= and move= leave h0 (mpirun, the master) out; a host outside
    the cluster, or a rank number, is refused by name."""
    schedule = parse_host_schedule("h1=0.25,h2=0.5", 3)
    assert schedule.static and schedule.at(0.0) == {"h1": 0.25, "h2": 0.5}
    moving = parse_host_schedule("workers=0.5,move=0.05/0.4/3,h0=0.2@1-2", 4)
    assert moving.keys == ["h0", "h1", "h2", "h3"] and moving.workers == ("h1", "h2", "h3")
    for k in range(10):
        shares = moving.at(0.4 * k + 0.1)
        slow = [h for h, f in shares.items() if f == 0.05]
        assert len(slow) == 1 and slow[0] != "h0"
        assert shares["h0"] == (0.2 if 1 <= 0.4 * k + 0.1 < 2 else None)
    for spec, message in (("h3=0.5", "'h3=0.5': no host 'h3': the hosts are h0..h2"),
                          ("1=0.5", "no host '1'"), ("h1=0.5@2", "expected HOST=FRACTION"),
                          ("h1=0.5,h1=0.3", "h1 is throttled twice")):
        with pytest.raises(ValueError, match=message):
            parse_host_schedule(spec, 3)
    with pytest.raises(ValueError, match="two workers or more, got 1"):
        parse_host_schedule("move=0.05/0.4", 2)


def test_rank_specs_are_ranks_in_range():
    schedule = parse_schedule("0=0.5,6=0.1", 7)
    assert schedule.static and schedule.base == {0: 0.5, 6: 0.1}
    with pytest.raises(ValueError, match=r"'7=0.5': rank 7 is out of range: allowed 0..6"):
        parse_schedule("7=0.5", 7)
    with pytest.raises(ValueError, match=r"'h1=0.5': RANK must be a rank number 0..6"):
        parse_schedule("h1=0.5", 7)
    with pytest.raises(ValueError, match="rank -1 is out of range"):
        check_rank_throttle({-1: 0.5}, 4)
    with pytest.raises(ValueError, match="FRACTION must be"):
        check_rank_throttle({1: 2.0}, 4)


@pytest.mark.parametrize("fraction, expected", [
    (1, (20000, 20000)), (0.25, (5000, 20000)), (0.05, (1000, 20000)),
    (0.04, (1000, 25000)), (0.01, (1000, 100000)), (0.001, (1000, 1000000)),
])
def test_quota_and_period(fraction, expected):
    assert quota_period(fraction) == expected


def test_quota_is_the_fraction_within_the_kernel_limits():
    for fraction in [i / 1000 for i in range(1, 1001)]:
        quota, period = quota_period(fraction)
        assert 1000 <= quota and 1000 <= period <= 1_000_000
        assert quota / period == pytest.approx(fraction, rel=0.01)
        assert period == 20000 or fraction < 0.05  # the short period unless the quota is < 1 ms


def test_controllers_found_in_mounts_v1_first():
    hybrid = ("tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0\n"
              "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n"
              "cgroup /sys/fs/cgroup/cpuacct cgroup rw,relatime,cpuacct 0 0\n"
              "cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n")
    assert controller_candidates(hybrid) == [(1, Path("/sys/fs/cgroup/cpu")),
                                             (2, Path("/sys/fs/cgroup/unified"))]
    combined = "cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,nosuid,cpu,cpuacct 0 0\n"
    assert controller_candidates(combined) == [(1, Path("/sys/fs/cgroup/cpu,cpuacct"))]
    v2 = "proc /proc proc rw 0 0\ncgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0\n"
    assert controller_candidates(v2) == [(2, Path("/sys/fs/cgroup"))]
    assert controller_candidates("cgroup2 /mnt/c\\040g cgroup2 rw 0 0") == [(2, Path("/mnt/c g"))]


def test_group_paths_and_join_prefix():
    throttle = Throttle({2: 0.5, "h1": 0.25}, controller=V1, name="mpicoded-1-abc")
    assert throttle.path == Path("/sys/fs/cgroup/cpu/mpicoded-1-abc")
    assert throttle.procs_file(2) == throttle.path / "rank2" / "cgroup.procs"
    assert throttle.group("h1") == throttle.path / "h1"
    assert throttle.join_prefix(2) == ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"',
                                       str(throttle.path / "rank2" / "cgroup.procs")]
    assert join_command("/x/cgroup.procs")[-1] == "/x/cgroup.procs"
    assert group_name(0) == "rank0" and group_name("h2") == "h2"
    default = Throttle({1: 0.5}, controller=V1)
    assert default.path.parent == V1.root and default.path.name.startswith("mpicoded-")
    remove_groups(Path("/nonexistent/mpicoded-1-abc"), V1)  # nothing there: nothing to do


def expand(contexts: list[str]) -> list[list[str]]:
    """One command per rank, in Open MPI's numbering: app contexts in order, -n copies each."""
    ranks: list[list[str]] = []
    start = 0
    for end in [*(i for i, word in enumerate(contexts) if word == ":"), len(contexts)]:
        context = contexts[start:end]
        assert context[0] == "-n"
        ranks += [context[2:]] * int(context[1])
        start = end + 1
    return ranks


def test_app_contexts_number_ranks_in_order():
    program = ["python", "x.py"]
    assert app_contexts(6, program, {}) == ["-n", "6", "python", "x.py"]
    assert app_contexts(6, program, {2: ["P"]}) == [
        "-n", "2", "python", "x.py", ":", "-n", "1", "P", "python", "x.py", ":",
        "-n", "3", "python", "x.py"]
    rng = random.Random(0)
    for _ in range(200):
        ranks = rng.randint(1, 9)
        chosen = rng.sample(range(ranks), rng.randint(0, ranks))
        prefixes = {r: [f"P{r}"] for r in chosen}
        per_rank = expand(app_contexts(ranks, program, prefixes))
        assert per_rank == [[f"P{r}", *program] if r in prefixes else program
                            for r in range(ranks)]


def test_mpirun_command_puts_throttled_ranks_in_their_groups():
    throttle = Throttle({0: 0.5, 3: 0.1}, controller=V1, name="mpicoded-1-abc")
    cmd = mpirun_command(5, ["-m", "mpicoded.train"], ft=True, throttle=throttle)
    first = cmd.index("-n")
    assert "--with-ft" in cmd[:first] and "-x" in cmd[:first]  # global options come first
    per_rank = expand(cmd[first:])
    program = [sys.executable, "-m", "mpicoded.train"]
    assert per_rank[0] == [*throttle.join_prefix(0), *program]
    assert per_rank[3] == [*throttle.join_prefix(3), *program]
    assert per_rank[1] == per_rank[2] == per_rank[4] == program
    with pytest.raises(ValueError, match="rank 3 is out of range: allowed 0..2"):
        mpirun_command(3, ["x.py"], throttle=throttle)
    plain = mpirun_command(4, ["x.py"])
    assert plain[plain.index("-n"):] == ["-n", "4", sys.executable, "x.py"]


def test_launcher_cli_options():
    opts = parse_cli(["-n", "3", "--ft", "--throttle", "1=0.2", "--", "-m", "mpicoded.train"])
    assert (opts.ranks, opts.ft, opts.throttle.base, opts.args) == (3, True, {1: 0.2},
                                                                    ["-m", "mpicoded.train"])
    opts = parse_cli(["--throttle=2=0.5,1=1", "-m", "mpicoded.train", "--ft"])
    assert (opts.ranks, opts.ft, opts.throttle.base) == (21, False, {2: 0.5, 1: 1.0})
    assert opts.args == ["-m", "mpicoded.train", "--ft"]  # after the program: Python's
    assert parse_cli(["--help"]) is None
    for argv, message in [(["-n", "x", "a.py"], "-n 'x': expected a number of ranks"),
                          (["--throttle"], "--throttle needs a value"),
                          (["-n", "3"], "no program"),
                          (["-n", "3", "--throttle", "3=0.5", "a.py"], "rank 3 is out of range")]:
        with pytest.raises(ValueError, match=message):
            parse_cli(argv)


def test_launcher_cli_error_is_one_line_and_status_2(capsys):
    assert main(["-n", "3", "--throttle", "2=abc", "--", "-m", "mpicoded.train"]) == 2
    err = capsys.readouterr().err
    assert err == ("mpicoded.launcher: error: --throttle '2=abc': expected RANK=FRACTION, "
                   "RANK=FRACTION@START-END, workers=FRACTION, move=FRACTION/PERIOD[/SEED], "
                   "stalls=PROBABILITY/PERIOD/LOW-HIGH[/SEED] or trace=FILE, e.g. 2=0.25\n")


def test_quota_files_written_as_the_kernel_reads_them(tmp_path):
    """On plain directories standing in for cgroupfs: v1 period then quota, v2 one cpu.max line,
    and v2 enables the cpu controller for a group's children only when it is not on yet."""
    Controller(1, tmp_path).limit(tmp_path, 0.25)
    assert (tmp_path / "cpu.cfs_period_us").read_text() == "20000"
    assert (tmp_path / "cpu.cfs_quota_us").read_text() == "5000"
    v2 = Controller(2, tmp_path)
    v2.limit(tmp_path, 0.01)
    assert (tmp_path / "cpu.max").read_text() == "1000 100000"
    control = tmp_path / "cgroup.subtree_control"
    control.write_text("memory\n")
    v2.enable(tmp_path)
    assert control.read_text() == "+cpu"
    control.write_text("cpu memory\n")
    v2.enable(tmp_path)
    assert control.read_text() == "cpu memory\n"
    Controller(1, tmp_path).enable(tmp_path)  # v1: nothing to enable
    assert control.read_text() == "cpu memory\n"


def test_a_schedule_caps_every_worker_and_moves_a_straggler_among_them():
    """workers=0.3 holds every worker rank at 0.3 of a core (machines of one size); move= puts
    a different seeded random worker at 0.015 every 0.4 s; 2=0.05@1-2 slows rank 2 in a window."""
    schedule = parse_schedule("workers=0.3,move=0.015/0.4/3", 7)
    assert not schedule.static and schedule.keys == [1, 2, 3, 4, 5, 6]
    slow = []
    for k in range(20):
        shares = schedule.at(0.4 * k + 0.2)
        (rank,) = [r for r, f in shares.items() if f == 0.015]
        assert all(f == 0.3 for r, f in shares.items() if r != rank)
        slow.append(rank)
    assert all(a != b for a, b in zip(slow, slow[1:], strict=False)) and len(set(slow)) >= 4
    assert schedule.next_change(0.5) == pytest.approx(0.8)
    window = parse_schedule("2=0.05@1-2.5", 4)
    assert window.at(0.5) == {2: None} and window.at(1.0) == {2: 0.05}
    assert window.at(2.5) == {2: None}
    assert window.next_change(0.0) == 1.0 and window.next_change(1.0) == 2.5
    assert window.next_change(2.5) is None


def test_stalls_slow_a_seeded_few_workers_for_one_period_each():
    """stalls=0.1/0.2/10-40 makes each worker, every 0.2 s, with probability 0.1, 10-40x slower
    than its share; the same seed draws the same stalls, another seed others."""
    schedule = parse_schedule("workers=0.3,stalls=0.1/0.2/10-40/3", 7)
    assert not schedule.static and schedule.keys == [1, 2, 3, 4, 5, 6]
    assert schedule.at(-1.0) == dict.fromkeys(range(1, 7), 0.3)  # before the clock starts
    stalled = 0
    for k in range(500):
        shares = schedule.at(0.2 * k + 0.1)
        assert shares == schedule.at(0.2 * k)  # one draw a period
        slow = {r: f for r, f in shares.items() if f != 0.3}
        assert all(0.3 / 40 <= f <= 0.3 / 10 for f in slow.values())
        stalled += len(slow)
    assert 0.07 < stalled / (500 * 6) < 0.13
    assert schedule.next_change(0.25) == pytest.approx(0.4)
    other = parse_schedule("workers=0.3,stalls=0.1/0.2/10-40/4", 7)
    assert [schedule.at(0.2 * k) for k in range(50)] != [other.at(0.2 * k) for k in range(50)]


@pytest.mark.parametrize(("spec", "message"), [
    ("move=0.05", "expected RANK=FRACTION"), ("move=0.05/0", "expected RANK=FRACTION"),
    ("stalls=0.1/0.2", "stalls=PROBABILITY"), ("stalls=0/0.2/10-40", "stalls=PROBABILITY"),
    ("stalls=0.1/0.2/40-10", "stalls=PROBABILITY"), ("stalls=0.1/0.2/0.5", "stalls=PROBABILITY"),
    ("2=0.05@3-1", "expected RANK=FRACTION"), ("workers=2", "FRACTION must be"),
])
def test_bad_schedules_name_the_item(spec, message):
    with pytest.raises(ValueError, match=message):
        parse_schedule(spec, 4)


def test_a_throttle_follows_its_schedule(tmp_path):
    """The follower thread writes each change to the group's quota file (a fake v2 hierarchy)."""
    from mpicoded.throttle.controller import Controller
    from mpicoded.throttle.groups import Throttle

    schedule = parse_schedule("1=0.5@0.1-0.4", 3)
    throttle = Throttle({}, controller=Controller(2, tmp_path), name="mpicoded-test",
                        schedule=schedule)
    (tmp_path / "cgroup.subtree_control").write_text("cpu")
    throttle.path.mkdir()
    (throttle.path / "cgroup.subtree_control").write_text("cpu")
    throttle.group(1).mkdir()
    quota = throttle.group(1) / "cpu.max"
    throttle.follow()
    try:
        assert wait_for(lambda: quota.exists() and quota.read_text() == "10000 20000")
        assert wait_for(lambda: quota.read_text() == "max 20000")  # not limited any more
    finally:
        throttle.stop()


def test_a_schedule_clock_starts_when_its_file_is_written(tmp_path):
    """With a clock file, the base shares hold from the launch and the windows (here one that
    never ends) start only once the file is not empty, and end with the run record: a
    straggler is slow neither to start nor to shut down."""
    import dataclasses

    from mpicoded.throttle.controller import Controller
    from mpicoded.throttle.groups import Throttle

    clock = tmp_path / "run.jsonl"
    schedule = dataclasses.replace(parse_schedule("workers=0.3,2=0.015@0-", 3), clock=str(clock))
    assert schedule.at(-1.0) == {1: 0.3, 2: 0.3} and schedule.at(1e9) == {1: 0.3, 2: 0.015}
    assert schedule.next_change(0.0) is None  # an open end is no change to wait for
    throttle = Throttle({}, controller=Controller(2, tmp_path), name="mpicoded-test",
                        schedule=schedule)
    assert throttle.fractions == {1: 0.3, 2: 0.3}
    throttle.path.mkdir()
    throttle.group(2).mkdir()
    quota = throttle.group(2) / "cpu.max"
    throttle.follow()
    try:
        assert not wait_for(lambda: quota.exists(), seconds=0.2)  # the run has not started
        clock.write_text('{"record": "start"}\n')
        assert wait_for(lambda: quota.exists() and quota.read_text() == "1000 66667")
        with clock.open("a") as f:  # an iteration; then rank 0's last line, the run record
            f.write('{"record": "iteration"}\n')
        assert not wait_for(lambda: quota.read_text() != "1000 66667", seconds=0.2)
        with clock.open("a") as f:
            f.write('{"record": "run", "config": {}}\n')
        assert wait_for(lambda: quota.read_text() == "6000 20000")  # the base share again
        assert wait_for(lambda: not throttle._follower.is_alive())
    finally:
        throttle.stop()


def wait_for(condition, seconds=5.0):
    """Whether ``condition()`` held within ``seconds`` (polled)."""
    import time

    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_groups_left_by_a_dead_run_are_swept_when_the_next_one_starts(tmp_path):
    """A group named after a PID that no longer exists goes (with its children); one of a live
    process, one not named the default way, and one with processes in it, stay."""
    import subprocess

    from mpicoded.throttle.cleanup import sweep_stale

    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = tmp_path / f"mpicoded-{gone.pid}-abc123"
    (dead / "rank2").mkdir(parents=True)
    alive = tmp_path / f"mpicoded-{os.getpid()}-def456"
    alive.mkdir()
    other = tmp_path / "mpicoded-test"
    other.mkdir()
    busy = tmp_path / f"mpicoded-{gone.pid}-0a0a0a"  # its maker in another PID namespace
    (busy / "h1").mkdir(parents=True)
    (busy / "h1" / "cgroup.procs").write_text(f"{os.getpid()}\n")
    (tmp_path / "cgroup.procs").write_text("")
    controller = Controller(1, tmp_path)
    assert sweep_stale(controller) == [dead]
    assert not dead.exists() and alive.exists() and other.exists() and busy.exists()
    (dead / "rank1").mkdir(parents=True)
    Throttle({1: 0.5}, controller=controller).create()  # a new run sweeps first
    assert not dead.exists()


def test_a_trace_of_slowdowns_becomes_windows_of_shares():
    """trace=FILE (the example the project ships): each rank's share is its base over its
    slowdown from a row's time to the next row's, its base again where the trace says 1."""
    from mpicoded import examples

    trace = Path(examples.__file__).parent / "slowdowns.csv"
    schedule = parse_schedule(f"workers=0.3,trace={trace}", 7)
    assert not schedule.static and schedule.keys == [1, 2, 3, 4, 5, 6]
    assert schedule.at(-1.0) == dict.fromkeys(range(1, 7), 0.3)  # before the clock starts
    assert schedule.at(1.0) == {**dict.fromkeys(range(1, 7), 0.3), 2: 0.015}
    assert schedule.at(4.0) == {**dict.fromkeys(range(1, 7), 0.3), 5: 0.015}
    assert schedule.at(8.2)[1] == pytest.approx(0.01) and schedule.at(8.2)[4] == pytest.approx(0.2)
    assert schedule.at(9.0) == dict.fromkeys(range(1, 7), 0.3)
    assert schedule.next_change(2.0) == 3.0


@pytest.mark.parametrize(("text", "message"), [
    ("1,2\n0,1\n", "the first line must be seconds,RANK"),
    ("seconds,2\n0,x\n", "line 2: not numbers"),
    ("seconds,2\n0,20\n0,1\n", "line 3: a time after the line before's, then 1 slowdowns >= 1"),
    ("seconds,2\n0,0.5\n", "line 2: a time after"),
    ("seconds,9\n0,2\n", "rank 9 is out of range"),
])
def test_a_bad_trace_names_its_line(tmp_path, text, message):
    path = tmp_path / "t.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        parse_schedule(f"trace={path}", 4)
    with pytest.raises(ValueError, match="No such file"):
        parse_schedule(f"trace={tmp_path / 'none.csv'}", 4)
