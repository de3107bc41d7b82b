"""A share of one core as a cgroup cpu quota and period, within the kernel's limits."""

from __future__ import annotations

import math

PERIOD_US = 20_000  # a short period: a throttled process waits at most ~20 ms for its next slice
MIN_QUOTA_US = 1_000  # the kernel refuses a quota below 1 ms
MAX_PERIOD_US = 1_000_000  # and a period above 1 s
MIN_FRACTION = MIN_QUOTA_US / MAX_PERIOD_US


def check_fraction(fraction: float, item: str) -> float:
    """``fraction`` of one core, in [0.001, 1] (a 1 ms quota in the longest, 1 s, period)."""
    if not (math.isfinite(fraction) and MIN_FRACTION <= fraction <= 1):
        raise ValueError(f"--throttle {item!r}: FRACTION must be a share of one core in "
                         f"[{MIN_FRACTION:g}, 1], got {fraction:g}")
    return float(fraction)


def quota_period(fraction: float) -> tuple[int, int]:
    """(quota, period) in microseconds for ``fraction`` of one core: a 20 ms period, stretched
    (up to 1 s) when the quota would fall below the kernel's 1 ms minimum."""
    check_fraction(fraction, f"FRACTION={fraction}")
    period = PERIOD_US
    quota = round(fraction * period)
    if quota < MIN_QUOTA_US:
        period = min(MAX_PERIOD_US, math.ceil(MIN_QUOTA_US / fraction))
        quota = max(MIN_QUOTA_US, round(fraction * period))
    return quota, period
