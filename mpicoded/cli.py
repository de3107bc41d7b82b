"""The ``mpicoded`` command: one entry point for the tools that are also ``python -m`` modules.

``mpicoded SUBCOMMAND ARGS...`` runs that module's ``main(ARGS)``; each subcommand keeps its own
``--help``. ``train`` runs on every rank, so it goes under mpirun (``mpirun -n 21 mpicoded
train``) or through ``mpicoded launch -n 21 -- -m mpicoded.train``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from . import __version__

# subcommand -> (module with main(argv), what it does)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "train": ("mpicoded.train", "a coded job on every rank of mpirun (rank 0 the master)"),
    "launch": ("mpicoded.launcher.__main__", "mpirun with the right flags, --ft and --throttle"),
    "bench": ("mpicoded.bench", "side-by-side benchmarks (straggler-tax, paper001, ...)"),
    "report": ("mpicoded.report", "a metrics file's iterations, tasks and trace, summed up"),
    "replay": ("mpicoded.replay", "a run's event log fed to a fresh session, checked"),
    "dashboard": ("mpicoded.dashboard.__main__", "a live web page and Prometheus metrics of a run"),
    "cdc": ("mpicoded.cdc.__main__", "coded MapReduce shuffle for nodes of unequal storage"),
    "throttle": ("mpicoded.throttle.__main__", "cpu groups of netns hosts (create, follow, remove)"),
}


def usage() -> str:
    width = max(map(len, SUBCOMMANDS))
    lines = [f"  {name:<{width}}  {what}" for name, (_, what) in SUBCOMMANDS.items()]
    return ("usage: mpicoded [--version] SUBCOMMAND [ARGS...]\n\n"
            "Straggler-resilient coded distributed computing over MPI.\n\nsubcommands:\n"
            + "\n".join(lines)
            + "\n\n`mpicoded SUBCOMMAND --help` tells a subcommand's own arguments.\n")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:  # a usage error, as argparse's own commands treat a missing argument
        print(usage(), end="", file=sys.stderr)
        return 2
    if args[0] in ("-h", "--help"):
        print(usage(), end="")
        return 0
    if args[0] == "--version":
        print(f"mpicoded {__version__}")
        return 0
    name, rest = args[0], args[1:]
    if name not in SUBCOMMANDS:
        print(f"mpicoded: error: no subcommand {name!r}; choose from {', '.join(SUBCOMMANDS)}",
              file=sys.stderr)
        return 2
    module = importlib.import_module(SUBCOMMANDS[name][0])
    try:
        return int(module.main(rest) or 0)
    except SystemExit as exc:  # argparse's --help and usage errors, sys.exit("message")
        if isinstance(exc.code, int) or exc.code is None:
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1
