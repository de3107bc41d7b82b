"""Checkpoints of a training run: theta, where the run is, the job's own state (an optimizer's)
and a fingerprint of its settings.

Written atomically (a temporary file in the same directory, then os.replace), so a master killed
while writing leaves the previous checkpoint intact. The run draws no random numbers of its own
(delays come from a keyed stream, data from the seed), so (job, iteration, theta) and the
arrival times are the whole state: a resumed run meets the same delays and ends with the same
theta as an uninterrupted one.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

FILE = "checkpoint.npz"


@dataclass(frozen=True)
class Checkpoint:
    """Resume point: the next (job, iteration) to run, with theta as it was before it."""

    job: int
    iteration: int
    theta: np.ndarray
    fingerprint: str
    state: np.ndarray | None = None  # the job's state beside theta (``GradientJob.state``)


def fingerprint(settings: dict[str, Any]) -> str:
    """What must match for a checkpoint to be resumed: the flags that shape the computation."""
    return json.dumps(settings, sort_keys=True, default=str)


def save(directory: str | Path, point: Checkpoint) -> None:
    arrays: dict[str, Any] = {"theta": point.theta, "job": point.job,
                              "iteration": point.iteration,
                              "fingerprint": np.array(point.fingerprint)}
    if point.state is not None:
        arrays["state"] = point.state
    write_atomically(Path(directory) / FILE, lambda f: np.savez(f, **arrays))


def write_atomically(path: str | Path, write: Callable[[BinaryIO], object]) -> None:
    """``write(file)`` into a temporary file beside ``path``, synced, then renamed over it: a
    reader never sees half a file, and a crash leaves the previous one intact."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-", suffix=path.suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load(directory: str | Path, expected: str) -> Checkpoint:
    """The checkpoint in ``directory``; ValueError if missing, unreadable or from another run."""
    path = Path(directory) / FILE
    if not path.is_file():
        raise ValueError(f"--resume: no checkpoint in {directory}")
    try:
        with np.load(path) as f:
            point = Checkpoint(int(f["job"]), int(f["iteration"]), np.array(f["theta"]),
                               str(f["fingerprint"]),
                               np.array(f["state"]) if "state" in f.files else None)
    except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise ValueError(f"--resume: {path} cannot be read: {exc}") from None
    if point.fingerprint != expected:
        raise ValueError(f"--resume: {path} was written by a run with other settings; "
                         "resume with the same flags")
    return point
