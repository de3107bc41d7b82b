"""The scheme a run gets without ``--code``, for each kind of job: the one whose worst case over
the benches' straggler patterns is the lowest, taken from ``MEASURED`` (the runs behind each
number are in docs/benchmarks.md, "The default scheme")."""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType

from .kinds import GradientJob, MatVecJob

# kind of job -> scheme -> worst time over the patterns, relative to uncoded with nobody slow
# (numpy gradient, linear, matrix-vector: ``bench straggler-tax --settings capped --job logreg,
# linreg, pagerank``, none, fixed,
# moving, two fixed and stalls, the worse of 7 and 21 ranks) or to DDP with nobody slow
# (PyTorch: ``bench ddp --patterns none,slow,stalls``, time to the target loss)
MEASURED: MappingProxyType[str, MappingProxyType[str, float]] = MappingProxyType({
    "gradient": MappingProxyType({"spread s=2 partial": 1.59, "gfrc s=2 partial": 1.80,
                                  "frc s=2 partial": 1.69}),
    "linear": MappingProxyType({"gfrc s=2": 0.70, "frc s=2": 0.72, "mds s=2": 1.03,
                                "spread s=2": 1.80}),
    "torch": MappingProxyType({"gfrc s=2 partial": 1.45, "spread s=2 partial": 1.64,
                               "frc s=1": 1.66}),
    "matvec": MappingProxyType({"spread s=2 partial": 1.59, "spread s=2": 2.70, "mds s=3": 3.22,
                                "mds s=2": 3.78, "mds s=2 partial": 4.35}),
})

_SCHEME = re.compile(r"(?P<code>[a-z]+)(?: s=(?P<s>\d+))?(?P<partial> partial)?")


@dataclass(frozen=True)
class Scheme:
    """A code, the stragglers it is built for and whether partial work is on, as the benches
    name them ("spread s=2 partial")."""

    code: str
    stragglers: int | None
    partial: bool

    @classmethod
    def parse(cls, name: str) -> Scheme:
        match = _SCHEME.fullmatch(name)
        if match is None:
            raise ValueError(f"scheme {name!r}: expected CODE [s=N] [partial]")
        s = match["s"]
        return cls(match["code"], None if s is None else int(s), bool(match["partial"]))

    def __str__(self) -> str:
        s = "" if self.stragglers is None else f" s={self.stragglers}"
        return f"{self.code}{s}{' partial' if self.partial else ''}"


def table_for(job: object) -> str:
    """The MEASURED table of ``job``: its kind's (``measured_as``), "linear" for a gradient
    job linear in theta (coded on its data, where partial work does not apply)."""
    if isinstance(job, GradientJob):
        return "linear" if job.linear and job.measured_as == "gradient" else job.measured_as
    if isinstance(job, MatVecJob):
        return job.measured_as
    raise TypeError(f"{type(job).__name__} is not a job")


def default_scheme(kind: str) -> Scheme:
    """The measured scheme with the lowest worst case for ``kind`` (a key of MEASURED)."""
    table = MEASURED[kind]
    return Scheme.parse(min(table, key=table.__getitem__))
