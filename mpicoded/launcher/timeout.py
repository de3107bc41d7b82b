"""A hung mpirun: its ranks asked where they are (SIGUSR1), and the MPIRunTimeout that says so."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections import Counter

from .procs import rank_pids

WHERE_WAIT_S = 2.0  # how long a hung run's ranks have to say where they are before the kill
_WHERE = re.compile(r"^\[mpicoded\] rank \d+ \(pid \d+\): ")  # train's answer to SIGUSR1
_THREAD = re.compile(r"^(Current thread|Thread) 0x[0-9a-f]+ ")  # faulthandler's stack headers
# faulthandler's frame lines ("line 3 in f"; a traceback's say "line 3, in f")
_FRAME = re.compile(r'^  File ".*", line \d+ in |^  <no Python frame>')


class MPIRunTimeout(RuntimeError):
    """mpirun did not finish in time; its process group was killed. Its ranks were asked first
    where they were (SIGUSR1): ``output`` ends with their stacks and ``mpicoded.train``'s
    one-line answers, which the message shows apart from the run's own last output."""

    def __init__(self, timeout: float, output: str, processes: str = "") -> None:
        own_lines, found = _split(output.splitlines())
        where = [line for line in own_lines if _WHERE.match(line)]
        own = "\n".join(line for line in own_lines if not _WHERE.match(line))
        stacks = "\n".join(f"{n} thread(s):\n{stack}" for stack, n in found.items())
        super().__init__(f"mpirun timed out after {timeout:.0f}s; last output:\n{own[-3000:]}"
                         + (f"\nstill running then:\n{processes}" if processes else "")
                         + ("\nwhere the ranks were (SIGUSR1):\n" + "\n".join(sorted(
                             where, key=_rank_of)) if where else "")
                         + (f"\ntheir stacks, the same ones counted once:\n{stacks}"
                            if stacks else ""))
        self.output = output
        self.processes = processes


def _rank_of(line: str) -> int:
    return int(line.split()[2])


def _split(lines: list[str]) -> tuple[list[str], Counter[str]]:
    """The run's own lines, and faulthandler's stacks among them, each (thread id left out)
    with how many threads were in it: twenty idle workers make one entry, not twenty. A stack
    is a thread header and the frame lines right after it; a traceback the run printed itself
    stays in its own lines."""
    own: list[str] = []
    found: Counter[str] = Counter()
    stack: list[str] | None = None
    for line in [*lines, ""]:
        if _FRAME.match(line):  # ranks dump at once: a frame may follow another rank's line
            stack = [] if stack is None else stack
            stack.append(line)
            continue
        if stack:
            found["\n".join(stack)] += 1
        stack = [] if _THREAD.match(line) else None
        if stack is None:
            own.append(line)
    return own[:-1], found


def ask_where(proc: subprocess.Popen[str]) -> str | None:
    """SIGUSR1 every rank of the mpirun ``proc`` and read its output for WHERE_WAIT_S while
    they answer: a rank of ``mpicoded.train`` prints its stack and what it waits for (a
    program that does not catch the signal dies of it, a moment before it would be killed
    anyway). Reading meanwhile keeps mpirun from blocking on a full pipe. Returns mpirun's
    whole output if it ended meanwhile, else None (the rest is read later)."""
    pids = rank_pids(proc.pid)
    for pid in pids.values():
        try:
            os.kill(pid, signal.SIGUSR1)
        except (ProcessLookupError, PermissionError):  # gone, or its PID taken by another's
            pass
    if not pids:
        return None
    try:
        out, _ = proc.communicate(timeout=WHERE_WAIT_S)
    except subprocess.TimeoutExpired:  # what was read is kept for the next communicate
        return None
    return out or ""
