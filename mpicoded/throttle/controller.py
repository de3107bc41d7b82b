"""The cgroup cpu controller: found in /proc/self/mounts (v1 or v2), a group's quota written."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..host import affinity
from .quota import PERIOD_US, quota_period


class ThrottleError(RuntimeError):
    """No usable cpu controller (not root, none mounted or writable), or a group operation failed."""


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def controller_candidates(mounts: str) -> list[tuple[int, Path]]:
    """(version, mount point) of every cpu controller in a /proc/self/mounts text, cgroup v1
    first (on a hybrid host the cpu controller is bound to v1, and v2 lists no cpu)."""
    v1: list[tuple[int, Path]] = []
    v2: list[tuple[int, Path]] = []
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        point, fstype, options = Path(_unescape(fields[1])), fields[2], fields[3].split(",")
        if fstype == "cgroup" and "cpu" in options:
            v1.append((1, point))
        elif fstype == "cgroup2":
            v2.append((2, point))
    return v1 + v2


@dataclass(frozen=True)
class Controller:
    """A mounted, writable cpu controller: cgroup v1 (``cpu.cfs_quota_us``) or v2 (``cpu.max``)."""

    version: int
    root: Path

    def usable(self) -> bool:
        """Its quota file is there and the hierarchy is writable (root, mounted rw)."""
        if self.version == 1:
            found = (self.root / "cpu.cfs_quota_us").exists()
        else:
            try:
                found = "cpu" in (self.root / "cgroup.controllers").read_text().split()
            except OSError:
                found = False
        return found and os.access(self.root, os.W_OK)

    def enable(self, group: Path) -> None:
        """v2: give ``group``'s children a cpu.max (``+cpu`` in its ``cgroup.subtree_control``)."""
        if self.version == 2:
            control = group / "cgroup.subtree_control"
            if "cpu" not in control.read_text().split():
                control.write_text("+cpu")

    def limit(self, group: Path, fraction: float | None) -> None:
        """Hold ``group`` to ``fraction`` of one core (None: lift the limit)."""
        if fraction is None:
            if self.version == 1:
                (group / "cpu.cfs_quota_us").write_text("-1")
            else:
                (group / "cpu.max").write_text(f"max {PERIOD_US}")
            return
        quota, period = quota_period(fraction)
        if self.version == 1:
            (group / "cpu.cfs_period_us").write_text(str(period))
            (group / "cpu.cfs_quota_us").write_text(str(quota))
        else:
            (group / "cpu.max").write_text(f"{quota} {period}")


def find_controller(mounts: str | None = None) -> Controller:
    """The first usable cpu controller in /proc/self/mounts, or a one-line ThrottleError."""
    if os.geteuid() != 0:
        raise ThrottleError("--throttle needs root: it creates cpu cgroups")
    if mounts is None:
        mounts = Path("/proc/self/mounts").read_text()
    for version, point in controller_candidates(mounts):
        controller = Controller(version, point)
        if controller.usable():
            return controller
    raise ThrottleError("--throttle: no writable cgroup cpu controller is mounted (cgroup v1 "
                        "cpu.cfs_quota_us or cgroup v2 cpu.max)")


def held_to_quota(mounts: str | None = None, cgroups: str | None = None,
                  read: Callable[[Path], str] = lambda path: path.read_text(),
                  cores: int | None = None) -> bool:
    """Whether this process (``cgroups``: its /proc/self/cgroup) runs under a CPU quota of
    fewer cores than it may run on (``cores``: its affinity's), its own group's or an
    ancestor's (a container's): cgroup v1 cpu.cfs_quota_us over cpu.cfs_period_us, v2
    cpu.max. False where nothing can be read."""
    try:
        mounts = Path("/proc/self/mounts").read_text() if mounts is None else mounts
        cgroups = Path("/proc/self/cgroup").read_text() if cgroups is None else cgroups
    except OSError:
        return False
    cores = len(affinity()) if cores is None else cores
    paths: dict[int, str] = {}  # version -> this process's group path in that hierarchy
    for line in cgroups.splitlines():
        number, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if number == "0" and not controllers:
            paths.setdefault(2, path)
        elif "cpu" in controllers.split(","):
            paths[1] = path
    for version, point in controller_candidates(mounts):
        if version not in paths:
            continue
        group = point / paths[version].lstrip("/")
        for where in (group, *group.parents):
            if not where.is_relative_to(point):
                break
            share = _share(where, version, read)
            if share is not None and share < cores:
                return True
        return False
    return False


def _share(group: Path, version: int, read: Callable[[Path], str]) -> float | None:
    """The cores ``group``'s quota allows (None: no quota, or none readable)."""
    try:
        if version == 2:
            quota, period = (read(group / "cpu.max").split() + ["100000"])[:2]
        else:
            quota = read(group / "cpu.cfs_quota_us").strip()
            try:
                period = read(group / "cpu.cfs_period_us").strip()
            except OSError:
                period = "100000"
        return None if quota in ("max", "-1") else int(quota) / int(period)
    except (OSError, ValueError):
        return None
