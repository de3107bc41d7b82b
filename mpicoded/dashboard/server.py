"""The dashboard server: the Bokeh page at ``/`` and Prometheus' ``/metrics`` on one port."""

from __future__ import annotations

import os
import socket

from bokeh.application import Application
from bokeh.application.handlers.function import FunctionHandler
from bokeh.document import Document
from bokeh.server.server import Server
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from tornado.ioloop import PeriodicCallback
from tornado.web import RequestHandler

from .figures import Panels
from .metrics import RunCollector
from .runlog import RunLog

POLL_MS = 500  # how often the file is read for new records
PUSH_MS = 1000  # how often each open page is sent them
FOLLOW_S = 20.0  # the live task stream shows the newest this many seconds


class MetricsHandler(RequestHandler):  # type: ignore[misc, unused-ignore]  # Any without it
    """GET /metrics: the run's counters in Prometheus' text format, as of this request."""

    def initialize(self, log: RunLog, registry: CollectorRegistry) -> None:
        self.log, self.registry = log, registry

    def get(self) -> None:
        self.log.poll()
        self.set_header("Content-Type", CONTENT_TYPE_LATEST)
        self.write(generate_latest(self.registry))


def origins(host: str, port: int) -> list[str]:
    """Where a page may be opened from (its websocket's origin): the loopback names, and the
    host's own names when bound elsewhere."""
    names = {"127.0.0.1", "localhost", host}
    if host not in ("127.0.0.1", "localhost"):
        names |= {socket.gethostname(), socket.getfqdn()}
    return sorted(f"{name}:{port}" for name in names)


def make_server(path: str, port: int, host: str = "127.0.0.1") -> tuple[Server, str]:
    """A started server following ``path`` (port 0: any free one), and its page's URL."""
    log = RunLog(path)
    log.poll()
    registry = CollectorRegistry(auto_describe=True)
    registry.register(RunCollector(log))
    title = os.path.basename(path)

    def page(doc: Document) -> None:
        panels = Panels(title, follow_s=FOLLOW_S)
        panels.update(log)
        doc.title = f"mpicoded: {title}"
        doc.add_root(panels.layout)
        doc.add_periodic_callback(lambda: panels.update(log), PUSH_MS)

    sock = socket.socket()  # port 0: take a free port now, hand the number to Bokeh
    if port == 0:
        sock.bind((host, 0))
        port = sock.getsockname()[1]
    sock.close()
    server = Server({"/": Application(FunctionHandler(page))}, port=port, address=host,
                    allow_websocket_origin=origins(host, port),
                    extra_patterns=[("/metrics", MetricsHandler,
                                     {"log": log, "registry": registry})])
    server.start()

    def poll() -> None:
        log.poll()

    PeriodicCallback(poll, POLL_MS).start()
    shown = "127.0.0.1" if host in ("127.0.0.1", "0.0.0.0") else host
    return server, f"http://{shown}:{port}/"
