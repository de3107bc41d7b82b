"""The live dashboard of a run: ``python -m mpicoded.dashboard RUN.jsonl`` serves its plots and
a Prometheus ``/metrics`` on one port. Needs the ``dashboard`` extra (Bokeh, prometheus-client);
this module itself imports neither, so that a run can check for them and start one."""

from __future__ import annotations

import importlib.util
import os
import select
import subprocess
import sys
import tempfile
import threading
import time

EXTRA = "pip install 'mpicoded[dashboard]'"


def missing_extra() -> str | None:
    """None if the dashboard can run, else one line saying what to install."""
    missing = [name for name in ("bokeh", "prometheus_client")
               if importlib.util.find_spec(name) is None]
    if not missing:
        return None
    return f"the dashboard needs {' and '.join(missing)}, from the dashboard extra: {EXTRA}"


class Dashboard:
    """A dashboard following ``path`` on 127.0.0.1:``port``, in a process of its own (started
    beside rank 0 by ``--dashboard``; stopped when the run ends, and by itself if this
    process dies first)."""

    def __init__(self, path: str, port: int, timeout: float = 60.0) -> None:
        self.path = path
        self.errors = tempfile.TemporaryFile(mode="w+")  # a file: a full pipe would block it
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mpicoded.dashboard", path, "--port", str(port),
             "--exit-with", str(os.getpid())],
            stdout=subprocess.PIPE, stderr=self.errors, text=True,
            env={k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_"))})
        self.url = self._first_line(timeout)
        # what it prints later is read and dropped, so that it never waits on a full pipe
        assert self.process.stdout is not None
        threading.Thread(target=self.process.stdout.read, daemon=True).start()

    def _first_line(self, timeout: float) -> str:
        """The URL the dashboard prints first; RuntimeError with its error if it fails."""
        stdout = self.process.stdout
        assert stdout is not None
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if select.select([stdout], [], [], 0.2)[0]:
                line = stdout.readline().strip()
                if line.startswith("http"):
                    return line
            if self.process.poll() is not None:
                self.errors.seek(0)
                error = self.errors.read().strip().splitlines()
                raise RuntimeError(error[-1] if error else "the dashboard exited at start")
        self.stop()
        raise RuntimeError(f"the dashboard printed no URL in {timeout:g} s")

    def stop(self) -> None:
        """End the dashboard process."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.errors.close()
