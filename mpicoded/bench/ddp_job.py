"""The model and data of ``bench ddp``, shared by its two sides: an MLP classifier on a seeded
synthetic data set, full-batch SGD with momentum. mpicoded builds it by ``--job
mpicoded.bench.ddp_job:bench_job``; each DDP process runs this module (``python -m``) on its
shard. The size comes from MPICODED_DDP_SHAPE=ROWS,FEATURES,HIDDEN (inherited by every rank)."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterable

import numpy as np
import torch

from ..jobs.torchjob import TorchJob

SHAPE_VAR = "MPICODED_DDP_SHAPE"
CLASSES = 10
LR, MOMENTUM = 0.2, 0.9


def shape() -> tuple[int, int, int]:
    rows, features, hidden = (int(v) for v in os.environ.get(SHAPE_VAR, "60000,100,64").split(","))
    return rows, features, hidden


def model() -> torch.nn.Module:
    _, features, hidden = shape()
    torch.manual_seed(0)  # one start for every process of both sides
    return torch.nn.Sequential(torch.nn.Linear(features, hidden), torch.nn.ReLU(),
                               torch.nn.Linear(hidden, CLASSES))


def data() -> tuple[torch.Tensor, torch.Tensor]:
    """Seeded inputs and labels from a random linear teacher (learnable, not separable)."""
    rows, features, _ = shape()
    g = torch.Generator().manual_seed(7)
    X = torch.randn(rows, features, generator=g)
    teacher = torch.randn(features, CLASSES, generator=g)
    y = (X @ teacher + 2.0 * torch.randn(rows, CLASSES, generator=g)).argmax(1)
    return X, y


def optimizer(params: Iterable[torch.nn.Parameter]) -> torch.optim.Optimizer:
    return torch.optim.SGD(params, lr=LR, momentum=MOMENTUM)


def bench_job() -> TorchJob:
    """mpicoded's side: the model, the summed loss, the data loaded on rank 0."""
    return TorchJob(model(), torch.nn.CrossEntropyLoss(reduction="sum"), data,
                    optimizer=optimizer)


def ddp_main(steps: int, out: str) -> None:
    """One DDP process (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the environment): its
    shard of rows, full-batch steps whose all-reduced gradient is the whole data set's mean;
    rank 0 writes the loss and wall time of every step to ``out`` (its first line, the start,
    as soon as the group is up: the throttle's clock)."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    X, y = data()
    shard = np.array_split(np.arange(len(y)), world)[rank]
    X, y, total = X[shard], y[shard], len(data()[1])
    net = DistributedDataParallel(model())
    opt = optimizer(net.parameters())
    loss_fn = torch.nn.CrossEntropyLoss(reduction="sum")
    dist.barrier()
    log = open(out, "w", buffering=1) if rank == 0 else None  # noqa: SIM115
    if log is not None:
        log.write(json.dumps({"record": "start"}) + "\n")
    start = time.perf_counter()
    for step in range(steps):
        opt.zero_grad()
        loss = loss_fn(net(X), y)
        (loss * world / total).backward()  # DDP averages over processes: the mean over rows
        opt.step()
        seen = loss.detach().clone()
        dist.all_reduce(seen)  # the loss at the theta this step started from
        if log is not None:
            log.write(json.dumps({"record": "step", "step": step, "loss": float(seen) / total,
                                  "at_s": time.perf_counter() - start}) + "\n")
    dist.barrier()
    if log is not None:
        log.write(json.dumps({"record": "run", "makespan_s": time.perf_counter() - start}) + "\n")
        log.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    ddp_main(int(sys.argv[1]), sys.argv[2])
