"""Coding schemes: ``make_code(name, n_workers=..., **params)`` and ``available_codes()``."""

from __future__ import annotations

import inspect
from collections.abc import Callable

from ._base import Code, Decoder, combined
from .cpgc import make_cpgc, make_mcc, make_ucmmc
from .cyclic import make_cyclic
from .decoders import GenericDecoder, IntervalDecoder, PeelingDecoder
from .frc import make_frc, make_gfrc
from .mds import make_mds
from .sparse import make_sparse
from .spread import make_spread
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
    "spread": make_spread,
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
    code = _REGISTRY[name](n_workers, **params)
    code.built_with = dict(params)
    return code


def rebuild(code: Code, n_workers: int) -> Code:
    """``code`` re-built for ``n_workers`` surviving workers: its own family with the parameters
    it was built with (stragglers or load lowered until the family exists for them), else GFRC,
    which exists for any (n, s), keeping s when it can. With as many workers as before (the code
    itself could not decode) GFRC at once: the same family would give the same code."""
    if n_workers < code.n_workers:
        given = dict(code.built_with)
        attempts = [given]
        for key in ("stragglers", "load"):
            if given.get(key) is not None:
                attempts += [{**given, key: v} for v in range(min(int(given[key]), n_workers), -1, -1)]
        for params in attempts:
            try:
                return make_code(code.name, n_workers, **params)
            except ValueError:
                continue
    stragglers = max(0, min(int(code.params.get("stragglers", 1)), n_workers - 1))
    return make_code("gfrc", n_workers, stragglers=stragglers)


def rescaled_tolerance(tolerance: int, old: Code, new: Code) -> int:
    """The same fraction of partitions that an iteration may miss, counted for ``new`` (0 if its
    decoder cannot leave partitions out)."""
    m = int(tolerance / old.n_partitions * new.n_partitions + 1e-9)
    try:
        new.decoder(m)
    except ValueError:
        return 0
    return m


__all__ = ["Code", "Decoder", "combined", "GenericDecoder", "IntervalDecoder", "PeelingDecoder",
           "available_codes", "code_parameters", "make_code", "rebuild", "rescaled_tolerance"]
