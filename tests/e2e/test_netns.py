"""A multi-host cluster on one machine (network namespaces, root only): training across hosts,
a slow link, a slow host (CPU quota), and a link cut under ULFM."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from mpicoded.throttle.cleanup import GROUP_PREFIX
from mpicoded.throttle.controller import ThrottleError, find_controller
from mpicoded.throttle.quota import quota_period

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "launch" / "netns-cluster.sh"

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("tc") is None,
    reason="needs root and iproute2 (ip, tc) to build network namespaces",
)


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=60,
                          check=check)


@pytest.fixture
def cluster():
    sh("down", check=False)
    up = sh("up", "3", check=False)
    if up.returncode != 0:
        pytest.skip(f"network namespaces are not available here: {up.stderr.strip()}")
    yield
    sh("down", check=False)


def run(ranks: int, *flags: str, timeout: float = 180, during=None):
    """Start a run across the hosts; ``during(proc)`` runs while it goes; kill by PID on
    timeout (mpirun may not exit while a link is down)."""
    proc = subprocess.Popen([str(SCRIPT), "run", str(ranks), *flags], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        if during is not None:
            during(proc)
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        sh("down", check=False)  # kills everything inside the namespaces by PID
        out, _ = proc.communicate()
        pytest.fail(f"netns run timed out after {timeout}s\n{out[-3000:]}")
    return proc.returncode, out


def metrics_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_training_across_three_hosts(cluster, tmp_path):
    metrics = tmp_path / "m.jsonl"
    rc, out = run(7, "--iterations", "6", "--samples", "1200", "--delay", "persistent",
                  "--task-time", "0.005", "--metrics", str(metrics), "--quiet")
    assert rc == 0, out[-3000:]
    rows = metrics_of(metrics)
    assert rows[-1]["record"] == "run" and rows[-1]["n_workers"] == 6
    assert rows[-1]["final_loss"] < rows[-1]["initial_loss"]


def test_slow_link_still_finishes(cluster, tmp_path):
    metrics = tmp_path / "m.jsonl"
    rc, out = run(7, "--slow-link", "h1:20mbit", "--iterations", "4", "--samples", "1200",
                  "--delay", "none", "--metrics", str(metrics), "--quiet")
    assert rc == 0, out[-3000:]
    assert metrics_of(metrics)[-1]["iterations"] == 4


def rank_groups(host: str, version: int) -> dict[int, str]:
    """MPI rank -> cpu cgroup of the ranks now running on ``host``."""
    groups = {}
    pids = subprocess.run(["ip", "netns", "pids", host], capture_output=True, text=True).stdout
    for pid in pids.split():
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
        except OSError:
            continue  # gone
        rank = [v.split(b"=")[1] for v in env if v.startswith(b"OMPI_COMM_WORLD_RANK=")]
        for line in lines:
            number, controllers, path = line.split(":", 2)
            if rank and (("cpu" in controllers.split(",")) if version == 1 else number == "0"):
                groups[int(rank[0])] = path
    return groups


def test_throttled_host(cluster, tmp_path):
    """--throttle h1=0.2: h1's ranks run in its cpu group, h2's do not; no group is left."""
    try:
        controller = find_controller()
    except ThrottleError as exc:
        pytest.skip(str(exc))
    metrics = tmp_path / "m.jsonl"
    seen: dict[str, dict[int, str]] = {"h1": {}, "h2": {}}

    def watch(proc):
        deadline = time.time() + 90
        while proc.poll() is None and time.time() < deadline and not (
                len(seen["h1"]) == 2 and len(seen["h2"]) == 2):  # 7 ranks by node: 1, 4 and 2, 5
            for host in seen:
                seen[host].update(rank_groups(host, controller.version))
            time.sleep(0.1)

    rc, out = run(7, "--throttle", "h1=0.2", "--iterations", "4", "--samples", "1200",
                  "--delay", "none", "--metrics", str(metrics), "--quiet", during=watch)
    assert rc == 0, out[-3000:]
    assert metrics_of(metrics)[-1]["iterations"] == 4
    assert sorted(seen["h1"]) == [1, 4] and sorted(seen["h2"]) == [2, 5], seen
    assert all(g.startswith(f"/{GROUP_PREFIX}") and g.endswith("/h1") for g in seen["h1"].values())
    assert not any(GROUP_PREFIX in g for g in seen["h2"].values()), seen
    assert list(controller.root.glob(f"{GROUP_PREFIX}*")) == []


def test_a_moving_host_throttle_changes_which_host_is_slow(cluster, tmp_path):
    """--throttle move=0.1/0.5/1: every 0.5 s a different one of h1, h2 is held to a tenth of a
    core, changed while the run goes on (its quota file, read during the run); nothing is left."""
    try:
        controller = find_controller()
    except ThrottleError as exc:
        pytest.skip(str(exc))
    quota = str(quota_period(0.1)[0])
    slow: list[str] = []

    def watch(proc):
        deadline = time.time() + 120
        while proc.poll() is None and time.time() < deadline:
            for group in controller.root.glob(f"{GROUP_PREFIX}held-*/h*"):
                name = "cpu.max" if controller.version == 2 else "cpu.cfs_quota_us"
                with contextlib.suppress(OSError):
                    if (group / name).read_text().split()[0] == quota and (
                            not slow or slow[-1] != group.name):
                        slow.append(group.name)
            time.sleep(0.05)

    metrics = tmp_path / "m.jsonl"
    rc, out = run(7, "--throttle", "move=0.1/0.5/1", "--iterations", "400", "--samples", "1200",
                  "--delay", "persistent", "--task-time", "0.005", "--metrics", str(metrics),
                  "--quiet", during=watch)
    assert rc == 0, out[-3000:]
    assert metrics_of(metrics)[-1]["iterations"] == 400
    assert set(slow) == {"h1", "h2"} and len(slow) >= 3, slow  # it moved, back and forth
    assert list(controller.root.glob(f"{GROUP_PREFIX}*")) == []


def test_link_cut_under_ulfm(cluster, tmp_path):
    """Host h2's link goes down mid-run: its ranks are declared dead (heartbeat detector), the
    run re-codes or tolerates them and finishes; the link comes back after the run, so that
    mpirun can exit."""
    metrics = tmp_path / "m.jsonl"

    def cut(proc):
        deadline = time.time() + 90
        while time.time() < deadline and not (metrics.exists() and metrics.stat().st_size):
            time.sleep(0.2)
        subprocess.run(["ip", "-n", "sw", "link", "set", "p2", "down"], check=True)
        # down until the run's end: a partition that heals while the run goes on lets the
        # cut-off side's reports of the other side's "deaths" through (docs/failures.md)
        deadline = time.time() + 120
        while time.time() < deadline and '"record": "run"' not in metrics.read_text():
            time.sleep(0.2)
        subprocess.run(["ip", "-n", "sw", "link", "set", "p2", "up"], check=True)

    rc, out = run(7, "--ft", "--code", "gfrc", "--stragglers", "2", "--iterations", "400",
                  "--delay", "persistent", "--task-time", "0.005", "--samples", "1200",
                  "--metrics", str(metrics), "--quiet", during=cut, timeout=240)
    rows = metrics_of(metrics)  # one writer: the cut-off ranks elected no master of their own
    assert rows[-1]["record"] == "run", out[-3000:]
    assert rows[-1]["failed_workers"] >= 1 and rows[-1]["iterations"] == 400
    assert not any(r["record"] == "failover" for r in rows) and rows[-1]["failovers"] == 0


def test_run_without_ranks_is_one_line_exit_2():
    done = sh("run", "--iterations", "10", check=False)
    assert done.returncode == 2
    assert done.stderr.strip() == ("netns-cluster: run RANKS [flags...]: RANKS must be a number "
                                   "of ranks, got '--iterations'")
