"""``python -m mpicoded.throttle create|follow|remove``: the host groups of netns-cluster.sh."""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from .cleanup import GROUP_PREFIX, remove_groups
from .controller import Controller, ThrottleError, find_controller
from .groups import Throttle
from .schedule import parse_host_schedule

FOLLOW_POLL_S = 0.2  # how often ``follow`` looks whether it should end


def main(argv: Sequence[str] | None = None) -> int:
    """The host throttle of ``launch/netns-cluster.sh``: ``create`` prints the new parent group's
    directory, ``follow`` applies a schedule's changes to it until SIGTERM, ``remove`` ends it:

        python -m mpicoded.throttle create --hosts 3 h1=0.25,h2=0.5   # prints the parent directory
        python -m mpicoded.throttle follow --hosts 3 DIR move=0.05/0.4  # the schedule, until SIGTERM
        python -m mpicoded.throttle remove DIR     # moves what is left out, removes the groups
    """
    parser = argparse.ArgumentParser(prog="python -m mpicoded.throttle",
                                     description="cpu groups for the hosts h0..h{N-1}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, what in (("create", "make the groups and print their parent directory"),
                       ("follow", "apply the schedule's changes to DIR until SIGTERM or SIGINT"),
                       ("remove", "move what is left out of DIR and remove its groups")):
        command = sub.add_parser(name, help=what)
        if name != "create":
            command.add_argument("dir", metavar="DIR", type=Path)
        if name != "remove":
            command.add_argument("--hosts", type=int, required=True, help="hosts h0..h{N-1}")
            command.add_argument("spec", metavar="SPEC", help="HOST=FRACTION, "
                                 "HOST=FRACTION@START-END, workers=FRACTION, "
                                 "move=FRACTION/PERIOD[/SEED], "
                                 "stalls=PROBABILITY/PERIOD/LOW-HIGH[/SEED], comma-separated")
    args = parser.parse_args(argv)
    try:
        if args.command == "remove":
            controller = find_controller()
            held(args.dir, controller)
            remove_groups(args.dir, controller)
            return 0
        schedule = parse_host_schedule(args.spec, args.hosts)
        if args.command == "create":
            # outlives this process by design (``remove DIR`` ends it): not named after its PID,
            # so that no sweep takes it for a dead run's
            throttle = Throttle({}, name=f"{GROUP_PREFIX}held-{secrets.token_hex(3)}",
                                schedule=schedule).create()
            print(throttle.path)
            return 0
        controller = find_controller()
        held(args.dir, controller)
        if not schedule.static:
            stopped: list[int] = []  # a plain flag: an Event's lock could deadlock a handler
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda signum, _: stopped.append(signum))
            throttle = Throttle({}, controller=controller, name=args.dir.name,
                                schedule=schedule)
            parent = os.getppid()
            throttle.follow()
            # until told, or until the groups or the launching shell are gone (SIGKILLed)
            while not stopped and args.dir.is_dir() and os.getppid() == parent:
                time.sleep(FOLLOW_POLL_S)
            throttle.stop()
    except (ValueError, ThrottleError) as exc:
        print(f"mpicoded.throttle: error: {exc}", file=sys.stderr)
        return 2
    return 0


def held(path: Path, controller: Controller) -> None:
    """``path`` is a parent group this module made (ThrottleError if not)."""
    if path.parent != controller.root or not path.name.startswith(GROUP_PREFIX):
        raise ThrottleError(f"{path} is not a {GROUP_PREFIX}* group under {controller.root}")


if __name__ == "__main__":
    sys.exit(main())
