"""Whether a process runs under a CPU quota, read from its cgroup (v1 and v2, its own group's
or an ancestor's): ``--wait auto`` then sleeps instead of polling."""

from __future__ import annotations

from pathlib import Path

import pytest

from mpicoded.throttle.controller import held_to_quota

V1 = "cgroup /sys/fs/cgroup/cpu cgroup rw,nosuid,cpu 0 0\n"
V2 = "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0\n"


def files(table: dict[str, str]):
    def read(path: Path) -> str:
        if str(path) not in table:
            raise FileNotFoundError(path)
        return table[str(path)]
    return read


@pytest.mark.parametrize(("mounts", "cgroups", "table", "held"), [
    (V1, "1:cpu:/mpicoded-1/rank2\n0::/\n",
     {"/sys/fs/cgroup/cpu/mpicoded-1/rank2/cpu.cfs_quota_us": "6000\n",
      "/sys/fs/cgroup/cpu/cpu.cfs_quota_us": "-1\n"}, True),
    (V1, "1:cpu:/\n", {"/sys/fs/cgroup/cpu/cpu.cfs_quota_us": "-1\n"}, False),
    (V2, "0::/pod/rank1\n", {"/sys/fs/cgroup/pod/rank1/cpu.max": "max 100000\n",
                             "/sys/fs/cgroup/pod/cpu.max": "150000 100000\n"}, True),  # a container's
    (V2, "0::/user.slice\n", {"/sys/fs/cgroup/user.slice/cpu.max": "max 100000\n"}, False),
    (V2, "0::/x\n", {}, False),  # nothing readable
    (V2, "0::/pod\n", {"/sys/fs/cgroup/pod/cpu.max": "200000 100000\n"}, False),  # 2 of 2
    (V1, "1:cpu:/big\n", {"/sys/fs/cgroup/cpu/big/cpu.cfs_quota_us": "100000\n",
                          "/sys/fs/cgroup/cpu/big/cpu.cfs_period_us": "25000\n"}, False),
    (V1, "1:cpu:/c\n", {"/sys/fs/cgroup/cpu/c/cpu.cfs_quota_us": "100000\n",
                        "/sys/fs/cgroup/cpu/c/cpu.cfs_period_us": "100000\n"}, True),
])
def test_a_quota_is_found_on_the_group_or_an_ancestor(mounts, cgroups, table, held):
    """On two cores: a quota of fewer holds the process; one of two or more (four cores a
    period of 25 ms) does not."""
    assert held_to_quota(mounts, cgroups, files(table), cores=2) is held
