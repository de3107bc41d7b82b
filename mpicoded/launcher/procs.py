"""mpirun's process tree as /proc and ps show it: its ranks' PIDs, what still runs under it."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path


def parent_pid(pid: int) -> int:
    """PPid of ``pid`` (0 when it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat.rsplit(")", 1)[1].split()[1])  # the field after the state


def rank_pids(proc_pid: int) -> dict[int, int]:
    """MPI rank -> PID of the python processes started by the mpirun ``proc_pid`` (its own
    process tree only, never another run's on the same machine)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        ancestor = int(entry.name)
        while ancestor > 1 and ancestor != proc_pid:
            ancestor = parent_pid(ancestor)
        if ancestor != proc_pid:
            continue
        for var in env:
            if var.startswith((b"OMPI_COMM_WORLD_RANK=", b"PMI_RANK=")):
                found[int(var.split(b"=")[1])] = int(entry.name)
    return found


def every_rank_pid(proc_pid: int, ranks: int, timeout: float = 30.0) -> dict[int, int]:
    """``rank_pids`` once all ``ranks`` are found (a rank seen before its exec has mpirun's
    environment, not its own); what was found by ``timeout`` otherwise."""
    deadline = time.monotonic() + timeout
    while len(found := rank_pids(proc_pid)) < ranks and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def descendants(pid: int) -> str:
    """``ps`` lines of a process and everything under it (state, kernel wait, command): what a
    hung run was doing when it was given up on."""
    try:
        table = subprocess.run(["ps", "-eww", "-o", "pid=,ppid=,stat=,wchan:24=,etime=,args="],
                               capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    rows = [line.split(None, 2) + [line] for line in table.splitlines() if line.strip()]
    keep = {pid}
    for _ in range(len(rows)):  # parents precede children in no particular order: repeat
        grown = {int(r[0]) for r in rows if int(r[1]) in keep} - keep
        if not grown:
            break
        keep |= grown
    return "\n".join(r[-1] for r in rows if int(r[0]) in keep)
