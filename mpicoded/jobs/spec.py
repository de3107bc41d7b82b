"""``--job MODULE:NAME`` or ``--job path/to/file.py:NAME``: a user's job, built on every rank."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import cast

from .kinds import AnyJob
from .registry import job_kind


class JobSpecError(ValueError):
    """A --job value that names no job: one line on rank 0, exit status 2."""


def _module(where: str) -> ModuleType:
    if where.endswith(".py"):
        path = Path(where)
        if not path.is_file():
            raise JobSpecError(f"--job {where}: no such file")
        name = f"mpicoded_user_{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise JobSpecError(f"--job {where}: cannot be loaded as Python")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # lets pickle and dataclasses find the module's classes
        spec.loader.exec_module(module)
        return module
    try:
        return importlib.import_module(where)
    except ModuleNotFoundError as exc:
        raise JobSpecError(f"--job {where}: no module named {exc.name!r}") from None


def build_job(spec: str) -> AnyJob:
    """The job ``spec`` names: NAME is a job class or a callable returning a job, called with no
    arguments. JobSpecError (a ValueError) says what is wrong in one line."""
    where, sep, name = spec.rpartition(":")
    if not sep or not where or not name:
        raise JobSpecError(f"--job {spec!r}: expected a built-in job name, MODULE:NAME or "
                           "path/to/file.py:NAME")
    module = _module(where)
    factory = getattr(module, name, None)
    if factory is None:
        raise JobSpecError(f"--job {spec}: {where} has no attribute {name!r}")
    if not callable(factory):
        raise JobSpecError(f"--job {spec}: {name} is not a job class or a function")
    job = factory()
    try:
        job_kind(job)
    except TypeError as exc:
        raise JobSpecError(f"--job {spec}: {name}() returned a {type(job).__name__}, not a job "
                           f"({str(exc).partition(': ')[2]})") from None
    return cast(AnyJob, job)
