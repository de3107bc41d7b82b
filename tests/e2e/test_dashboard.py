"""The live dashboard of a running job, in a real browser: ``train --dashboard`` starts it, and
headless Chromium (Debian's package, driven by Playwright; no browser download) loads the page.
A dashboard started beside a run ends with the process that started it."""

from __future__ import annotations

import os
import re
import select
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from mpicoded.launcher.process import finish_mpi, kill_group, start_mpi

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium here (Debian: apt-get install chromium; ci/test.sh "
    "installs it when run as root)")
ARTIFACTS = Path(os.environ.get("MPICODED_ARTIFACTS", "test-artifacts"))
WORKERS = 6


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def line_matching(proc, pattern: str, timeout: float) -> tuple[re.Match, str]:
    """Read the run's output until a line matches ``pattern``; the match and what was read."""
    seen = ""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if select.select([proc.stdout], [], [], 0.5)[0]:
            line = proc.stdout.readline()
            seen += line
            if (found := re.search(pattern, line)) is not None:
                return found, seen
            if not line:  # the run ended
                break
    raise AssertionError(f"no line matching {pattern!r} in:\n{seen[-3000:]}")


def counter(url: str, name: str) -> float:
    text = urllib.request.urlopen(url + "metrics", timeout=10).read().decode()
    return float(re.search(rf"^{name} (\S+)$", text, re.M).group(1))


TASKS = "Bokeh.documents[0].get_model_by_name('tasks').data"


def task_rows(page) -> tuple[int, int]:
    """(tasks in the page's task stream, distinct worker ranks among them)."""
    script = "(() => { const d = " + TASKS + "; return [d.rank.length, new Set(d.rank).size]; })()"
    return tuple(page.evaluate(script))


@needs_chromium
def test_live_dashboard_in_chromium(tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    port = free_port()
    metrics = tmp_path / "run.jsonl"
    proc = start_mpi(WORKERS + 1, ["-m", "mpicoded.train", "--dashboard", str(port), "--metrics",
                                   str(metrics), "--code", "frc", "--stragglers", "1",
                                   "--iterations", "150", "--samples", "1800", "--features",
                                   "8"])
    try:
        found, seen = line_matching(proc, r"\[mpicoded\] dashboard: (http://\S+)", 90)
        url = found.group(1)
        assert url == f"http://127.0.0.1:{port}/"
        before = counter(url, "mpicoded_iterations_total")
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"http://localhost:{port}/")  # the other name the page answers to
            page.wait_for_function(f"window.Bokeh && Bokeh.documents.length > 0 && "
                                   f"{TASKS}.rank.length > 0", timeout=60_000)
            first, workers = task_rows(page)
            assert workers == WORKERS
            page.wait_for_timeout(4000)  # the page is pushed what the run wrote meanwhile
            second, workers = task_rows(page)
            assert second > first and workers == WORKERS
            assert counter(url, "mpicoded_iterations_total") > before  # the run goes on
            assert counter(url, "mpicoded_results_received_total") > 0
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)
            browser.close()
        done = finish_mpi(proc, timeout=180)
    except BaseException:
        kill_group(proc)
        raise
    assert done.returncode == 0, (seen + done.output)[-3000:]
    assert "dashboard stopped" in done.output
    assert (ARTIFACTS / "dashboard.png").stat().st_size > 10_000


def test_a_dashboard_ends_with_the_process_it_serves(tmp_path):
    pytest.importorskip("bokeh", reason="the dashboard extra is not installed")
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dashboard = subprocess.Popen(
        [sys.executable, "-m", "mpicoded.dashboard", str(tmp_path / "run.jsonl"), "--port", "0",
         "--exit-with", str(parent.pid)], stdout=subprocess.PIPE, text=True)
    try:
        url = dashboard.stdout.readline().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", url)  # the URL comes first
        assert b"mpicoded_iterations_total 0.0" in urllib.request.urlopen(
            url + "metrics", timeout=10).read()
        parent.kill()
        parent.wait()
        assert dashboard.wait(timeout=20) == 0
    finally:
        for p in (parent, dashboard):
            p.kill()
            p.wait()
