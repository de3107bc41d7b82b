"""Coding schemes: ``make_code(name, n_workers=..., **params)`` and ``available_codes()``."""

from __future__ import annotations

from collections.abc import Callable

from ._base import Code, Decoder, GenericDecoder
from .cyclic import make_cyclic
from .frc import make_frc
from .uncoded import make_uncoded

_REGISTRY: dict[str, Callable[..., Code]] = {
    "uncoded": make_uncoded,
    "frc": make_frc,
    "cyclic": make_cyclic,
}


def available_codes() -> list[str]:
    """Names accepted by ``make_code``."""
    return sorted(_REGISTRY)


def make_code(name: str, n_workers: int, **params: object) -> Code:
    """Build the code ``name`` for ``n_workers`` workers; bad names or parameters raise ValueError."""
    if name not in _REGISTRY:
        raise ValueError(f"code={name!r} is unknown: allowed {available_codes()}")
    factory = _REGISTRY[name]
    accepted = factory.__code__.co_varnames[1 : factory.__code__.co_argcount]
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise ValueError(f"code {name!r} takes no parameter {unknown}: allowed {list(accepted)}")
    return factory(n_workers, **params)


__all__ = ["Code", "Decoder", "GenericDecoder", "available_codes", "make_code"]
