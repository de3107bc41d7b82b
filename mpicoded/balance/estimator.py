"""The online Estimator: each worker's task-time moments learnt from when its results arrive."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import numpy as np

from .split import Moments


@dataclass
class Estimator:
    """Online estimates of each worker's m_p, v_p, c_p from the task times the master sees.

    Per iteration the master reports, for each worker, the arrival times of its results measured
    from the ITERATE, and the time the iteration was decoded (when its unfinished task was cut
    off). The first result carries c_p + T; later gaps are single task times. Purged work is
    censored: the mean uses the exponential MLE, exposure / completions, which counts the time
    spent on the cut-off task. Censoring also keeps a slow worker's long gaps out of sight, so its
    own gap variance is biased low; the variance is instead v_p = CV² m_p², with the squared
    coefficient of variation CV² pooled over all gaps (dominated by the fast, rarely censored
    workers; it is 1 for the paper's exponential task times). Statistics decay by ``forget``
    each iteration so a worker whose speed changes is followed.
    """

    n_workers: int
    forget: float = 0.95
    exposure: np.ndarray = field(init=False)
    completions: np.ndarray = field(init=False)
    gap_sum: np.ndarray = field(init=False)
    gap_sq: np.ndarray = field(init=False)
    gap_n: np.ndarray = field(init=False)
    first_sum: np.ndarray = field(init=False)
    first_n: np.ndarray = field(init=False)
    decode_sum: np.ndarray = field(init=False)  # decode times of the iterations seen by first_*
    silent_sum: np.ndarray = field(init=False)  # iterations a busy worker sent nothing: length
    silent_n: np.ndarray = field(init=False)  # ... and how many

    _STATS = ("exposure", "completions", "gap_sum", "gap_sq", "gap_n", "first_sum", "first_n",
              "decode_sum", "silent_sum", "silent_n")

    def __post_init__(self) -> None:
        for name in self._STATS:
            setattr(self, name, np.zeros(self.n_workers))
        # the last iteration's cut-off task per worker, as the master timed it: ("silent", D)
        # or ("exposure", D - last arrival); a worker's own report of it replaces it (partial)
        self._cut: dict[int, tuple[str, float]] = {}
        self._cut_key: object = None  # which iteration _cut is about

    def observe(self, arrivals: dict[int, list[float]], assigned: dict[int, int],
                decoded_at: float, key: object = None) -> None:
        """One iteration (named ``key``): result times per worker, tasks assigned, and the
        decode time.

        Only workers that had tasks learn (and forget); an idle worker keeps its estimates."""
        busy = [p for p, n in assigned.items() if n]
        for name in self._STATS:
            getattr(self, name)[busy] *= self.forget
        self._cut, self._cut_key = {}, key
        for p, n_assigned in assigned.items():
            times = sorted(arrivals.get(p, []))
            if not times:  # busy the whole iteration without a result: censored after c_p
                self.silent_sum[p] += decoded_at
                self.silent_n[p] += 1
                self._cut[p] = ("silent", decoded_at)
                continue
            gaps = np.diff(times)
            self.first_sum[p] += times[0]
            self.first_n[p] += 1
            self.decode_sum[p] += decoded_at
            self.gap_sum[p] += gaps.sum()
            self.gap_sq[p] += (gaps**2).sum()
            self.gap_n[p] += len(gaps)
            cut_off = max(0.0, decoded_at - times[-1]) if len(times) < n_assigned else 0.0
            self.exposure[p] += gaps.sum() + cut_off
            self.completions[p] += len(gaps)
            if cut_off:
                self._cut[p] = ("exposure", cut_off)

    def partial(self, worker: int, fraction: float, seconds: float, key: object = None) -> None:
        """A worker's own account of the work of iteration ``key`` that the master timed as cut
        off by the purge (the task under way; with one message a worker, every task since the
        iteration began): ``seconds`` spent and ``fraction`` tasks done (a cut task's share
        counts 0 when cut during an injected, memoryless delay). It replaces the master's
        censored view, so a slow CPU that never finishes a task before the decode still yields
        a speed sample, whatever c_p is estimated to be. A report about another iteration than
        the last observed one is ignored."""
        if key != self._cut_key:
            return
        cut = self._cut.pop(worker, None)
        if cut is None:
            return
        kind, amount = cut
        if kind == "silent":
            self.silent_sum[worker] -= amount
            self.silent_n[worker] -= 1
        else:
            self.exposure[worker] -= amount
        self.exposure[worker] += seconds
        self.completions[worker] += fraction

    def _shift(self, m: np.ndarray, cv2: float) -> np.ndarray:
        """c_p from the first results' times. A first result is seen only if c_p + T arrives
        before the decode at D, so its mean is c_p + E[T | T <= D - c_p]; with exponential T that
        is solved for c_p by a fixed-point iteration. The truncation shortens E[T] by as much
        as T varies: fully for exponential task times (CV² = 1), not at all for deterministic
        ones (CV² = 0, real compute), so the correction is scaled by min(CV², 1)."""
        first = self.first_sum / self.first_n
        decode = self.decode_sum / self.first_n
        weight = min(max(cv2, 0.0), 1.0)
        c = np.maximum(first - m, 0.0)
        for _ in range(30):
            room = np.maximum(decode - c, 1e-12)
            ratio = np.minimum(room / m, 700.0)
            truncated_mean = m - weight * room * np.exp(-ratio) / (1.0 - np.exp(-ratio))
            c = np.clip(first - truncated_mean, 0.0, first)
        return cast(np.ndarray, c)

    def _cv2(self) -> float:
        """The squared coefficient of variation of task times, pooled over the workers' gaps
        (1, the exponential's, until there are any)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            gap_mean = self.gap_sum / self.gap_n
            cv2_each = (self.gap_sq / self.gap_n - gap_mean**2) / gap_mean**2
        usable = np.isfinite(cv2_each) & (self.gap_n > 1)
        if not usable.any():
            return 1.0
        return max(float(np.average(cv2_each[usable], weights=self.gap_n[usable])), 0.0)

    def moments(self, fallback: Moments | None = None) -> Moments:
        """Current estimates; workers with too little data get the fallback (or the median)."""
        cv2 = self._cv2()
        with np.errstate(invalid="ignore", divide="ignore"):
            # silent iterations add their time past c_p to the exposure (c_p from the first
            # results, refined once); a worker that never finished a task gets its whole
            # exposure as the mean
            # the first task of an iteration runs from c_p to the first result (or, silent, to
            # the decode): it joins the exposure once c_p is known, so iterate a few times
            m = self.exposure / _positive(self.completions)
            for _ in range(5):
                c_now = np.nan_to_num(self._shift(m, cv2), nan=0.0)
                first = np.maximum(self.first_sum - self.first_n * c_now, 0.0)
                silent = np.maximum(self.silent_sum - self.silent_n * c_now, 0.0)
                m = ((self.exposure + first + silent)
                     / _positive(self.completions + self.first_n))
            v = cv2 * m**2
            c = self._shift(m, cv2)
        known = (self.exposure + self.silent_sum > 0) & np.isfinite(m) & (m > 0)
        if fallback is not None:
            m = np.where(known, m, fallback.m)
            v = np.where(known & np.isfinite(v), v, fallback.v)
            c = np.where(known & np.isfinite(c), c, fallback.c)
        else:
            default = float(np.median(m[known])) if known.any() else 1.0
            m = np.where(known, m, default)
            v = np.where(known & np.isfinite(v), v, default**2)
            c = np.where(known & np.isfinite(c), c, 0.0)
        return Moments(m, v, c)


def _positive(count: np.ndarray) -> np.ndarray:
    """Completion counts as divisors: decayed or partial counts below 1 are kept as they are
    (exposure over completions is the rate's estimate), none at all divides by 1."""
    return np.where(count > 0, count, 1.0)
