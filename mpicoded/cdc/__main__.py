"""``mpirun -n K python -m mpicoded.cdc --storage M1,...,MK --files N``: a MapReduce job whose
shuffle is coded (paper 002). Each rank is a node: it maps only the files it stores, the shuffle
broadcasts XORs of intermediate values (``--uncoded``: sends each value plain, point to point),
every node decodes what it needs and reduces its share; rank 0 checks the outputs against a
single-process computation. Bad input: one line on rank 0, exit status 2.

Every node takes part in every step here, so the shuffle uses MPI collectives (a Bcast per
coded transmission) rather than the master/worker polling of mpicoded.train.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
from mpi4py import MPI

from .allocation import Allocation, allocate, check_storage
from .job import JOBS, make_files, map_file, reduce_values, reference, value_length
from .scheme import ShufflePlan, plan_shuffle, uncoded_plan

VOCABULARY = 240


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ValueError(message)


def parse(argv: list[str], n_nodes: int) -> argparse.Namespace:
    p = _Parser(prog="mpirun -n K python -m mpicoded.cdc", description=__doc__.split("\n\n")[0])
    p.add_argument("--storage", required=True, help="files each node stores: M1,M2,...,MK")
    p.add_argument("--files", type=int, required=True, help="number of input files N")
    p.add_argument("--job", choices=JOBS, default="wordcount")
    p.add_argument("--uncoded", action="store_true", help="plain unicast shuffle only")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="write the result record here")
    args = p.parse_args(argv)
    try:
        args.storage = [int(m) for m in args.storage.split(",")]
    except ValueError:
        raise ValueError(f"--storage {args.storage!r}: a comma-separated list of integers") from None
    if len(args.storage) != n_nodes:
        raise ValueError(f"--storage lists {len(args.storage)} nodes but the job has {n_nodes} "
                         f"ranks: run mpirun -n {len(args.storage)}")
    check_storage(args.storage, args.files)
    if args.json:
        try:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).touch()
        except OSError as exc:
            raise ValueError(f"--json {args.json}: cannot be written: {exc.strerror}") from None
    return args


def packets_of(value: np.ndarray, packets: int) -> list[np.ndarray]:
    """A value's bytes split into ``packets`` equal parts (values are padded to fit)."""
    raw = value.view(np.uint8)
    return np.split(raw, packets)


def shuffle(comm: MPI.Comm, plan: ShufflePlan, mine: dict[tuple[int, int], np.ndarray], coded: bool,
            size: int) -> tuple[dict[tuple[int, int, int], np.ndarray], int]:
    """Carry out the plan; returns the packets this node decoded and the payload bytes it sent.

    ``mine[(q, n)]`` holds v_{q,n} for every file this node stores. Coded: every transmission
    is one Bcast (a multicast counted once). Uncoded: each goes point to point.
    """
    rank = comm.Get_rank()
    got: dict[tuple[int, int, int], np.ndarray] = {}
    sent = 0
    packet_bytes = size // plan.packets
    for t in plan.transmissions:
        if coded:
            buf = np.zeros(packet_bytes, dtype=np.uint8)
            if rank == t.sender:
                for k, n, p in t.parts:
                    buf ^= packets_of(mine[(k, n)], plan.packets)[p]
                sent += buf.nbytes
            comm.Bcast(buf, root=t.sender)
            for k, n, p in t.parts:
                if k == rank:
                    out = buf.copy()
                    for k2, n2, p2 in t.parts:
                        if (k2, n2, p2) != (k, n, p):
                            out ^= packets_of(mine[(k2, n2)], plan.packets)[p2]
                    got[(k, n, p)] = out
        else:
            (k, n, p), = t.parts
            if rank == t.sender:
                buf = np.ascontiguousarray(packets_of(mine[(k, n)], plan.packets)[p])
                comm.Send(buf, dest=k, tag=1)
                sent += buf.nbytes
            elif rank == k:
                buf = np.empty(packet_bytes, dtype=np.uint8)
                comm.Recv(buf, source=t.sender, tag=1)
                got[(k, n, p)] = buf
    return got, sent


def run_shuffle(comm: MPI.Comm, args: argparse.Namespace, allocation: Allocation,
                plan: ShufflePlan, coded: bool, files: list[np.ndarray]) -> dict[str, Any]:
    rank, k_nodes = comm.Get_rank(), comm.Get_size()
    length = value_length(args.job, k_nodes, VOCABULARY)
    pad = (-length) % plan.packets  # so the bytes split evenly into packets
    stored = sorted(allocation.files[rank])
    mine = {}
    for n in stored:
        for q in range(k_nodes):
            v = map_file(args.job, files[n], q, k_nodes, VOCABULARY)
            mine[(q, n)] = np.concatenate([v, np.zeros(pad, dtype=np.int64)])
    size = (length + pad) * 8
    comm.Barrier()
    start = time.perf_counter()
    got, sent = shuffle(comm, plan, mine, coded, size)
    comm.Barrier()
    elapsed = time.perf_counter() - start
    values = [mine[(rank, n)] if n in allocation.files[rank] else
              np.concatenate([got[(rank, n, p)] for p in range(plan.packets)]).view(np.int64)
              for n in range(args.files)]
    output = reduce_values(args.job, rank, k_nodes, VOCABULARY, [v[:length] for v in values])
    outputs = comm.gather(output, root=0)
    bytes_sent = comm.reduce(sent, op=MPI.SUM, root=0)
    if rank:
        return {}
    assert outputs is not None and bytes_sent is not None  # rank 0 gathered them
    expected = reference(args.job, files, k_nodes, VOCABULARY)
    verified = all(np.array_equal(a, b) for a, b in zip(outputs, expected, strict=True))
    return {"load": plan.load, "bytes_sent": int(bytes_sent), "value_bytes": size,
            "shuffle_s": elapsed, "verified": verified}


def main(argv: list[str] | None = None) -> int:
    """Every rank: the shuffle, its check and its record. An exception on any rank ends the whole
    job (MPI Abort) with the rank named, instead of leaving the others in a collective for ever."""
    comm = MPI.COMM_WORLD
    try:
        return run(comm, sys.argv[1:] if argv is None else argv)
    except Exception:
        print(f"mpicoded.cdc: rank {comm.Get_rank()} failed:\n{traceback.format_exc()}",
              file=sys.stderr, flush=True)
        comm.Abort(1)
        return 1


def run(comm: MPI.Comm, argv: list[str]) -> int:
    rank = comm.Get_rank()
    problem = None
    try:
        args = parse(argv, comm.Get_size())
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    except ValueError as exc:
        problem = str(exc)
    problems = comm.allgather(problem)
    if any(problems):
        if rank == 0:
            print(f"mpicoded.cdc: error: {problems[0]}", file=sys.stderr, flush=True)
        return 2
    allocation = comm.bcast(allocate(args.storage, args.files) if rank == 0 else None, root=0)
    files = make_files(args.job, args.files, args.seed, vocabulary=VOCABULARY)
    uncoded = uncoded_plan(allocation.files, args.files)
    runs = {"uncoded": run_shuffle(comm, args, allocation, uncoded, False, files)}
    if not args.uncoded:
        plan = plan_shuffle(allocation.files, args.files)
        runs["coded"] = run_shuffle(comm, args, allocation, plan, True, files)
    if rank:
        return 0
    main_run = runs["uncoded" if args.uncoded else "coded"]
    record = {
        "storage": args.storage, "files": args.files, "job": args.job,
        "allocation": {"+".join(str(k + 1) for k in s): v for s, v in allocation.sizes.items()},
        "load": float(main_run["load"]), "uncoded_load": float(runs["uncoded"]["load"]),
        "lp_bound": allocation.bound if len(args.storage) > 3 else None,
        "bytes_sent": main_run["bytes_sent"], "uncoded_bytes_sent": runs["uncoded"]["bytes_sent"],
        "value_bytes": main_run["value_bytes"],
        "shuffle_s": main_run["shuffle_s"], "uncoded_shuffle_s": runs["uncoded"]["shuffle_s"],
        "verified": all(r["verified"] for r in runs.values()),
    }
    print(json.dumps(record))
    if args.json:
        Path(args.json).write_text(json.dumps(record) + "\n")
    return 0 if record["verified"] else 1


if __name__ == "__main__":
    sys.exit(main())
