"""Finding the processes of one mpirun run: its ranks' PIDs, within its own process tree."""

from __future__ import annotations

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
            if var.startswith(b"OMPI_COMM_WORLD_RANK="):
                found[int(var.split(b"=")[1])] = int(entry.name)
    return found
