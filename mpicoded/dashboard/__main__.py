"""python -m mpicoded.dashboard RUN.jsonl [--port 8787] [--host 127.0.0.1]: the live dashboard
of a run's metrics file (in progress or finished); its URL is the first line printed."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from . import missing_extra

if TYPE_CHECKING:
    from bokeh.server.server import Server


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mpicoded.dashboard", description=__doc__)
    p.add_argument("metrics", help="the run's metrics file (--metrics); followed as it grows")
    p.add_argument("--port", type=int, default=8787, help="default 8787; 0: any free port")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind; default 127.0.0.1 (this machine only)")
    p.add_argument("--exit-with", type=int, default=None, metavar="PID",
                   help="stop when process PID ends (train --dashboard passes rank 0's)")
    args = p.parse_args(argv)
    missing = missing_extra()
    if missing:
        print(f"mpicoded.dashboard: {missing}", file=sys.stderr)
        return 2
    if not 0 <= args.port < 65536:
        p.error(f"--port {args.port} is out of range: allowed 0..65535")
    from .server import make_server

    try:
        server, url = make_server(args.metrics, args.port, args.host)
    except OSError as exc:
        print(f"mpicoded.dashboard: cannot serve on {args.host}:{args.port}: {exc.strerror}",
              file=sys.stderr)
        return 2
    print(url, flush=True)
    print(f"following {args.metrics}; /metrics for Prometheus; Ctrl-C to stop", flush=True)
    if args.exit_with is not None:
        watch(server, args.exit_with)
    try:
        server.io_loop.start()
    except KeyboardInterrupt:
        pass
    return 0


def watch(server: Server, pid: int) -> None:
    """Stop ``server`` once process ``pid`` is gone (checked every second): a dashboard started
    beside a run ends with it, even when the run is aborted or killed."""
    from tornado.ioloop import PeriodicCallback

    def check() -> None:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            server.io_loop.stop()

    PeriodicCallback(check, 1000).start()


if __name__ == "__main__":
    sys.exit(main())
