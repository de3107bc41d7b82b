"""Coding schemes: ``make_code(name, n_workers=..., **params)`` and ``available_codes()``."""

from __future__ import annotations

import inspect
from collections.abc import Callable

from ._base import Code, Decoder
from .cpgc import make_cpgc, make_mcc, make_ucmmc
from .cyclic import make_cyclic
from .decoders import GenericDecoder, IntervalDecoder, PeelingDecoder
from .frc import make_frc, make_gfrc
from .mds import make_mds
from .sparse import make_sparse
from .uncoded import make_uncoded

_REGISTRY: dict[str, Callable[..., Code]] = {
    "uncoded": make_uncoded,
    "frc": make_frc,
    "gfrc": make_gfrc,
    "cyclic": make_cyclic,
    "cpgc": make_cpgc,
    "ucmmc": make_ucmmc,
    "mcc": make_mcc,
    "mds": make_mds,
    "sparse": make_sparse,
}


def available_codes() -> list[str]:
    """Names accepted by ``make_code``."""
    return sorted(_REGISTRY)


def code_parameters(name: str) -> list[str]:
    """The parameters code ``name`` takes besides n_workers."""
    if name not in _REGISTRY:
        raise ValueError(f"code={name!r} is unknown: allowed {available_codes()}")
    return list(inspect.signature(_REGISTRY[name]).parameters)[1:]


def make_code(name: str, n_workers: int, **params: object) -> Code:
    """Build the code ``name`` for ``n_workers`` workers; bad names or parameters raise ValueError."""
    accepted = code_parameters(name)
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise ValueError(f"code {name!r} takes no parameter {unknown}: allowed {accepted}")
    return _REGISTRY[name](n_workers, **params)


__all__ = ["Code", "Decoder", "GenericDecoder", "IntervalDecoder", "PeelingDecoder",
           "available_codes", "code_parameters", "make_code"]
