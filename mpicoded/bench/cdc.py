"""Coded vs uncoded shuffle of paper 002's MapReduce, measured over MPI for several K and storage
profiles: the paper's load, the bytes MPI moved, and the shuffle time."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..launcher.process import run_mpi
from .common import TIMEOUT_S, table

CASES = (  # (storage, files)
    ([6, 7, 7], 12),
    ([4, 4, 4], 12),
    ([8, 8, 8], 12),
    ([2, 6, 10], 12),
    ([12, 20, 28], 40),
    ([5, 6, 7, 8], 12),
    ([6, 6, 6, 6, 6], 12),
    ([4, 6, 8, 10, 12, 14], 24),
)


def cdc_run(storage: list[int], files: int, job: str, seed: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cdc.json"
        done = run_mpi(len(storage), ["-m", "mpicoded.cdc", "--storage",
                                      ",".join(map(str, storage)), "--files", str(files),
                                      "--job", job, "--seed", str(seed), "--json", str(path)],
                       timeout=TIMEOUT_S)
        if done.returncode != 0:
            raise RuntimeError(f"mpicoded.cdc {storage} {files} failed:\n{done.output[-3000:]}")
        out: dict[str, Any] = json.loads(path.read_text())
        return out


def bench_cdc(args: argparse.Namespace) -> dict[str, Any]:
    rows, out = [], {}
    for storage, files in CASES:
        print(f"[bench] cdc {storage} N={files} ...", file=sys.stderr, flush=True)
        r = cdc_run(storage, files, "wordcount", args.seed)
        out[f"{storage}/{files}"] = r
        rows.append([str(len(storage)), ",".join(map(str, storage)), str(files),
                     f"{r['load']:g}", f"{r['uncoded_load']:g}",
                     "-" if r["lp_bound"] is None else f"{r['lp_bound']:.2f}",
                     str(r["bytes_sent"]), str(r["uncoded_bytes_sent"]),
                     f"{r['shuffle_s'] * 1e3:.2f}", f"{r['uncoded_shuffle_s'] * 1e3:.2f}",
                     "yes" if r["verified"] else "NO"])
    print("cdc: wordcount, coded vs uncoded shuffle (load in intermediate values; bytes on the "
          "wire, a multicast counted once)")
    print(table(["K", "storage", "N", "load", "uncoded", "LP", "bytes", "uncoded bytes",
                 "shuffle ms", "uncoded ms", "verified"], rows))
    return out
