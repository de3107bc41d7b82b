"""The simulator at scale: 10,000 gfrc workers, paper 001's delays; events per second."""

from __future__ import annotations

import argparse
import time
from typing import Any

from ..codes import make_code
from ..delays import DelayModel
from ..sim import simulate
from .common import table


def bench_sim_scale(args: argparse.Namespace) -> dict[str, Any]:
    rows, out = [], {}
    for stragglers in (1, 100, 1000):
        start = time.perf_counter()
        code = make_code("gfrc", 10000, stragglers=stragglers)
        built = time.perf_counter() - start
        res = simulate(code, DelayModel("seed001", seed=args.seed), args.iterations)
        out[f"s={stragglers}"] = {"build_s": built, "simulate_s": res.elapsed_s,
                                  "task_events": res.task_events, "results": res.events,
                                  "task_events_per_s": res.task_events / res.elapsed_s}
        rows.append([str(stragglers), f"{built:.2f}", f"{res.elapsed_s:.2f}",
                     str(res.task_events), str(res.events),
                     f"{res.task_events / res.elapsed_s:,.0f}",
                     f"{res.mean('wall_s') * 1e3:.1f}"])
    print(f"sim-scale: gfrc on 10,000 workers, {args.iterations} iterations, seed001 delays")
    print(table(["stragglers", "build s", "simulate s", "task events", "results decoded",
                 "task events / s", "mean iteration ms"], rows))
    return out
