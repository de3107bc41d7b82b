"""Load splits for heterogeneous workers (paper 000): how many of an iteration's KΩ tasks each gets.

Worker p's time for κ tasks is c_p plus a sum of κ task times: mean c_p + κ m_p, variance κ v_p.
The optimal split equalises D_p(κ) = c_p + κ m_p + γ sqrt(κ v_p) over the workers it uses (the
paper's Theorem 2 with γ = 1; its formula is missing from the text; docs/architecture.md restates
it). Integer split: give the tasks one at a time to the worker whose D_p(κ_p + 1) is smallest,
which minimises the largest D_p exactly; a worker whose c_p alone exceeds the level gets none.
The continuous solution (level τ with Σ κ_p(τ) = KΩ, by bisection) is its check.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

import numpy as np

SPLITS = ("uniform", "optimal", "adaptive")


@dataclass(frozen=True)
class Moments:
    """Per-worker task-time mean m, variance v and per-iteration communication delay c."""

    m: np.ndarray
    v: np.ndarray
    c: np.ndarray

    def __post_init__(self) -> None:
        for name in ("m", "v", "c"):
            arr = np.asarray(getattr(self, name), dtype=np.float64)
            object.__setattr__(self, name, arr)
        if not (self.m.shape == self.v.shape == self.c.shape and self.m.ndim == 1):
            raise ValueError("m, v and c must be 1-D arrays of one length (one value a worker)")
        if not (np.all(self.m > 0) and np.all(self.v >= 0) and np.all(self.c >= 0)):
            raise ValueError("moments must have m > 0, v >= 0 and c >= 0 for every worker")

    @property
    def n_workers(self) -> int:
        return len(self.m)


def uniform_split(n_tasks: int, n_workers: int) -> np.ndarray:
    """n_tasks / n_workers each, rounded so the loads differ by at most one and sum to n_tasks."""
    base, extra = divmod(n_tasks, n_workers)
    return np.array([base + (w < extra) for w in range(n_workers)])


def finish_level(moments: Moments, loads: np.ndarray, gamma: float = 1.0) -> np.ndarray:
    """D_p(κ_p) for every worker (0 for a worker with no tasks)."""
    k = np.asarray(loads, dtype=np.float64)
    level = moments.c + k * moments.m + gamma * np.sqrt(k * moments.v)
    return np.where(k > 0, level, 0.0)


def optimal_split(n_tasks: int, moments: Moments, gamma: float = 1.0) -> np.ndarray:
    """Integer split minimising the largest D_p: greedy, one task at a time (a heap)."""
    if n_tasks < 0:
        raise ValueError(f"n_tasks={n_tasks} is out of range: allowed >= 0")
    m, v, c = moments.m, moments.v, moments.c
    loads = np.zeros(moments.n_workers, dtype=int)

    def next_level(p: int) -> float:
        k = loads[p] + 1
        return float(c[p] + k * m[p] + gamma * math.sqrt(k * v[p]))

    heap = [(next_level(p), p) for p in range(moments.n_workers)]
    heapq.heapify(heap)
    for _ in range(n_tasks):
        _, p = heapq.heappop(heap)
        loads[p] += 1
        heapq.heappush(heap, (next_level(p), p))
    return loads


def continuous_split(n_tasks: float, moments: Moments, gamma: float = 1.0) -> tuple[np.ndarray, float]:
    """Real-valued loads κ_p(τ) at the level τ where they sum to n_tasks, and τ (bisection).

    κ_p(τ) solves c_p + κ m_p + γ sqrt(κ v_p) = τ: a quadratic in sqrt(κ); 0 when τ <= c_p.
    """
    m, v, c = moments.m, moments.v, moments.c

    def loads_at(tau: float) -> np.ndarray:
        b = gamma * np.sqrt(v)
        room = np.maximum(tau - c, 0.0)
        root = (-b + np.sqrt(b * b + 4 * m * room)) / (2 * m)
        return cast(np.ndarray, root * root)

    low, high = 0.0, float(np.max(c) + n_tasks * np.max(m) + gamma * math.sqrt(n_tasks * np.max(v)))
    for _ in range(200):
        mid = 0.5 * (low + high)
        if loads_at(mid).sum() < n_tasks:
            low = mid
        else:
            high = mid
    return loads_at(high), high


def mismatch(moments: Moments, loads: np.ndarray, gamma: float = 1.0) -> float:
    """Variance of D_p over the workers that have tasks (0 when they all finish together)."""
    used = np.asarray(loads) > 0
    return float(np.var(finish_level(moments, loads, gamma)[used])) if used.any() else 0.0


def split_schedule(loads: np.ndarray, n_tasks: int | None = None) -> tuple[tuple[int, ...], ...]:
    """Worker p runs the next loads[p] task ids, in order: contiguous runs of 0..Σ loads - 1."""
    total = int(np.sum(loads))
    if n_tasks is not None and total != n_tasks:
        raise ValueError(f"loads sum to {total}, not to the {n_tasks} tasks")
    edges = np.concatenate([[0], np.cumsum(loads)])
    return tuple(tuple(range(int(a), int(b))) for a, b in zip(edges[:-1], edges[1:], strict=True))


@dataclass
class Candidate:
    """One (K, C, Ω) of the code-parameter search with its optimal split."""

    partitions: int
    complexity: float
    redundancy: float
    loads: np.ndarray
    mismatch: float
    level: float
    expected_iteration: float | None = None


def parameter_search(work: float, mu: np.ndarray, c: np.ndarray,
                     partitions: list[int], redundancies: list[float], gamma: float = 1.0,
                     simulate_iteration: Callable[[Candidate], float] | None = None
                     ) -> list[Candidate]:
    """Algorithm 1: over (K, C = work / K, Ω), the optimal split and its mismatch, best first.

    Task times are exponential with rate μ_p / C, so m_p = C / μ_p and v_p = m_p². If given,
    ``simulate_iteration(candidate)`` adds the simulator's expected iteration time beside each.
    """
    mu = np.asarray(mu, dtype=np.float64)
    out = []
    for k in partitions:
        complexity = work / k
        moments = Moments(complexity / mu, (complexity / mu) ** 2, np.asarray(c, dtype=float))
        for omega in redundancies:
            n_tasks = int(round(k * omega))
            loads = optimal_split(n_tasks, moments, gamma)
            level = float(finish_level(moments, loads, gamma).max())
            cand = Candidate(k, complexity, omega, loads, mismatch(moments, loads, gamma), level)
            if simulate_iteration is not None:
                cand.expected_iteration = simulate_iteration(cand)
            out.append(cand)
    return sorted(out, key=lambda cand: cand.mismatch)


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


class Splitter:
    """Decides each iteration's schedule: which of the code's tasks every worker runs.

    ``uniform`` and ``optimal`` (from declared moments) are fixed; ``adaptive`` starts uniform
    and re-splits from the Estimator after every iteration, so no one has to declare speeds.
    Every ``probe_every`` iterations each worker the split leaves idle gets one task (taken from
    the most loaded worker), so a worker that became faster is noticed. ``exclude`` takes a dead
    worker out: the load is split again among the living; ``for_survivors`` carries what is
    known of the living over to a re-coded run (``prior``: where an adaptive split starts).
    """

    probe_every = 10

    def __init__(self, kind: str, n_tasks: int, n_workers: int, declared: Moments | None = None,
                 gamma: float = 1.0, prior: Moments | None = None) -> None:
        if kind not in SPLITS:
            raise ValueError(f"split={kind!r} is unknown: allowed {list(SPLITS)}")
        if kind == "optimal" and declared is None:
            raise ValueError("split 'optimal' needs declared worker speeds (a --profile)")
        self.kind, self.n_tasks, self.n_workers, self.gamma = kind, n_tasks, n_workers, gamma
        self.declared, self.prior = declared, prior
        self.estimator = Estimator(n_workers) if kind == "adaptive" else None
        self.iterations = 0
        self.dead: set[int] = set()
        self.loads = self._split(prior if kind == "adaptive" else declared)

    def _split(self, moments: Moments | None) -> np.ndarray:
        """Loads for the living workers (zeros for the dead): optimal from ``moments``, else
        uniform."""
        live = np.array([w for w in range(self.n_workers) if w not in self.dead], dtype=int)
        loads = np.zeros(self.n_workers, dtype=int)
        if not len(live):
            return loads
        if moments is None:
            loads[live] = uniform_split(self.n_tasks, len(live))
        else:
            sub = Moments(moments.m[live], moments.v[live], moments.c[live])
            loads[live] = optimal_split(self.n_tasks, sub, self.gamma)
        return loads

    def schedule(self) -> tuple[tuple[int, ...], ...]:
        """The schedule for the next iteration."""
        return split_schedule(self.loads, self.n_tasks)

    def exclude(self, worker: int) -> None:
        """A worker died: split the load again among the living."""
        self.dead.add(worker)
        if self.estimator is not None:
            self.loads = self._split(self._estimates() if self.iterations else self.prior)
        else:
            self.loads = self._split(self.declared if self.kind == "optimal" else None)

    def partial(self, worker: int, fraction: float, seconds: float, key: object = None) -> None:
        """A worker's report of its purged work of iteration ``key`` (adaptive only; learnt at
        the next re-split): see ``Estimator.partial``."""
        if self.estimator is not None:
            self.estimator.partial(worker, fraction, seconds, key)

    def observe(self, arrivals: dict[int, list[float]], decoded_at: float,
                key: object = None) -> None:
        """After iteration ``key``: feed the estimator and re-split (adaptive only)."""
        if self.estimator is None:
            return
        assigned = {p: int(k) for p, k in enumerate(self.loads) if k}
        self.estimator.observe(arrivals, assigned, decoded_at, key)
        self.loads = self._split(self._estimates())
        self.iterations += 1
        if self.iterations % self.probe_every == 0:
            for p in np.flatnonzero(self.loads == 0):
                donor = int(np.argmax(self.loads))
                if p not in self.dead and self.loads[donor] > 1:
                    self.loads[donor] -= 1
                    self.loads[p] += 1

    def _estimates(self) -> Moments:
        assert self.estimator is not None
        return self.estimator.moments(fallback=self.prior)

    def for_survivors(self, live: list[int], n_tasks: int, scale: float) -> Splitter:
        """The split of a re-coded run on workers ``live`` (this split's indices, in their new
        order) with ``n_tasks`` tasks, each ``scale`` times the work of one now: what was declared
        or learnt about each survivor is kept, so an adaptive split does not start uniform."""
        known = self.declared
        if self.estimator is not None:
            known = self._estimates() if self.iterations else self.prior
        moved = None
        if known is not None:
            at = np.asarray(live, dtype=int)
            moved = Moments(known.m[at] * scale, known.v[at] * scale**2, known.c[at])
        if self.kind == "adaptive":
            return Splitter(self.kind, n_tasks, len(live), None, self.gamma, prior=moved)
        return Splitter(self.kind, n_tasks, len(live), moved, self.gamma)
