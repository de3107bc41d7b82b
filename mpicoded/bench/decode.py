"""Decoding speed: per-iteration decode time against n_workers, no MPI."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np

from ..codes import Code, make_code
from .common import table

DECODE_CASES = (  # (code, parameters from n, largest n)
    ("gfrc", lambda n: {"stragglers": max(1, n // 10)}, 1000),
    ("cpgc", lambda n: {"load": 3}, 1000),
    ("cyclic", lambda n: {"stragglers": max(1, n // 10)}, 200),
    ("sparse", lambda n: {"redundancy": 1.25, "degree": 3}, 200),
)


def arrival_order(code: Code, rng: np.random.Generator) -> list[int]:
    """Task results in the order they would reach the master under paper 001's delays: each
    worker draws E ~ Exp(mean 0.1) an iteration and each of its tasks takes 0.01 + E."""
    finish = []
    for tasks in code.schedule:
        step = 0.01 + rng.exponential(0.1)
        finish += [((i + 1) * step, t) for i, t in enumerate(tasks)]
    return [t for _, t in sorted(finish)]


def bench_decode(args: argparse.Namespace) -> dict[str, Any]:
    rng = np.random.default_rng(args.seed)
    rows, out = [], {}
    for name, params_of, largest in DECODE_CASES:
        for n in (n for n in (20, 50, 100, 200, 500, 1000) if n <= largest):
            code = make_code(name, n, **params_of(n))
            values = rng.standard_normal((code.n_tasks, 10))
            times, used = [], []
            for _ in range(args.iterations):
                order = arrival_order(code, rng)
                start = time.perf_counter()
                dec = code.decoder()
                for t in order:
                    if dec.add(t, values[t]):
                        break
                dec.result()
                times.append(time.perf_counter() - start)
                used.append(dec.results_used)
            mean_ms = 1e3 * float(np.mean(times))
            out[f"{name}/{n}"] = {"decoder": code.decoder_cls.__name__, "ms": mean_ms,
                                  "results_used": float(np.mean(used)), "n_tasks": code.n_tasks}
            rows.append([name, str(n), code.decoder_cls.__name__, str(code.n_tasks),
                         f"{np.mean(used):.0f}", f"{mean_ms:.2f}"])
            print(f"[bench] decode {name} n={n}: {mean_ms:.2f} ms", file=sys.stderr, flush=True)
    print(f"decode: mean per-iteration decode time (add every arriving result until ready, then "
          f"result(), 10-value results), {args.iterations} iterations each")
    print(table(["code", "n_workers", "decoder", "tasks", "results used", "ms / iteration"], rows))
    return out
