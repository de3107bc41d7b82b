"""``bench ddp``: the same PyTorch model and data trained by PyTorch DDP (gloo, CPU, one process a
worker) and by mpicoded (a master and as many workers), full-batch or in mini-batches, with no
straggler, with one worker held at ``--small-fraction`` of the others' share of a core (cgroups,
root) and, asked for (``--patterns none,slow,stalls``), under the straggler-tax bench's short
random stalls; every process capped at ``--cap`` of a core as machines of one size. Per run:
time a step, makespan, time to the target (DDP's after 90% of its steps with no straggler: the
training loss full-batch, the held-out accuracy in mini-batches) and the straggler tax (the time
with the straggler over the same system's without). Both compute each step's exact gradient
over the same rows, so they follow one curve; only time differs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

from ..throttle.groups import Throttle
from ..throttle.quota import check_fraction
from ..throttle.schedule import Key, Schedule, parse_stalls
from .common import needs_quotas, table, train_run, worst_case
from .tax import (
    SCHEMES,
    STALL_PERIOD_S,
    STALL_PROBABILITY,
    STALL_SLOWDOWN,
    chosen,
    spread,
)

DDP_SCHEMES = ["uncoded", "frc s=1", "gfrc s=2 partial"]  # the default of --schemes
PATTERNS = ("none", "slow", "stalls")
DEFAULT_PATTERNS = "none,slow"
TIMEOUT_S = 900
TARGET_AT = 0.9  # the target: DDP's with no straggler after this share of its steps
# a loss within this of the target reaches it: both sides' float32 losses, summed in other
# orders, differ in their last digits at the same θ (1e-5 is the exactness goal's)
TARGET_RTOL = 1e-5


# a scheme's name may end in these words: how results and θ travel (default: auto)
PATHS = {"gather": ["--reduce", "off"], "reduce": ["--reduce", "on"],
         "direct": ["--relay", "off"], "relay": ["--relay", "on"]}


def scheme_flags(name: str) -> list[str]:
    """A scheme's flags: "NAME reduce direct" is NAME's with --reduce on --relay off."""
    words = name.split(" ")
    paths: list[str] = []
    while " ".join(words) not in SCHEMES and len(words) > 1 and words[-1] in PATHS:
        paths = [*PATHS[words.pop()], *paths]
    base = " ".join(words)
    if base not in SCHEMES:
        raise SystemExit(f"ddp --schemes {name!r}: a scheme ({', '.join(SCHEMES)}) and then "
                         f"any of {', '.join(PATHS)}")
    return [*SCHEMES[base], *paths]


def shares(world: int, cap: float, fraction: float, pattern: str, first: int) -> Schedule:
    """Every process ``first``.. ``first + world - 1`` at ``cap``; ``slow``: the second of them
    at ``fraction`` of that from the clock's start (the first step) on; ``stalls``: the
    straggler-tax bench's mild spread and short random stalls, the same on both sides."""
    check_fraction(cap, f"--cap {cap}")
    if pattern == "stalls":
        base: dict[Key, float] = {first + i: share
                                  for i, share in enumerate(spread(cap, world, seed=0))}
        stalls = parse_stalls(f"{STALL_PROBABILITY:g}/{STALL_PERIOD_S:g}/{STALL_SLOWDOWN}/0")
        return Schedule(base, workers=tuple(base), stalls=stalls)
    base = {first + i: cap for i in range(world)}
    windows = ((first + 1, check_fraction(cap * fraction, f"--cap x --small-fraction = "
                                          f"{cap * fraction:g}"), 0.0, math.inf),) \
        if pattern == "slow" else ()
    return Schedule(base, windows, workers=tuple(base))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_ddp(world: int, steps: int, schedule: Schedule, env: dict[str, str],
            batched: bool) -> dict[str, Any]:
    """One DDP run of ``world`` processes, each in its cpu group; rank 0's log, parsed: its
    curve of the loss, or (``batched``) of the held-out accuracy."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "ddp.jsonl"
        throttle = Throttle({}, schedule=dataclasses.replace(schedule, clock=str(log))).create()
        procs = []
        outs = [Path(tmp) / f"rank{rank}.out" for rank in range(world)]  # files: no pipe fills
        try:
            throttle.follow()
            port = str(free_port())
            for rank in range(world):
                child = {**env, "RANK": str(rank), "WORLD_SIZE": str(world),
                         "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port}
                with outs[rank].open("w") as out:
                    procs.append(subprocess.Popen(
                        [*throttle.join_prefix(rank), sys.executable, "-m",
                         "mpicoded.bench.ddp_job", str(steps), str(log)], env=child, stdout=out,
                        stderr=subprocess.STDOUT))
            deadline = time.monotonic() + TIMEOUT_S
            for p in procs:
                p.wait(timeout=max(1.0, deadline - time.monotonic()))
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            throttle.remove()
        rows = [json.loads(line) for line in log.read_text().splitlines()]
        failed = [rank for rank, p in enumerate(procs) if p.returncode]
        if failed and not any(r["record"] == "run" for r in rows):
            raise RuntimeError("DDP failed:\n" + "\n".join(o.read_text()[-2000:] for o in outs))
        if failed:  # seen here: gloo's "terminate called without an active exception"
            print(f"[bench] DDP: rank(s) {failed} failed once every rank had finished its steps "
                  "(the run's record is written, its numbers stand): "
                  f"{outs[failed[0]].read_text()[-300:].strip()!r}", file=sys.stderr, flush=True)
    makespan = next(r["makespan_s"] for r in rows if r["record"] == "run")
    return {"step_s": makespan / steps, "makespan_s": makespan,
            "curve": ddp_curve(rows, batched)}


def ddp_curve(rows: list[dict[str, Any]], batched: bool) -> list[tuple[float, float]]:
    """(seconds, value) of each step's theta from DDP's log, as mpicoded's records give them
    (each iteration's theta, at its end): the held-out accuracy of the theta a step made
    (``batched``), or the training loss, which step t logs at the theta it started from."""
    steps = [r for r in rows if r["record"] == "step"]
    if batched:
        accuracy = {r["step"]: r["accuracy"] for r in rows if r["record"] == "evaluation"}
        return [(r["at_s"], accuracy[r["step"]]) for r in steps]
    return [(before["at_s"], after["loss"]) for before, after in pairwise(steps)]


def run_mpicoded(ranks: int, flags: list[str], steps: int, schedule: Schedule,
                 batch: int | None) -> dict[str, Any]:
    """One mpicoded run; its curve of the loss, or (``batch``) of the held-out accuracy, which
    rank 0 evaluates as it goes (inside the run's time, unlike DDP's)."""
    from .ddp_job import BATCH_SEED

    watch = ["--loss-every", "1"] if batch is None else [
        "--batch-size", str(batch), "--batch-seed", str(BATCH_SEED), "--loss-every", "0",
        "--eval-every", "1"]
    run = train_run(ranks, ["--job", "mpicoded.bench.ddp_job:bench_job", "--delay", "none",
                            "--iterations", str(steps), *watch, *flags],
                    records=True, throttle=schedule)
    its = run["iteration_records"]
    seen = [(r, r["loss"] if batch is None else (r["evaluation"] or {}).get("accuracy"))
            for r in its]
    return {"step_s": run["mean_iteration_s"], "makespan_s": run["makespan_s"],
            "master_bytes": (run["master_bytes_in"] + run["master_bytes_out"]) / len(its),
            "paths": (run["config"]["reduce"], run["config"]["relay"]),
            "curve": [(r["started_s"] + r["wall_s"] - its[0]["started_s"], value)
                      for r, value in seen if value is not None]}


def time_to(curve: list[tuple[float, float]], target: float, rising: bool) -> float | None:
    """When the curve first reached ``target`` (``rising``: an accuracy, at or above it; a loss
    at or below it, within TARGET_RTOL; None: never)."""
    loss = target + abs(target) * TARGET_RTOL
    return next((t for t, value in curve if (value >= target if rising else value <= loss)),
                None)


def setup(args: argparse.Namespace) -> tuple[dict[str, str], str]:
    """The model's environment for every process of both sides, and what it trains; refuses
    flags it would ignore, or a batch the data cannot give."""
    from . import ddp_job

    if args.model == "cnn":
        given = [f for f, v in (("--samples", args.samples), ("--features", args.features),
                                ("--hidden", args.hidden)) if v is not None]
        if given:
            raise SystemExit(f"ddp: --model cnn trains on scikit-learn's digits: drop "
                             f"{', '.join(given)} (they shape the MLP)")
        try:
            import sklearn  # noqa: F401
        except ImportError:
            raise SystemExit("ddp: --model cnn needs scikit-learn: pip install "
                             "mpicoded[examples]") from None
    samples, features, hidden = (default if flag is None else flag for flag, default in zip(
        (args.samples, args.features, args.hidden), ddp_job.MLP_SHAPE, strict=True))
    os.environ.update({  # mpirun's ranks inherit it
        ddp_job.SHAPE_VAR: f"{samples},{features},{hidden}", ddp_job.MODEL_VAR: args.model,
        ddp_job.BATCH_VAR: str(args.batch_size or 0)})
    rows = len(ddp_job.data()[1])
    if args.batch_size is not None and not 1 <= args.batch_size <= rows:
        raise SystemExit(f"ddp: --batch-size {args.batch_size} is out of range: allowed 1 to "
                         f"the training rows, {rows}")
    what = (f"the digits example's CNN on {rows} digits" if args.model == "cnn" else
            f"MLP {features}-{hidden}-10 on {rows} rows")
    return {**os.environ}, what


def checked(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """The schemes and patterns asked for, checked; torch and quotas there."""
    needs_quotas("ddp")
    try:
        import torch  # noqa: F401
    except ImportError:
        raise SystemExit("ddp needs PyTorch: pip install mpicoded[torch]") from None
    schemes = DDP_SCHEMES if args.schemes is None else [
        n.strip() for n in args.schemes.split(",") if n.strip()]
    for name in schemes:
        scheme_flags(name)  # refuses a name it does not know
    patterns = chosen(args.patterns or DEFAULT_PATTERNS, PATTERNS, "--patterns")
    if "none" not in patterns:
        raise SystemExit("ddp: --patterns must include none (the target loss and the tax's "
                         "yardstick)")
    return schemes, patterns


def compare(args: argparse.Namespace, schemes: list[str], patterns: list[str],
            env: dict[str, str]) -> dict[str, Any]:
    """DDP and each scheme under each pattern, on the model ``env`` sets: every run's step,
    makespan, curve, time to the target and tax, the target, and rank 0's bytes an
    iteration of each mpicoded run."""
    ranks, steps, batch = args.ranks, args.iterations, args.batch_size
    world = ranks - 1
    runs: dict[str, dict[str, Any]] = {}
    for pattern in patterns:
        print(f"[bench] ddp, {pattern}: PyTorch DDP ...", file=sys.stderr, flush=True)
        runs[f"DDP | {pattern}"] = run_ddp(world, steps, shares(
            world, args.cap, args.small_fraction, pattern, 0), env, batch is not None)
        for name in schemes:
            print(f"[bench] ddp, {pattern}: mpicoded {name} ...", file=sys.stderr, flush=True)
            runs[f"mpicoded {name} | {pattern}"] = run_mpicoded(
                ranks, scheme_flags(name), steps,
                shares(world, args.cap, args.small_fraction, pattern, 1), batch)
    base = runs["DDP | none"]["curve"]
    target = base[max(0, math.ceil(TARGET_AT * len(base)) - 1)][1]
    for key, run in runs.items():
        system = key.split(" | ")[0]
        run["to_target_s"] = time_to(run["curve"], target, rising=batch is not None)
        run["tax"] = run["makespan_s"] / runs[f"{system} | none"]["makespan_s"]
    return {"target": target, "runs": runs}


def bench_ddp(args: argparse.Namespace) -> dict[str, Any]:
    schemes, patterns = checked(args)
    if args.params_sweep:
        from .ddp_sweep import sweep

        return sweep(args, schemes, patterns)
    batch = args.batch_size
    env, what = setup(args)
    done = compare(args, schemes, patterns, env)
    runs, target = done["runs"], done["target"]
    rows = []
    for key, run in runs.items():
        system, pattern = key.split(" | ")
        reached = run["to_target_s"]
        rows.append([system, pattern, f"{run['step_s'] * 1e3:.1f}", f"{run['makespan_s']:.2f}",
                     "never" if reached is None else f"{reached:.2f}", f"{run['tax']:.2f}"])
    steps_are = "full-batch steps" if batch is None else f"steps of {batch} rows"
    aim = (f"target loss {target:.4f}" if batch is None else
           f"target held-out accuracy {target:.4f}")
    print(f"\nPyTorch DDP against mpicoded: {args.ranks - 1} workers at {args.cap:g} of a "
          f"core, the straggler at {args.small_fraction:g} of that; {what}, {args.iterations} "
          f"{steps_are}, {aim}")
    print(table(["system", "straggler", "step (ms)", "makespan (s)", "to target (s)", "tax"],
                rows))
    summary = {}
    for pattern in patterns:
        ddp = runs[f"DDP | {pattern}"]["to_target_s"]
        best = min((runs[f"mpicoded {n} | {pattern}"]["to_target_s"] or math.inf)
                   for n in schemes)
        summary[f"ddp_over_best_mpicoded_to_target_{pattern}"] = (
            ddp / best if ddp is not None and math.isfinite(best) and best > 0 else None)
    clean = runs["DDP | none"]["to_target_s"]
    if clean:  # each scheme's worst time to the target over DDP's with nobody slow
        worst = {n: max((runs[f"mpicoded {n} | {p}"]["to_target_s"] or math.inf) / clean
                        for p in patterns) for n in schemes}
        print("\ntime to the target over DDP's with nobody slow, "
              + worst_case(worst, patterns, "torch"))
        summary["worst_over_ddp_none"] = worst
    print(f"\n{json.dumps(summary)} (goals, DDP's time to the target over mpicoded's: with "
          f"the straggler >= {15 if batch is None else 10}, under stalls >= 2, with nobody "
          "slow >= 1 / 1.05)")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "ddp.json").write_text(json.dumps({"target": target, "runs": runs,
                                                  "summary": summary}, indent=1))
    print(f"raw numbers: {out_dir / 'ddp.json'}")
    return summary
