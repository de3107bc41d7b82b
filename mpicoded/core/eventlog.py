"""The event log (``--events FILE``): a session's settings, then every event it handled with
the instructions it gave, one JSON line each (pure: it writes through the callable given).

Results' values, trace entries and theta are left out: no decision depends on them, so a log
replays (``replay``) through a fresh Session on the job's shape alone (``Shape``) and must give
the same instructions, line after line. A failover starts a new session: its settings line
follows, and the lines after it are that session's.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from ..balance.split import Moments
from ..balance.splitter import Splitter
from ..codes import make_code
from . import events as ev
from .session import Session
from .settings import Settings
from .shape import Shape

UNLOGGED = frozenset({"values", "value", "entries", "theta", "code", "pieces", "work",
                      "outcome"})
EVENTS: dict[str, type] = {cls.__name__: cls for cls in (
    ev.Begin, ev.Started, ev.JobArrived, ev.ResultArrived, ev.PartArrived, ev.ProgressReported,
    ev.TraceArrived,
    ev.Withheld, ev.WorkerLost, ev.WorkerFailed, ev.Tick, ev.StopAcknowledged, ev.LossComputed)}
VALUES = {"Report": ("loss",)}  # fields a replay cannot know (a loss decoded from the values)


def plain(value: Any) -> Any:
    """``value`` as JSON can hold it."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)
                if f.name not in UNLOGGED}
    if isinstance(value, set | frozenset):
        return sorted(plain(v) for v in value)
    if isinstance(value, list | tuple | np.ndarray):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, np.integer | np.floating | np.bool_):
        return value.item()
    return value


def summary(item: Any) -> dict[str, Any]:
    """An event's or an instruction's line: its type and its logged fields."""
    return {"type": type(item).__name__, **plain(item)}


def event_from(row: dict[str, Any]) -> ev.Event:
    """The event a line logged (values and entries left out: None)."""
    fields = {k: v for k, v in row.items() if k != "type"}
    kind = EVENTS[row["type"]]
    if kind is ev.ResultArrived:
        fields["values"] = None
    if kind is ev.PartArrived:
        fields["value"] = None
    for name in ("counters", "tasks"):
        if name in fields and kind is not ev.ResultArrived:
            fields[name] = tuple(fields[name])
    event: ev.Event = kind(**fields)
    return event


def settings_line(s: Settings, shape: dict[str, Any]) -> dict[str, Any]:
    """What a replay needs to build the same session: ``s`` and the job's ``shape``."""
    split = s.splitter
    return {"session": {
        "code": {"name": s.code.name, "n_workers": s.code.n_workers,
                 "built_with": plain(s.code.built_with)},
        "shape": plain(shape), "pieces": s.pieces is not None, "chunk_rows": s.chunk_rows,
        "fit_chunks": s.fit_chunks, "tolerance": s.tolerance, "purge": s.purge,
        "iterations": s.iterations, "jobs": s.jobs,
        "resume": None if s.resume is None else list(s.resume[:2]),
        "loss_every": s.loss_every, "checkpoint_every": s.checkpoint_every,
        "iteration_timeout": s.iteration_timeout, "trace": s.trace, "run_rows": s.run_rows,
        "linger": s.linger, "eval_every": s.eval_every, "reduce": s.reduce, "relay": s.relay,
        "value_size": s.value_size, "nodes": list(s.nodes),
        "adopt": None if s.adopt is None else plain(s.adopt),
        "splitter": None if split is None else {
            "kind": split.kind, "gamma": split.gamma,
            "declared": None if split.declared is None else plain(vars(split.declared))}}}


def settings_from(line: dict[str, Any]) -> Settings:
    """The settings a log's settings line describes, over the job's shape."""
    s = line["session"]
    code = make_code(s["code"]["name"], s["code"]["n_workers"], **s["code"]["built_with"])
    shape = Shape(code, **s["shape"])
    split = s["splitter"]
    splitter = None if split is None else Splitter(
        split["kind"], code.n_tasks, code.n_workers,
        None if split["declared"] is None else Moments(
            **{k: np.asarray(v) for k, v in split["declared"].items()}), split["gamma"])
    adopt = None
    if s["adopt"] is not None:
        survivors, epoch, recode = s["adopt"]
        adopt = ({int(k): v for k, v in survivors.items()}, epoch, recode)
    resume = None if s["resume"] is None else (*s["resume"], shape.theta0())
    pieces = shape.pieces(s["chunk_rows"], fit=s["fit_chunks"]) if s["pieces"] else None
    return Settings(code, shape, pieces, s["chunk_rows"], s["fit_chunks"], s["tolerance"],
                    s["purge"], s["iterations"], s["jobs"], resume, s["loss_every"],
                    s["checkpoint_every"], s["iteration_timeout"], splitter, s["trace"], adopt,
                    s.get("run_rows", 0), s.get("linger", False), s.get("eval_every"),
                    s.get("reduce", False), s.get("relay", False), s.get("value_size", 0),
                    tuple(s.get("nodes", ())))


class EventLog:
    """The observer that writes the log: the settings first, then a line an event."""

    def __init__(self, write: Callable[[str], object], settings: Settings,
                 shape: dict[str, Any]) -> None:
        self.write = write
        write(json.dumps(settings_line(settings, shape)) + "\n")

    def __call__(self, event: ev.Event, out: Iterable[ev.Instruction]) -> None:
        self.write(json.dumps({"event": summary(event), "out": [summary(i) for i in out]})
                   + "\n")


class Mismatch(AssertionError):
    """A replayed session gave other instructions than the log holds."""


def comparable(row: dict[str, Any]) -> dict[str, Any]:
    """An instruction's line less what a replay cannot know, as JSON reads it back."""
    row = json.loads(json.dumps(row))
    for name in VALUES.get(row["type"], ()):
        row.pop(name, None)
    return row


def as_logged(row: dict[str, Any], logged: dict[str, Any], item: object) -> dict[str, Any]:
    """``row``, the line of ``item`` (an instruction), less the fields a log written before
    they were added lacks, where they hold their default (the instruction the log has could
    only have had it); so too in the records it carries (a Report's)."""
    if not dataclasses.is_dataclass(item) or not logged:
        return row
    defaults = {f.name: f.default for f in dataclasses.fields(item)
                if f.default is not dataclasses.MISSING}
    kept = {}
    for k, v in row.items():
        inner = getattr(item, k, None)
        if isinstance(v, dict) and isinstance(logged.get(k), dict):
            v = as_logged(v, logged[k], inner)
        if k in logged or k not in defaults or plain(defaults[k]) != v:
            kept[k] = v
    return kept


def replay(lines: Iterable[str]) -> Iterator[int]:
    """Feed every logged event to a fresh Session (one a settings line); yield the number of
    each line that matched; Mismatch at the first that does not, ValueError (or KeyError) if
    the lines are not an event log."""
    session: Session | None = None
    for number, text in enumerate(lines, 1):
        if not text.strip():
            continue
        line = json.loads(text)
        if "session" in line:
            session = Session(settings_from(line))
            continue
        if session is None:
            raise ValueError(f"line {number}: an event before any settings line")
        want = [comparable(i) for i in line["out"]]
        out = session.handle(event_from(line["event"]))
        logged = itertools.chain(want, itertools.repeat({}))
        got = [as_logged(comparable(summary(i)), w, i) for i, w in zip(out, logged, strict=False)]
        if got != want:
            raise Mismatch(f"line {number}: {line['event']['type']} {line['event']}\n"
                           f"  the log says: {want}\n  replayed:     {got}")
        yield number
