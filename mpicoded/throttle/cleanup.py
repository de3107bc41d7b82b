"""Removing cpu groups: a run's own when it ends, and those that dead runs left behind."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import time
from pathlib import Path

from .controller import Controller, ThrottleError

GROUP_PREFIX = "mpicoded-"


def _evacuate(group: Path, to: Path) -> None:
    """Move every process still in ``group`` to the procs file ``to``."""
    try:
        pids = (group / "cgroup.procs").read_text().split()
    except FileNotFoundError:
        return
    for pid in pids:
        try:
            to.write_text(pid)
        except OSError:  # gone already (ESRCH), or it shows up as EBUSY on rmdir below
            pass


def remove_groups(path: Path, controller: Controller, patience: float = 5.0) -> None:
    """Remove a parent group and its children, moving what still runs in them to the root group.
    Retries while exiting processes keep a group busy; ThrottleError if one is still there."""
    if not path.is_dir():
        return
    root_procs = controller.root / "cgroup.procs"
    failed: list[str] = []
    for group in [*(p for p in path.iterdir() if p.is_dir()), path]:
        deadline = time.monotonic() + patience
        while True:
            _evacuate(group, root_procs)
            try:
                group.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError as exc:
                if exc.errno == errno.EBUSY and time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                failed.append(f"{group}: {exc.strerror}")
                break
    if failed:
        raise ThrottleError(f"--throttle: could not remove {'; '.join(failed)}")


STALE_NAME = re.compile(rf"{GROUP_PREFIX}(\d+)-[0-9a-f]+")  # the default names: creator's pid


def _empty(group: Path) -> bool:
    """No process in ``group`` or its children."""
    for procs in [group / "cgroup.procs", *group.glob("*/cgroup.procs")]:
        with contextlib.suppress(FileNotFoundError):
            if procs.read_text().split():
                return False
    return True


def sweep_stale(controller: Controller) -> list[Path]:
    """Remove the groups that a process now gone made and never removed (a run killed with
    SIGKILL leaves its groups behind): those named after a PID that no longer exists, with no
    process left in them (a creator in another PID namespace looks gone; its ranks do not).
    Returns what was removed; a group that cannot be removed stays, silently."""
    removed = []
    for path in controller.root.glob(f"{GROUP_PREFIX}*"):
        match = STALE_NAME.fullmatch(path.name)
        if not (match and path.is_dir() and _empty(path)):
            continue
        try:
            os.kill(int(match.group(1)), 0)
            continue  # its maker still runs
        except ProcessLookupError:
            pass
        except PermissionError:  # someone else's, alive
            continue
        with contextlib.suppress(ThrottleError):
            remove_groups(path, controller, patience=0.5)
            removed.append(path)
    return removed
