"""``python -m mpicoded.replay EVENTS.jsonl``: feed a run's event log (``--events``) to a fresh
Session and check that it gives the same instructions, event after event; exit 1 at the first
that differs, naming the line, the event, and both lists."""

from __future__ import annotations

import argparse
import sys

from .core.eventlog import Mismatch, replay


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mpicoded.replay", description=__doc__)
    p.add_argument("events", help="a JSON lines file written by mpicoded.train --events")
    args = p.parse_args(argv)
    try:
        with open(args.events) as f:
            events = sum(1 for _ in replay(f))
    except OSError as exc:
        print(f"mpicoded.replay: error: {args.events}: {exc.strerror}", file=sys.stderr)
        return 2
    except (ValueError, KeyError, TypeError) as exc:
        print(f"mpicoded.replay: error: {args.events}: not an event log: {exc}", file=sys.stderr)
        return 2
    except Mismatch as exc:
        print(f"mpicoded.replay: {args.events}: the session decides otherwise now, {exc}",
              file=sys.stderr)
        return 1
    print(f"{args.events}: {events} events replayed, every instruction the same")
    return 0


if __name__ == "__main__":
    sys.exit(main())
